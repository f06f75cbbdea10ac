"""The launcher: walks a claim's offerings with CreateFleet, retrying in milliseconds on ICE.

Each CreateFleet call carries the open offerings of one capacity type (see core.launch_plan).
Offerings that fail for lack of capacity go to the unavailable-offerings cache and the next
call goes out at once with what remains; only when nothing remains does the launch fail.
A claim is launched at most once: launches of one claim are serialized in this process, an
instance already tagged with the claim is returned as is, and the ClientToken is derived from
the claim and the call's offerings, so a second replica's identical call is deduplicated by EC2.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.provider import (
    CloudProvider,
    FleetError,
    FleetOverride,
    FleetRequest,
    FleetTemplate,
    Instance,
)
from actuator_svc.core.fleet_errors import is_capacity_type_wide, is_unavailable_offering
from actuator_svc.core.launch_plan import FleetBatch, next_batch
from actuator_svc.core.launch_template import LaunchTemplateConfig
from actuator_svc.core.node_class import LaunchRequest
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.tags import (
    CLUSTER_TAG,
    NODECLAIM_TAG,
    NODECLASS_TAG,
    NODEPOOL_TAG,
    cluster_tag_key,
    resource_tags,
)
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint, NodeRegistration, render_user_data
from actuator_svc.errors import CloudPermanentError, OfferingsExhaustedError
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver, ResolvedNodeClass

log = structlog.get_logger("actuator_svc.launcher")
NO_INSTANCE_LAUNCHED: Final = "NoInstanceLaunched"


@dataclass(frozen=True)
class OfferingFailure:
    """One offering's error in one CreateFleet call (offering None: the call named none)."""

    offering: OfferingKey | None
    code: str
    message: str


@dataclass(frozen=True)
class LaunchAttempt:
    """One CreateFleet call: when (epoch seconds), with which offerings, and what failed."""

    start_seconds: float
    end_seconds: float
    offerings: tuple[OfferingKey, ...]
    errors: tuple[OfferingFailure, ...]


@dataclass(frozen=True)
class SkippedOffering:
    """An offering not tried: cached as unavailable, or not launchable with this node class."""

    offering: OfferingKey
    reason: str
    until_seconds: float = 0.0


@dataclass(frozen=True)
class LaunchResult:
    """The instance behind a claim, and how it was obtained."""

    instance: Instance
    offering: OfferingKey
    price_per_hour: float
    attempts: tuple[LaunchAttempt, ...]


def client_token(cluster_name: str, nodeclaim_name: str, batch: FleetBatch) -> str:
    """A ClientToken (<= 64 chars) unique to the claim and the offerings of one call."""
    text = "/".join([cluster_name, nodeclaim_name, *(str(k) for k in batch.offerings)])
    return "daiku-" + hashlib.sha256(text.encode()).hexdigest()[:48]


