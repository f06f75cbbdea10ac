"""Launch one NodeClaim through the actuator and record the result on the claim.

Used by the provisioner right after it creates a claim and by the lifecycle controller for a
claim left without `Launched` (the scheduler restarted mid-launch): LaunchNodeClaim is
idempotent per claim name, so the second call returns the instance the first one started.

Outcomes:
- launched: the claim's status gets providerID, imageID, capacity, allocatable and
  `Launched=True`; its labels the instance type, zone, capacity type and the type's labels;
  its annotations the instance's subnet and security groups (`daiku.dev/subnet-id`,
  `daiku.dev/security-group-ids`: sorted, comma-separated), which drift compares with the
  EC2NodeClass's status (NodeClaim status has no fields for them).
- exhausted (RESOURCE_EXHAUSTED: every offering failed): the failed offerings go to the
  unavailable-offerings cache and the claim is deleted; its pods return to the next batch.
- failed (a permanent error: bad node class, bad request): the claim is deleted, with an event
  on its NodePool, and its offerings are kept out of solves for the TTL (no churn).
- retry (actuator unavailable, deadline): the claim stays; the lifecycle controller tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import structlog

from scheduler_svc.actuator_client import LaunchedInstance, OfferingChoice, TaintSpec
from scheduler_svc.core.disruption import SECURITY_GROUP_IDS_ANNOTATION, SUBNET_ID_ANNOTATION
from scheduler_svc.core.model import UnavailableOffering
from scheduler_svc.core.nodeclass import KubeletSpec, NodeClassSpec
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    LABEL_ZONE_ID,
)
from scheduler_svc.core.reservations import LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE
from scheduler_svc.core.root_volume import (
    GIB,
    ephemeral_allocatable_bytes,
    nodefs_eviction_percent,
)
from scheduler_svc.core.taints import Taint, TaintEffect
from scheduler_svc.errors import (
    ActuatorError,
    InvalidObjectError,
    KubeApiError,
    ResourceExhaustedError,
    UnavailableError,
)
from scheduler_svc.kube.convert import (
    kubelet_from_k8s,
    node_class_from_k8s,
    zone_ids_from_node_class,
)
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, KubeObject
from scheduler_svc.kube.writer import KubeWriter
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.nodeclass.pinning import pin_resolved
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.provisioning.nodeclaim_template import (
    UNREGISTERED_TAINT,
    launch_request_of,
    resource_list,
)
from scheduler_svc.provisioning.root_volume import launch_root_volume_bytes
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)

_RECORDED_MEMORY = 10_000
ATTEMPTS_ANNOTATION = "daiku.dev/launch-attempts"
# The root volume a claim of a growing class launched with (core.root_volume), for operators.
ROOT_VOLUME_SIZE_ANNOTATION = "daiku.dev/root-volume-size"
FAILED_OFFERINGS_ANNOTATION = "daiku.dev/launch-failed-offerings"


class LaunchOutcome(StrEnum):
    LAUNCHED = "launched"
    EXHAUSTED = "exhausted"
    FAILED = "failed"
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class LaunchResult:
    outcome: LaunchOutcome
    claim: KubeObject | None  # the claim as written after a launch
    instance: LaunchedInstance | None = None
    error: str = ""


class Launcher(Protocol):
    async def launch_nodeclaim(
        self,
        *,
        nodeclaim_name: str,
        nodepool_name: str,
        offerings: Any,
        node_class: NodeClassSpec,
        labels: Any = None,
        taints: Any = (),
        startup_taints: Any = (),
        kubelet: KubeletSpec | None = None,
    ) -> LaunchedInstance: ...


def _taint(spec: dict[str, str]) -> TaintSpec:
    return Taint(key=spec["key"], effect=TaintEffect(spec["effect"]), value=spec.get("value", ""))


class ClaimLauncher:
    """Launches claims (see the module docstring for the outcomes)."""

    def __init__(
        self,
        *,
        actuator: Any,
        writer: KubeWriter,
        mirror: ClusterMirror,
        catalog: InstanceTypeCatalog,
        unavailable: UnavailableOfferingsCache,
        metrics: SchedulerMetrics,
        max_concurrent_launches: int = 32,
    ) -> None:
        self._actuator = actuator
        # Bounded: a 1,000-pod burst must not open hundreds of CreateFleet calls at once (EC2
        # throttles CreateFleet; the actuator walks offerings per call anyway).
        self._slots = asyncio.Semaphore(max_concurrent_launches)
        # Claims this process recorded as launched: the mirror may not show `Launched` yet, and
        # a relaunch then would be harmless (idempotent) but count and write twice.
        self._recorded: OrderedDict[str, None] = OrderedDict()
        self._writer = writer
        self._mirror = mirror
        self._catalog = catalog
        self._unavailable = unavailable
        self._metrics = metrics

    async def launch(self, claim: KubeObject) -> LaunchResult:
        """Launch `claim`'s instance and record it (never raises for the expected failures)."""
        name = str((claim.get("metadata") or {}).get("name", ""))
        if name in self._recorded:
            return LaunchResult(LaunchOutcome.LAUNCHED, None)
        return await self._launch(name, claim)

    async def _launch(self, name: str, claim: KubeObject) -> LaunchResult:
        bound = log.bind(nodeclaim=name)
        try:
            request = launch_request_of(claim)
            node_class_obj = self._node_class(name, request.node_class_name)
            node_class = pin_resolved(node_class_from_k8s(node_class_obj), node_class_obj)
            kubelet = kubelet_from_k8s(node_class_obj)
            root_volume = launch_root_volume_bytes(
                node_class, kubelet, request.ephemeral_storage_bytes
            )
            if root_volume:
                node_class = node_class.with_root_volume_size(root_volume)
        except (ValueError, InvalidObjectError) as error:
            bound.warning("nodeclaim_launch_invalid", error=str(error))
            return await self._give_up(claim, LaunchOutcome.FAILED, str(error))
        offerings: list[OfferingChoice] = list(request.offerings)
        try:
            async with self._slots:
                instance = await self._actuator.launch_nodeclaim(
                    nodeclaim_name=name,
                    nodepool_name=request.nodepool_name,
                    offerings=offerings,
                    node_class=node_class,
                    labels=request.labels,
                    taints=[_taint(t) for t in (*request.taints, UNREGISTERED_TAINT)],
                    startup_taints=[_taint(t) for t in request.startup_taints],
                    kubelet=kubelet,
                    nodeclaim_uid=str((claim.get("metadata") or {}).get("uid") or ""),
                )
        except ResourceExhaustedError as error:
            self._unavailable.mark(
                UnavailableOffering(f.instance_type, f.zone, f.capacity_type)
                for f in error.failed_offerings
            )
            bound.info(
                "nodeclaim_launch_exhausted",
                offerings=len(offerings),
                failed_offerings=len(error.failed_offerings),
            )
            return await self._give_up(claim, LaunchOutcome.EXHAUSTED, error.message)
        except UnavailableError as error:
            bound.warning("nodeclaim_launch_unavailable", error=str(error))
            return LaunchResult(LaunchOutcome.RETRY, None, error=str(error))
        except ActuatorError as error:
            bound.warning("nodeclaim_launch_failed", error=str(error), code=error.code)
            # A permanent failure would recur on the next round's identical claim: keep its
            # offerings out for the TTL so the pods go elsewhere or are reported, not churned.
            self._unavailable.mark(
                UnavailableOffering(o.instance_type, o.zone, o.capacity_type) for o in offerings
            )
            return await self._give_up(claim, LaunchOutcome.FAILED, str(error))
        try:
            written = await self._record(claim, instance, node_class_obj, root_volume)
        except KubeApiError as error:
            # The instance runs; the next reconcile launches again (idempotent) and records it.
            bound.warning("nodeclaim_status_write_failed", error=str(error))
            return LaunchResult(LaunchOutcome.RETRY, None, instance, str(error))
        self._recorded[name] = None
        if len(self._recorded) > _RECORDED_MEMORY:
            self._recorded.popitem(last=False)
        self._metrics.claim_step(request.nodepool_name, "launched")
        bound.info(
            "nodeclaim_launched",
            provider_id=instance.provider_id,
            instance_type=instance.instance_type,
            zone=instance.zone,
            capacity_type=instance.capacity_type,
            price_per_hour=instance.price_per_hour,
            attempts=len(instance.attempts),
        )
        return LaunchResult(LaunchOutcome.LAUNCHED, written, instance)

    def _node_class(self, claim_name: str, class_name: str) -> KubeObject:
        node_class = self._mirror.get(EC2_NODE_CLASSES, class_name)
        if node_class is None:
            raise InvalidObjectError(
                kind="NodeClaim",
                name=claim_name,
                field="spec.nodeClassRef.name",
                reason=f"EC2NodeClass {class_name!r} not found",
            )
        return node_class

    async def _record(
        self,
        claim: KubeObject,
        instance: LaunchedInstance,
        node_class: KubeObject,
        root_volume_bytes: int = 0,
    ) -> KubeObject:
        name = str(claim["metadata"]["name"])
        instance_type = self._catalog.lookup(node_class, instance.instance_type)
        labels: dict[str, str] = dict(instance_type.labels) if instance_type else {}
        labels.update(
            {
                LABEL_INSTANCE_TYPE: instance.instance_type,
                LABEL_ZONE: instance.zone,
                LABEL_CAPACITY_TYPE: instance.capacity_type,
            }
        )
        zone_id = zone_ids_from_node_class(node_class).get(instance.zone)
        if zone_id:  # as Karpenter's AWS provider labels it, from the class's subnets
            labels[LABEL_ZONE_ID] = zone_id
        if instance.capacity_reservation_id:
            labels[LABEL_RESERVATION_ID] = instance.capacity_reservation_id
            labels[LABEL_RESERVATION_TYPE] = instance.capacity_reservation_type or "default"
        annotations: dict[str, str] = {}
        if instance.attempts:
            # How the launch went (one CreateFleet can try several offerings): for operators.
            annotations[ATTEMPTS_ANNOTATION] = str(len(instance.attempts))
            annotations[FAILED_OFFERINGS_ANNOTATION] = str(
                sum(len(a.failed_offerings) for a in instance.attempts)
            )
        # Where the instance runs, for drift (an idempotent repeat reports them too).
        if root_volume_bytes:
            annotations[ROOT_VOLUME_SIZE_ANNOTATION] = f"{root_volume_bytes // GIB}Gi"
        if instance.subnet_id:
            annotations[SUBNET_ID_ANNOTATION] = instance.subnet_id
        if instance.security_group_ids:
            annotations[SECURITY_GROUP_IDS_ANNOTATION] = ",".join(
                sorted(set(instance.security_group_ids))
            )
        patch: dict[str, Any] = {"metadata": {"labels": labels}}
        if annotations:
            patch["metadata"]["annotations"] = annotations
        await self._writer.patch_nodeclaim(name, patch)
        status: dict[str, Any] = {"providerID": instance.provider_id, "imageID": instance.image_id}
        if instance_type is not None:
            capacity, allocatable = instance_type.capacity, instance_type.allocatable
            if root_volume_bytes:
                # The catalog of a growing class counts the cap; this claim has its own volume.
                percent = nodefs_eviction_percent(kubelet_from_k8s(node_class))
                capacity = dataclasses.replace(capacity, ephemeral_storage_bytes=root_volume_bytes)
                allocatable = dataclasses.replace(
                    allocatable,
                    ephemeral_storage_bytes=ephemeral_allocatable_bytes(root_volume_bytes, percent),
                )
            status["capacity"] = resource_list(capacity)
            status["allocatable"] = resource_list(allocatable)
        current = self._mirror.nodeclaim(name) or claim
        return await self._writer.set_nodeclaim_conditions(
            current, [("Launched", "True", "Launched", "")], extra_status=status
        )

    async def _give_up(self, claim: KubeObject, outcome: LaunchOutcome, why: str) -> LaunchResult:
        """Delete a claim that will not launch (nothing runs for it: drop the finalizer first)."""
        metadata = claim.get("metadata") or {}
        name = str(metadata.get("name", ""))
        pool = str((metadata.get("labels") or {}).get("daiku.dev/nodepool", ""))
        self._metrics.claim_step(pool, "failed")
        try:
            await self._writer.patch_nodeclaim(name, {"metadata": {"finalizers": None}})
            await self._writer.delete_nodeclaim(name)
        except KubeApiError as error:
            log.warning("nodeclaim_delete_failed", nodeclaim=name, error=str(error))
        if outcome is LaunchOutcome.FAILED and pool:
            nodepool = self._mirror.get(NODE_POOLS, pool)
            if nodepool is not None:
                with contextlib.suppress(KubeApiError):
                    await self._writer.event(
                        nodepool, "FailedLaunch", f"NodeClaim {name}: {why}", warning=True
                    )
        return LaunchResult(outcome, None, error=why)
