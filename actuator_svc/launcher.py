"""The launcher: walks a claim's offerings with CreateFleet, retrying in milliseconds on ICE.

Each CreateFleet call carries the open offerings of one capacity type (see core.launch_plan).
Offerings that fail for lack of capacity go to the unavailable-offerings cache and the next
call goes out at once with what remains; only when nothing remains does the launch fail.

A claim gets one instance however many replicas launch it (decision 0014). Its CreateFleet
calls are numbered steps, and step k's ClientToken depends only on the cluster, the claim and
k, never on what one replica holds alone (its ICE cache, its resolved node class). So every
replica's step k is one EC2 call: the first to arrive decides it, a repeat with the same
parameters gets the same answer, and a repeat with other parameters gets
IdempotentParameterMismatch; that replica then takes the instance the step launched (found by
the claim tag) or, when the step launched none, goes on to step k+1. A replica remembers the
next unused step of the claims it launched, so a retry after an exhausted launch or a relaunch
of a terminated claim sends fresh calls; a replica that does not remember walks the used steps
again, whose answers EC2 replays, and skips an answer naming an instance that is gone.
Concurrent identical requests for a claim share one in-flight launch.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.provider import (
    CloudProvider,
    FleetError,
    FleetRequest,
    FleetResult,
    Instance,
)
from actuator_svc.core.fleet_errors import (
    IDEMPOTENT_PARAMETER_MISMATCH,
    is_capacity_type_wide,
    is_unavailable_offering,
)
from actuator_svc.core.launch_plan import FleetBatch, next_batch
from actuator_svc.core.node_class import LaunchRequest
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.tags import (
    CLUSTER_TAG,
    NODECLAIM_TAG,
    resource_tags,
)
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint
from actuator_svc.errors import (
    CloudPermanentError,
    CloudUnavailableError,
    OfferingsExhaustedError,
)
from actuator_svc.fleet_requests import (
    INSUFFICIENT_FREE_ADDRESSES,
    FleetRequestBuilder,
    SkippedOffering,
    SubnetPicker,
)
from actuator_svc.launch_templates import LaunchTemplateCollector
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver, ResolvedNodeClass

log = structlog.get_logger("actuator_svc.launcher")
NO_INSTANCE_LAUNCHED: Final = "NoInstanceLaunched"
GONE_STATES: Final = frozenset({"shutting-down", "terminated"})
# After losing a step to another replica, how long to look for the instance that step may have
# launched (DescribeInstances is eventually consistent on AWS; the emulator shows it at once).
DEFAULT_LOOKUP_SECONDS: Final = 2.0
_LOOKUP_INTERVAL_SECONDS: Final = 0.2
# Claims whose next unused step this process remembers; the oldest are forgotten first.
MAX_REMEMBERED_CLAIMS: Final = 10_000
# Steps one launch may take: a few per capacity type, plus steps lost to other replicas and
# stale answers of earlier lives of the claim. Beyond it something loops; give up retryably.
MAX_STEPS_PER_LAUNCH: Final = 100


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
class LaunchResult:
    """The instance behind a claim, and how it was obtained."""

    instance: Instance
    offering: OfferingKey
    price_per_hour: float
    attempts: tuple[LaunchAttempt, ...]


def client_token(cluster_name: str, nodeclaim_name: str, step: int, nodeclaim_uid: str = "") -> str:
    """The ClientToken (<= 64 chars) of the claim's `step`-th CreateFleet call: the same on
    every replica, whatever offerings its own ICE cache leaves open. With the claim object's
    uid, the steps are that object's: a claim made again under the same name starts afresh
    (without it, the text is what it was before the uid existed, so tokens stay stable)."""
    text = f"{cluster_name}/{nodeclaim_name}/{step}"
    if nodeclaim_uid:
        text = f"{cluster_name}/{nodeclaim_name}/{nodeclaim_uid}/{step}"
    return "daiku-" + hashlib.sha256(text.encode()).hexdigest()[:48]


class StepMemory:
    """The next unused launch step of each claim this process launched (bounded, oldest out)."""

    def __init__(self, max_claims: int = MAX_REMEMBERED_CLAIMS) -> None:
        self._next: OrderedDict[str, int] = OrderedDict()
        self._max_claims = max_claims

    def next_step(self, nodeclaim_name: str) -> int:
        """The first step not known to be used (0 for a claim never seen)."""
        return self._next.get(nodeclaim_name, 0)

    def used(self, nodeclaim_name: str, step: int) -> None:
        """Step `step` of the claim has been sent (by this or another replica)."""
        self._next[nodeclaim_name] = max(step + 1, self._next.get(nodeclaim_name, 0))
        self._next.move_to_end(nodeclaim_name)
        while len(self._next) > self._max_claims:
            self._next.popitem(last=False)


def _exhausted(
    request: LaunchRequest,
    attempts: Sequence[LaunchAttempt],
    failed: dict[OfferingKey, str],
    permanent: Sequence[OfferingFailure],
    skipped: dict[OfferingKey, SkippedOffering],
) -> CloudPermanentError | OfferingsExhaustedError:
    """Why nothing is left to try: a permanent error when every failure was permanent, else
    the exhausted offerings with every attempt and skipped offering. A call that launched
    nothing and named no error is no permanent failure: capacity may come back."""
    retryable = (is_unavailable_offering(c) or c == NO_INSTANCE_LAUNCHED for c in failed.values())
    if permanent and not any(retryable):
        first = permanent[0]
        return CloudPermanentError("CreateFleet", first.code, first.message)
    return OfferingsExhaustedError(
        request.nodeclaim_name,
        attempts,
        [s for s in skipped.values() if s.offering not in failed],
    )


def _override_subnet_id(fleet: FleetRequest, key: OfferingKey) -> str:
    """The subnet the call named for the offering's type and zone ("" if it named none)."""
    return next(
        (
            o.subnet_id
            for t in fleet.templates
            for o in t.overrides
            if o.instance_type == key.instance_type and o.zone == key.zone
        ),
        "",
    )


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
        lookup_seconds: float = DEFAULT_LOOKUP_SECONDS,
        templates: LaunchTemplateCollector | None = None,
    ) -> None:
        self._cloud = cloud
        self._catalog = catalog
        self._resolver = resolver
        self._unavailable = unavailable
        self._cluster = cluster
        self._clock = clock
        self._metrics = metrics or ActuatorMetrics()
        self._lookup_seconds = lookup_seconds
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiters: dict[str, int] = {}
        self._in_flight: dict[tuple[str, str], asyncio.Task[LaunchResult]] = {}
        self._steps = StepMemory()
        self._subnets = SubnetPicker(clock)
        self._fleet_requests = FleetRequestBuilder(
            cloud, catalog=catalog, cluster=cluster, subnets=self._subnets, templates=templates
        )

    @property
    def launching(self) -> frozenset[str]:
        """The claims with a launch running or waiting now: the launcher keeps no state for a
        claim once its launches are over."""
        return frozenset(self._locks)

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch the claim, or return its instance if it has one.

        Identical concurrent requests share one launch (a caller that gives up does not cancel
        it for the others); different requests for one claim run one after the other.
        Raises OfferingsExhaustedError when no offering is left, InvalidRequestError when the
        node class resolves to nothing, CloudPermanentError when every CreateFleet error was
        permanent, CloudUnavailableError when EC2 kept throttling."""
        key = (request.nodeclaim_name, repr(request))
        task = self._in_flight.get(key)
        if task is None:
            task = asyncio.create_task(self._serialized(request))
            self._in_flight[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def _finished(self, key: tuple[str, str], task: asyncio.Task[LaunchResult]) -> None:
        # A failure every caller gave up on needs no retrieving here: asyncio.shield marks the
        # inner task's exception retrieved when its outer future was cancelled.
        if self._in_flight.get(key) is task:
            del self._in_flight[key]

    async def _serialized(self, request: LaunchRequest) -> LaunchResult:
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
        """The live instance tagged with the claim in this cluster, if any (oldest first); one
        shutting down is the claim's past, not its instance."""
        found = [
            i
            for i in await self._cloud.find_instances(
                {NODECLAIM_TAG: nodeclaim_name, CLUSTER_TAG: self._cluster.name}
            )
            if i.state not in GONE_STATES
        ]
        found.sort(key=lambda i: (i.launch_time is None, i.launch_time, i.id))
        return found[0] if found else None

    def _found(self, instance: Instance) -> LaunchResult:
        key = OfferingKey(
            instance.instance_type,
            instance.zone,
            instance.capacity_type,
            instance.capacity_reservation_id,
            instance.capacity_reservation_type,
        )
        return LaunchResult(instance, key, self._catalog.price(key), ())

    async def _launched_elsewhere(self, nodeclaim_name: str) -> Instance | None:
        """The claim's instance after another replica decided a step, if that step launched
        one: looked for until it shows or `lookup_seconds` pass."""
        deadline = time.monotonic() + self._lookup_seconds
        while (found := await self.existing(nodeclaim_name)) is None:
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(_LOOKUP_INTERVAL_SECONDS)
        return found

    async def _is_gone(self, instance_id: str) -> bool:
        """Whether the instance is shutting down or terminated: a step's answer replayed from
        an earlier life of the claim. An instance EC2 does not show is taken as alive (a fresh
        launch may not show yet)."""
        found = await self._cloud.find_instances(
            {CLUSTER_TAG: self._cluster.name}, include_terminated=True, instance_ids=[instance_id]
        )
        return any(i.state in GONE_STATES for i in found)

    async def _launch(self, request: LaunchRequest) -> LaunchResult:
        started = time.monotonic()
        bound = log.bind(nodeclaim=request.nodeclaim_name, nodepool=request.nodepool_name)
        name = request.nodeclaim_name
        instance = await self.existing(name)
        if instance is not None:
            bound.info("nodeclaim_already_launched", instance_id=instance.id)
            return self._found(instance)
        resolved = await self._resolver.resolve(request.node_class)
        skipped = await self._fleet_requests.unlaunchable(request, resolved)
        tags = resource_tags(
            cluster_name=self._cluster.name,
            nodepool_name=request.nodepool_name,
            nodeclaim_name=request.nodeclaim_name,
            user_tags=request.node_class.tags,
        )
        attempts: list[LaunchAttempt] = []
        failed: dict[OfferingKey, str] = {}
        permanent: list[OfferingFailure] = []
        first_step = step = self._steps.next_step(name)
        while step - first_step < MAX_STEPS_PER_LAUNCH:
            self._skip_unavailable_now(request, resolved, skipped, failed)
            batch = next_batch(request.offerings, set(skipped) | set(failed))
            if batch is None:
                self._metrics.launches.labels(capacity_type="", outcome="exhausted").inc()
                raise _exhausted(request, attempts, failed, permanent, skipped)
            token = client_token(
                self._cluster.name, request.nodeclaim_name, step, request.nodeclaim_uid
            )
            fleet = await self._fleet_requests.build(request, resolved, batch, tags, token)
            start = self._clock()
            result = await self._send(fleet, name, step, bound)
            step += 1
            if isinstance(result, Instance):
                return self._found(result)
            if result is None:
                continue
            errors = self._record_errors(
                request,
                batch,
                result.errors,
                failed,
                permanent,
                launched=result.instance_id is not None,
                resolved=resolved,
            )
            attempts.append(LaunchAttempt(start, self._clock(), batch.offerings, errors))
            if result.instance_id is not None:
                launched = await self._launched(
                    result.instance_id, result, fleet, batch=batch, resolved=resolved, tags=tags
                )
                self._metrics.launches.labels(
                    capacity_type=launched.offering.capacity_type, outcome="launched"
                ).inc()
                bound.info(
                    "nodeclaim_launched",
                    instance_id=result.instance_id,
                    instance_type=launched.offering.instance_type,
                    zone=launched.offering.zone,
                    capacity_type=launched.offering.capacity_type,
                    price=launched.price_per_hour,
                    attempts=len(attempts),
                    latency_ms=round((time.monotonic() - started) * 1000, 3),
                )
                return LaunchResult(
                    launched.instance, launched.offering, launched.price_per_hour, tuple(attempts)
                )
            if not result.errors:
                # No instance and no reason: treat the whole batch as failed, to move on.
                for key in batch.offerings:
                    failed[key] = NO_INSTANCE_LAUNCHED
        raise CloudUnavailableError(
            "CreateFleet", "TooManySteps", f"no launch after {MAX_STEPS_PER_LAUNCH} calls"
        )

    async def _send(
        self,
        fleet: FleetRequest,
        name: str,
        step: int,
        bound: structlog.typing.FilteringBoundLogger,
    ) -> FleetResult | Instance | None:
        """Send one step: its answer; or the instance another replica launched in it; or None
        when the step launched nothing now (another replica's step without an instance, or an
        answer replayed from an earlier life of the claim)."""
        tick = time.monotonic()
        try:
            result = await self._cloud.create_fleet(fleet)
        except CloudPermanentError as exc:
            if exc.code != IDEMPOTENT_PARAMETER_MISMATCH:
                raise
            # Another replica decided this step with its own choice of offerings.
            self._steps.used(name, step)
            bound.info("launch_step_taken_by_another_replica", step=step)
            return await self._launched_elsewhere(name)
        self._steps.used(name, step)
        self._metrics.create_fleet_seconds.labels(capacity_type=fleet.capacity_type).observe(
            time.monotonic() - tick
        )
        if result.instance_id is not None and await self._is_gone(result.instance_id):
            bound.info("launch_step_answered_for_a_gone_instance", step=step)
            return None
        return result

    async def _launched(
        self,
        instance_id: str,
        result: FleetResult,
        fleet: FleetRequest,
        *,
        batch: FleetBatch,
        resolved: ResolvedNodeClass,
        tags: dict[str, str],
    ) -> LaunchResult:
        """The instance a step launched, as the call launched it (no attempts yet)."""
        # The batch's offering EC2 chose (for reserved ones: which reservation it ran in).
        key = next(
            (
                k
                for k in batch.offerings
                if k.instance_type == result.instance_type and k.zone == result.zone
            ),
            OfferingKey(result.instance_type, result.zone, batch.capacity_type),
        )
        arch = await self._catalog.architecture(key.instance_type) or "x86_64"
        instance = Instance(
            id=instance_id,
            instance_type=key.instance_type,
            zone=key.zone,
            capacity_type=key.capacity_type,
            state="pending",
            image_id=resolved.image_by_architecture.get(arch, ""),
            launch_time=None,
            tags=tags,
            # What the call launched with: the override's subnet for the zone EC2 chose and
            # the launch template's groups (the same DescribeInstances shows). The subnet is
            # read from the call, not picked again: the same answer may have found it full.
            subnet_id=_override_subnet_id(fleet, key),
            security_group_ids=tuple(sorted(set(resolved.security_group_ids))),
            capacity_reservation_id=key.capacity_reservation_id,
            capacity_reservation_type=key.capacity_reservation_type,
        )
        return LaunchResult(instance, key, self._catalog.price(key), ())

    def _skip_unavailable_now(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        skipped: dict[OfferingKey, SkippedOffering],
        failed: dict[OfferingKey, str],
    ) -> None:
        """Add to `skipped` the offerings cached as unavailable and those of a zone whose
        subnets all ran out of addresses (during this launch or a recent one)."""
        now = self._clock()
        cached = self._unavailable.unavailable_among(request.offerings, now)
        for key, entry in cached.items():
            if key not in failed:
                skipped.setdefault(key, SkippedOffering(key, entry.reason, entry.until_seconds))
        for key in request.offerings:
            full = (
                key.zone in resolved.subnet_by_zone
                and self._subnets.pick(resolved, key.zone) is None
            )
            if full and key not in skipped:
                skipped[key] = SkippedOffering(key, INSUFFICIENT_FREE_ADDRESSES)

    def _record_errors(
        self,
        request: LaunchRequest,
        batch: FleetBatch,
        errors: Sequence[FleetError],
        failed: dict[OfferingKey, str],
        permanent: list[OfferingFailure],
        *,
        launched: bool,
        resolved: ResolvedNodeClass,
    ) -> tuple[OfferingFailure, ...]:
        """Map each fleet error to the offerings it names; cache the capacity failures."""
        now = self._clock()
        recorded = []
        for error in errors:
            if self._subnets.mark_full(resolved, error):
                recorded += [
                    OfferingFailure(k, error.code, error.message)
                    for k in batch.offerings
                    if k.zone == error.zone
                    and (not error.instance_type or k.instance_type == error.instance_type)
                ]
                continue
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