class Launcher:
    """Launches NodeClaims; see the module docstring for the guarantees."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        catalog: Catalog,
        resolver: NodeClassResolver,
        unavailable: UnavailableOfferings,
        cluster: ClusterEndpoint,
        clock: Callable[[], float] = time.time,
        metrics: ActuatorMetrics | None = None,
    ) -> None:
        self._cloud = cloud
        self._catalog = catalog
        self._resolver = resolver
        self._unavailable = unavailable
        self._cluster = cluster
        self._clock = clock
        self._metrics = metrics or ActuatorMetrics()
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiters: dict[str, int] = {}

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch the claim, or return its instance if it has one.

        Raises OfferingsExhaustedError when no offering is left, InvalidRequestError when the
        node class resolves to nothing, CloudPermanentError when every CreateFleet error was
        permanent, CloudUnavailableError when EC2 kept throttling."""
        name = request.nodeclaim_name
        lock = self._locks.setdefault(name, asyncio.Lock())
        self._waiters[name] = self._waiters.get(name, 0) + 1
        try:
            async with lock:
                return await self._launch(request)
        finally:
            self._waiters[name] -= 1
            if not self._waiters[name]:
                del self._waiters[name], self._locks[name]

    async def existing(self, nodeclaim_name: str) -> Instance | None:
        """The live instance tagged with the claim in this cluster, if any (oldest first)."""
        found = await self._cloud.find_instances(
            {NODECLAIM_TAG: nodeclaim_name, CLUSTER_TAG: self._cluster.name}
        )
        found.sort(key=lambda i: (i.launch_time is None, i.launch_time, i.id))
        return found[0] if found else None

    async def _launch(self, request: LaunchRequest) -> LaunchResult:
        started = time.monotonic()
        bound = log.bind(nodeclaim=request.nodeclaim_name, nodepool=request.nodepool_name)
        instance = await self.existing(request.nodeclaim_name)
        if instance is not None:
            key = OfferingKey(instance.instance_type, instance.zone, instance.capacity_type)
            bound.info("nodeclaim_already_launched", instance_id=instance.id)
            return LaunchResult(instance, key, self._catalog.price(key), ())
        resolved = await self._resolver.resolve(request.node_class)
        skipped = await self._launchable(request, resolved)
        tags = resource_tags(
            cluster_name=self._cluster.name,
            nodepool_name=request.nodepool_name,
            nodeclaim_name=request.nodeclaim_name,
            user_tags=request.node_class.tags,
        )
        attempts: list[LaunchAttempt] = []
        failed: dict[OfferingKey, str] = {}
        permanent: list[OfferingFailure] = []
        while True:
            now = self._clock()
            cached = self._unavailable.unavailable_among(request.offerings, now)
            for key, entry in cached.items():
                if key not in failed:
                    skipped.setdefault(key, SkippedOffering(key, entry.reason, entry.until_seconds))
            batch = next_batch(request.offerings, set(skipped) | set(failed))
            if batch is None:
                self._metrics.launches.labels(capacity_type="", outcome="exhausted").inc()
                if permanent and not any(is_unavailable_offering(c) for c in failed.values()):
                    first = permanent[0]
                    raise CloudPermanentError("CreateFleet", first.code, first.message)
                raise OfferingsExhaustedError(
                    request.nodeclaim_name,
                    attempts,
                    [s for s in skipped.values() if s.offering not in failed],
                )
            fleet = await self._fleet_request(request, resolved, batch, tags)
            start = self._clock()
            tick = time.monotonic()
            result = await self._cloud.create_fleet(fleet)
            self._metrics.create_fleet_seconds.labels(capacity_type=batch.capacity_type).observe(
                time.monotonic() - tick
            )
            errors = self._record_errors(
                request,
                batch,
                result.errors,
                failed,
                permanent,
                launched=result.instance_id is not None,
            )
            attempts.append(LaunchAttempt(start, self._clock(), batch.offerings, errors))
            if result.instance_id is not None:
                key = OfferingKey(result.instance_type, result.zone, batch.capacity_type)
                price = self._catalog.price(key)
                arch = await self._catalog.architecture(key.instance_type) or "x86_64"
                launched = Instance(
                    id=result.instance_id,
                    instance_type=key.instance_type,
                    zone=key.zone,
                    capacity_type=key.capacity_type,
                    state="pending",
                    image_id=resolved.image_by_architecture.get(arch, ""),
                    launch_time=None,
                    tags=tags,
                    # What the call launched with: the override's subnet for the zone EC2
                    # chose and the launch template's groups (the same DescribeInstances shows).
                    subnet_id=subnet.id
                    if (subnet := resolved.subnet_by_zone.get(key.zone))
                    else "",
                    security_group_ids=tuple(sorted(set(resolved.security_group_ids))),
                )
                self._metrics.launches.labels(
                    capacity_type=key.capacity_type, outcome="launched"
                ).inc()
                bound.info(
                    "nodeclaim_launched",
                    instance_id=result.instance_id,
                    instance_type=key.instance_type,
                    zone=key.zone,
                    capacity_type=key.capacity_type,
                    price=price,
                    attempts=len(attempts),
                    latency_ms=round((time.monotonic() - started) * 1000, 3),
                )
                return LaunchResult(launched, key, price, tuple(attempts))
            if not result.errors:
                # No instance and no reason: treat the whole batch as failed, to move on.
                for key in batch.offerings:
                    failed[key] = NO_INSTANCE_LAUNCHED

    def _record_errors(
        self,
        request: LaunchRequest,
        batch: FleetBatch,
        errors: Sequence[FleetError],
        failed: dict[OfferingKey, str],
        permanent: list[OfferingFailure],
        *,
        launched: bool,
    ) -> tuple[OfferingFailure, ...]:
        """Map each fleet error to the offerings it names; cache the capacity failures."""
        now = self._clock()
        recorded = []
        for error in errors:
            # An account-wide limit rules out the whole capacity type, unless the same call
            # still launched an instance of it.
            if is_capacity_type_wide(error.code) and not launched:
                keys = [k for k in request.offerings if k.capacity_type == batch.capacity_type]
            else:
                keys = [
                    k
                    for k in batch.offerings
                    if (not error.instance_type or k.instance_type == error.instance_type)
                    and (not error.zone or k.zone == error.zone)
                ]
            ice = is_unavailable_offering(error.code)
            for key in keys:
                failed[key] = error.code
                if ice:
                    self._unavailable.mark(key, error.code, now)
                    self._metrics.unavailable_offering_errors.labels(
                        instance_type=key.instance_type,
                        zone=key.zone,
                        capacity_type=key.capacity_type,
                        error_code=error.code,
                    ).inc()
                if key in batch.offerings:
                    recorded.append(OfferingFailure(key, error.code, error.message))
            if not keys:
                recorded.append(OfferingFailure(None, error.code, error.message))
            if not ice:
                permanent.append(OfferingFailure(None, error.code, error.message))
        if recorded:
            log.info(
                "create_fleet_offerings_failed",
                nodeclaim=request.nodeclaim_name,
                errors=[f"{e.offering}: {e.code}" for e in recorded],
            )
        return tuple(recorded)

    async def _launchable(
        self, request: LaunchRequest, resolved: ResolvedNodeClass
    ) -> dict[OfferingKey, SkippedOffering]:
        """Offerings this node class cannot launch at all, with the reason."""
        skipped: dict[OfferingKey, SkippedOffering] = {}
        for key in request.offerings:
            arch = await self._catalog.architecture(key.instance_type)
            if arch is None:
                skipped[key] = SkippedOffering(key, "UnknownInstanceType")
            elif not self._catalog.is_offered(key.instance_type, key.zone):
                skipped[key] = SkippedOffering(key, "NotOfferedInZone")
            elif key.zone not in resolved.subnet_by_zone:
                skipped[key] = SkippedOffering(key, "NoSubnetInZone")
            elif arch not in resolved.image_by_architecture:
                skipped[key] = SkippedOffering(key, "NoImageForArchitecture")
        return skipped

    async def _fleet_request(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        batch: FleetBatch,
        tags: dict[str, str],
    ) -> FleetRequest:
        """The CreateFleet call for a batch: one launch template per architecture."""
        by_arch: dict[str, list[FleetOverride]] = {}
        for priority, key in enumerate(batch.offerings):
            arch = await self._catalog.architecture(key.instance_type) or "x86_64"
            by_arch.setdefault(arch, []).append(
                FleetOverride(
                    instance_type=key.instance_type,
                    subnet_id=resolved.subnet_by_zone[key.zone].id,
                    zone=key.zone,
                    priority=float(priority),
                )
            )
        templates = []
        for arch, overrides in by_arch.items():
            config = self._template_config(request, resolved, resolved.image_by_architecture[arch])
            await self._cloud.ensure_launch_template(config)
            templates.append(FleetTemplate(config.name, tuple(overrides)))
        return FleetRequest(
            client_token=client_token(self._cluster.name, request.nodeclaim_name, batch),
            capacity_type=batch.capacity_type,
            allocation_strategy=batch.allocation_strategy,
            templates=tuple(templates),
            tags=tags,
        )

    def _template_config(
        self, request: LaunchRequest, resolved: ResolvedNodeClass, image_id: str
    ) -> LaunchTemplateConfig:
        node_class = request.node_class
        labels = {**request.labels, NODEPOOL_TAG: request.nodepool_name}
        registration = NodeRegistration(
            labels=labels,
            taints=request.taints + request.startup_taints,
            max_pods=request.kubelet.max_pods,
        )
        template_tags = {
            **node_class.tags,
            CLUSTER_TAG: self._cluster.name,
            NODEPOOL_TAG: request.nodepool_name,
            NODECLASS_TAG: node_class.name,
            cluster_tag_key(self._cluster.name): "owned",
        }
        return LaunchTemplateConfig(
            cluster_name=self._cluster.name,
            image_id=image_id,
            user_data=render_user_data(self._cluster, registration, node_class.user_data),
            security_group_ids=resolved.security_group_ids,
            instance_profile=node_class.instance_profile,
            block_devices=node_class.block_devices,
            metadata_options=node_class.metadata_options,
            associate_public_ip_address=node_class.associate_public_ip_address,
            tags=template_tags,
        )
