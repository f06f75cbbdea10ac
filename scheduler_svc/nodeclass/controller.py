"""EC2NodeClass status (leader only): what each class's selector terms resolve to, from the
actuator's ResolveNodeClass, written to its status subresource in Karpenter v1's shapes.

    status.subnets         [{id, zone, zoneID}]      every matching subnet
    status.securityGroups  [{id, name}]              every matching security group
    status.amis            [{id, name, requirements}] the AMI a launch uses per architecture
    status.capacityReservations [{id, instanceType, availabilityZone, ownerID, reservationType,
                           instanceMatchCriteria, state, endTime, availableInstanceCount,
                           totalInstanceCount}]  what capacityReservationSelectorTerms select
                           (the last two are daiku's: the room the provisioner plans with)
    conditions             SubnetsReady, SecurityGroupsReady, AMIsReady and Ready

Each class is resolved when the controller starts leading, when its spec changes, when a
NodeClaim in one of its reservations is launched or deleted (the free counts moved), and every
`interval_seconds` (a new AMI published under the same selector shows up within one
interval). Terms that select nothing (FAILED_PRECONDITION) set their condition and `Ready`
False with the actuator's message (and a Warning Event `NodeClassNotReady` when it turns so);
the provisioner then skips the NodePools of that class. An actuator that is unavailable or
does not serve ResolveNodeClass changes nothing: the last status stays. Writes are
conditional on the resourceVersion of a fresh read (the provisioner writes the same
conditions list), retried a few times on a conflict.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any, NoReturn, Protocol

import structlog

from scheduler_svc.actuator_client import NodeClassResolution
from scheduler_svc.core.nodeclass import NodeClassSpec
from scheduler_svc.core.reservations import LABEL_RESERVATION_ID, CapacityReservation
from scheduler_svc.errors import (
    ActuatorError,
    FailedPreconditionError,
    InvalidObjectError,
    KubeApiError,
    KubeConflictError,
    KubeNotFoundError,
)
from scheduler_svc.kube.convert import node_class_from_k8s, node_class_name_of
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_CLAIMS, KubeObject
from scheduler_svc.kube.writer import (
    KubeWriter,
    condition,
    conditions_of,
    name_of,
    status_of,
    utc_now,
    with_condition,
)
from scheduler_svc.nodeclass.readiness import (
    AMIS_READY,
    NODECLASS_READINESS,
    SECURITY_GROUPS_READY,
    SUBNETS_READY,
    Status,
    ready_of,
)
from scheduler_svc.state.cluster import Change, ClusterMirror

log = structlog.get_logger(__name__)

# The actuator's error messages start with the field whose terms selected nothing.
_FAILED_FIELDS = {
    "node_class.subnet_selector_terms": (SUBNETS_READY, "SubnetsNotFound", "subnets"),
    "node_class.security_group_selector_terms": (
        SECURITY_GROUPS_READY,
        "SecurityGroupsNotFound",
        "securityGroups",
    ),
    "node_class.ami_selector_terms": (AMIS_READY, "AMIsNotFound", "amis"),
}

ConditionUpdate = tuple[str, Status, str, str]


class NodeClassResolver(Protocol):
    async def resolve_node_class(self, node_class: NodeClassSpec) -> NodeClassResolution: ...


@dataclass(frozen=True, slots=True)
class NodeClassStatusSettings:
    """`interval_seconds`: every class is resolved again this often (Karpenter: 5 min for
    AMIs; a minute keeps drift to a new AMI prompt at three DescribeX calls per class)."""

    interval_seconds: float = 60.0


def status_from_resolution(resolution: NodeClassResolution) -> dict[str, Any]:
    """The resolved lists as EC2NodeClass status fields (Karpenter v1 shapes)."""
    return {
        "subnets": [
            {"id": s.id, "zone": s.zone, **({"zoneID": s.zone_id} if s.zone_id else {})}
            for s in resolution.subnets
        ],
        "securityGroups": [
            {"id": g.id, **({"name": g.name} if g.name else {})} for g in resolution.security_groups
        ],
        "amis": [
            {
                "id": a.id,
                **({"name": a.name} if a.name else {}),
                "requirements": [
                    {"key": key, "operator": operator, "values": list(values)}
                    for key, operator, values in a.requirements
                ],
            }
            for a in resolution.amis
        ],
    } | (
        {"capacityReservations": [_reservation_status(r) for r in resolution.capacity_reservations]}
        if resolution.capacity_reservations
        else {}
    )


def _reservation_status(r: CapacityReservation) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": r.id,
        "instanceType": r.instance_type,
        "availabilityZone": r.zone,
        "ownerID": r.owner_id,
        "reservationType": r.reservation_type,
        "instanceMatchCriteria": r.instance_match_criteria or "open",
        "state": r.state,
        "availableInstanceCount": r.available,
        "totalInstanceCount": r.total,
    }
    if r.end_time is not None:
        entry["endTime"] = r.end_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return entry


class NodeClassStatusController:
    """Keeps every EC2NodeClass's status resolved (module docstring)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        actuator: NodeClassResolver,
        settings: NodeClassStatusSettings | None = None,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._actuator = actuator
        self.settings = settings or NodeClassStatusSettings()
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self.resolutions = 0  # ResolveNodeClass calls made (tests wait on it)

    def on_change(self, change: Change) -> None:
        """Mirror listener: a class added or with a changed spec is resolved again at once
        (status-only changes, e.g. our own writes, are not)."""
        if change.resource == NODE_CLAIMS:
            self._on_claim(change)
            return
        if change.resource != EC2_NODE_CLASSES or change.new is None:
            return
        if change.old is None or change.old.get("spec") != change.new.get("spec"):
            self._dirty.add(name_of(change.new))
            self._wake.set()

    def _on_claim(self, change: Change) -> None:
        """A claim that got (or lost) an instance in a reservation: its class's free counts
        changed; resolve it again so the next round plans with the room that is left."""
        old, new = change.old or {}, change.new or {}
        old_labels = (old.get("metadata") or {}).get("labels") or {}
        new_labels = (new.get("metadata") or {}).get("labels") or {}
        launched = LABEL_RESERVATION_ID in new_labels and LABEL_RESERVATION_ID not in old_labels
        gone = change.new is None and LABEL_RESERVATION_ID in old_labels
        if not (launched or gone):
            return
        name = node_class_name_of(new or old)
        if name is not None:
            self._dirty.add(name)
            self._wake.set()

    async def run(self) -> NoReturn:
        """Resolve every class now, then changed ones as they change and all each interval."""
        everything = True
        while True:
            names = (
                sorted(name_of(o) for o in self._mirror.objects(EC2_NODE_CLASSES).values())
                if everything
                else sorted(self._dirty)
            )
            self._dirty.clear()
            for name in names:
                try:
                    await self.resolve(name)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("nodeclass_resolution_failed", ec2nodeclass=name)
            everything = False
            try:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                # that arrives as the wait ends, and the leader's task group would never stop.
                async with asyncio.timeout(self.settings.interval_seconds):
                    await self._wake.wait()
            except TimeoutError:
                everything = True
            self._wake.clear()

    async def resolve(self, name: str) -> bool:
        """Resolve one class and write its status; True when a status write was made."""
        obj = self._mirror.get(EC2_NODE_CLASSES, name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return False
        bound = log.bind(ec2nodeclass=name)
        try:
            node_class = node_class_from_k8s(obj)
        except InvalidObjectError as error:
            # The provisioner reports it (ValidationSucceeded False); nothing to resolve.
            bound.debug("nodeclass_not_resolvable", error=str(error))
            return False
        self.resolutions += 1
        try:
            resolution = await self._actuator.resolve_node_class(node_class)
        except FailedPreconditionError as error:
            failed = next(
                (v for field, v in _FAILED_FIELDS.items() if error.message.startswith(field)),
                None,
            )
            if failed is None:
                bound.warning("nodeclass_resolution_refused", error=str(error))
                return False
            condition_type, reason, status_field = failed
            bound.warning("nodeclass_not_ready", condition=condition_type, error=error.message)
            return await self._write(
                name,
                drop=(status_field,),
                updates=[(condition_type, "False", reason, error.message)],
            )
        except ActuatorError as error:
            # Unavailable, or an actuator without the RPC: keep the last status, try later.
            bound.info("nodeclass_resolution_unavailable", error=str(error))
            return False
        fields = status_from_resolution(resolution)
        drop: tuple[str, ...] = ()
        if node_class.capacity_reservation_terms:
            fields.setdefault("capacityReservations", [])
        else:  # shown only for classes that select reservations
            drop = ("capacityReservations",)
        bound.debug(
            "nodeclass_resolved",
            subnets=len(resolution.subnets),
            security_groups=len(resolution.security_groups),
            amis=[a.id for a in resolution.amis],
        )
        return await self._write(
            name,
            fields=fields,
            drop=drop,
            updates=[
                (SUBNETS_READY, "True", SUBNETS_READY, ""),
                (SECURITY_GROUPS_READY, "True", SECURITY_GROUPS_READY, ""),
                (AMIS_READY, "True", AMIS_READY, ""),
            ],
        )

    async def _write(
        self,
        name: str,
        *,
        fields: Mapping[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        updates: list[ConditionUpdate],
    ) -> bool:
        """Merge `fields` (and drop `drop`) into the class's status with the conditions and
        `Ready`, from a fresh read and conditional on its resourceVersion; skipped when
        nothing would change."""
        read: list[KubeObject] = []

        def new_status(current: KubeObject) -> dict[str, Any] | None:
            read.append(current)
            old_status = status_of(current)
            status = {k: v for k, v in old_status.items() if k not in drop}
            status.update(fields or {})
            generation = (current.get("metadata") or {}).get("generation")
            observed = generation if isinstance(generation, int) else None
            now = utc_now()
            conditions = conditions_of(current)
            for condition_type, value, reason, message in updates:
                conditions = with_condition(
                    conditions,
                    condition_type,
                    value,
                    reason=reason,
                    message=message,
                    now=now,
                    observed_generation=observed,
                )
            ready, reason, message = ready_of(conditions, NODECLASS_READINESS)
            status["conditions"] = with_condition(
                conditions,
                "Ready",
                ready,
                reason=reason,
                message=message,
                now=now,
                observed_generation=observed,
            )
            return None if _same(old_status, status) else status

        try:
            written = await self._writer.update_status(EC2_NODE_CLASSES, name, new_status)
        except KubeNotFoundError:
            return False
        except KubeConflictError:
            log.warning("nodeclass_status_conflicts", ec2nodeclass=name)
            return False
        if written is None:
            return False
        ready = condition(written, "Ready") or {}
        was_ready = condition(read[-1], "Ready") or {}
        if ready.get("status") == "False" and was_ready.get("status") != "False":
            with contextlib.suppress(KubeApiError):
                await self._writer.event(
                    {"apiVersion": "daiku.dev/v1", "kind": "EC2NodeClass", **read[-1]},
                    "NodeClassNotReady",
                    str(ready.get("message", "")),
                    warning=True,
                )
        log.info("nodeclass_status_written", ec2nodeclass=name, ready=ready.get("status"))
        return True


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal but for the conditions' transition times (kept when their status holds)."""

    def comparable(status: Mapping[str, Any]) -> dict[str, Any]:
        conditions = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ]
        return {**status, "conditions": sorted(conditions, key=lambda c: str(c.get("type")))}

    return comparable(old) == comparable(new)
