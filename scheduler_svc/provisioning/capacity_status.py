"""Status of CapacityBuffers and NodeOverlays (leader only), written through their status
subresource when it changes.

CapacityBuffer (in the spirit of SIG Autoscaling's `autoscaling.x-k8s.io` CapacityBuffer):

    status.observedGeneration    the spec generation the status describes
    status.provisioningStrategy  buffer.x-k8s.io/active-capacity (upstream's only strategy)
    status.replicas              the units of room the buffer wants now (replicas, or percentage
                                 of the pool's requests, capped by limits; 0 when its pool takes
                                 none)
    status.podTemplate           one unit as the scheduler plans it: requests and nodeSelector
    status.limits                the cap applied (spec.limits)
    conditions  ReadyForProvisioning  True (AttributesSetSuccessfully) | False (InvalidSpec,
                                      NodePoolNotFound, NodePoolNotUsable)
                Provisioning          True (Provisioned: every unit placed) | False
                                      (RoomUnplaced: some found no node; NotReadyForProvisioning)

The room and what was placed come from the provisioner's last round (`report`, a
`BufferReport` per buffer); a valid buffer no round has seen yet gets no status.

NodeOverlay (Karpenter v1.7+): conditions `ValidationSucceeded` (False with reason
`RuntimeValidation` for an overlay the scheduler cannot read, or `Conflict` for one left out
because an overlay of the same weight sets a price or an extended resource differently:
`core.overlay.overlay_conflicts`) and `Ready`, which follows it.

Written when the controller starts leading, when a buffer, overlay or NodePool spec changes,
when a round reports a different outcome, and every `interval_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import structlog

from scheduler_svc.core.headroom import CapacityBuffer
from scheduler_svc.core.model import InstanceType
from scheduler_svc.core.overlay import NodeOverlay, overlay_conflicts
from scheduler_svc.core.requirements import LABEL_NODEPOOL
from scheduler_svc.core.solver import format_amount
from scheduler_svc.errors import (
    ActuatorError,
    InvalidObjectError,
    KubeApiError,
    KubeNotFoundError,
)
from scheduler_svc.kube.convert import capacity_buffer_from_k8s, node_overlay_from_k8s
from scheduler_svc.kube.resources import (
    CAPACITY_BUFFERS,
    NODE_OVERLAYS,
    NODE_POOLS,
    KubeObject,
    Resource,
)
from scheduler_svc.kube.writer import KubeWriter, conditions_of, status_of, utc_now, with_condition
from scheduler_svc.provisioning.headroom import BufferReport
from scheduler_svc.state.cluster import Change, ClusterMirror

log = structlog.get_logger(__name__)

ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
READY_FOR_PROVISIONING = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
VALIDATION_SUCCEEDED = "ValidationSucceeded"
READY = "Ready"

Status = Literal["True", "False", "Unknown"]
ConditionUpdate = tuple[str, Status, str, str]


@dataclass(frozen=True)
class StatusUpdate:
    """Fields to set (None: remove the field) and conditions to set, in order."""

    fields: Mapping[str, Any]
    conditions: tuple[ConditionUpdate, ...]


def _shape(buffer: CapacityBuffer) -> str:
    """``1 cpu, 2 GiB``: one unit of room as a person reads it."""
    return ", ".join(format_amount(name, n) for name, n in buffer.requests.as_mapping().items())


def buffer_status(
    obj: KubeObject, report: BufferReport | None, error: InvalidObjectError | None
) -> StatusUpdate | None:
    """The status of one CapacityBuffer (module docstring); None: nothing to say yet."""
    spec = obj.get("spec") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    fields: dict[str, Any] = {
        "observedGeneration": generation if isinstance(generation, int) else None,
        "provisioningStrategy": ACTIVE_CAPACITY,
    }
    if error is not None:
        fields |= {"replicas": 0, "podTemplate": None, "limits": None}
        return StatusUpdate(
            fields,
            (
                (READY_FOR_PROVISIONING, "False", "InvalidSpec", str(error)),
                (PROVISIONING, "False", "NotReadyForProvisioning", "the buffer is not valid"),
            ),
        )
    if report is None:
        return None
    buffer, room = report.buffer, report.room
    fields |= {
        "podTemplate": {
            "requests": dict(spec.get("requests") or {}),
            "nodeSelector": {LABEL_NODEPOOL: buffer.nodepool},
        },
        "limits": dict(spec["limits"]) if spec.get("limits") else None,
    }
    if report.problem:
        reason = "NodePoolNotFound" if report.problem.endswith("not found") else "NodePoolNotUsable"
        return StatusUpdate(
            fields | {"replicas": 0},
            (
                (READY_FOR_PROVISIONING, "False", reason, report.problem),
                (PROVISIONING, "False", "NotReadyForProvisioning", report.problem),
            ),
        )
    ready = (
        f"room for {room.units} pods of {_shape(buffer)} in NodePool {buffer.nodepool} "
        f"({room.reason})"
    )
    provisioning: ConditionUpdate = (
        (
            PROVISIONING,
            "False",
            "RoomUnplaced",
            f"{report.unplaced} of {room.units} pods found no node: {report.unplaced_reason}",
        )
        if report.unplaced
        else (PROVISIONING, "True", "Provisioned", f"{room.units} of {room.units} pods placed")
    )
    return StatusUpdate(
        fields | {"replicas": room.units},
        ((READY_FOR_PROVISIONING, "True", "AttributesSetSuccessfully", ready), provisioning),
    )


def overlay_status(error: InvalidObjectError | None, conflict: str | None) -> StatusUpdate:
    """The status of one NodeOverlay: `ValidationSucceeded` and `Ready` (module docstring)."""
    if error is not None:
        failed: ConditionUpdate = (VALIDATION_SUCCEEDED, "False", "RuntimeValidation", str(error))
    elif conflict is not None:
        failed = (VALIDATION_SUCCEEDED, "False", "Conflict", f"{conflict}; not applied")
    else:
        return StatusUpdate(
            {},
            (
                (VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED, ""),
                (READY, "True", READY, ""),
            ),
        )
    _, _, reason, message = failed
    return StatusUpdate({}, (failed, (READY, "False", reason, message)))


def updated_status(current: KubeObject, update: StatusUpdate) -> dict[str, Any] | None:
    """`current`'s status with `update` applied; None when that changes nothing (a condition's
    lastTransitionTime moves only when its status does)."""
    old = status_of(current)
    status = dict(old)
    for name, value in update.fields.items():
        if value is None:
            status.pop(name, None)
        else:
            status[name] = value
    generation = (current.get("metadata") or {}).get("generation")
    observed = generation if isinstance(generation, int) else None
    conditions = conditions_of(current)
    now = utc_now()
    for condition_type, value, reason, message in update.conditions:
        previous = next((c for c in conditions if c.get("type") == condition_type), None)
        if (
            previous is not None
            and (previous.get("status"), previous.get("reason"), previous.get("message"))
            == (value, reason, message)
            and previous.get("observedGeneration", observed) == observed
        ):
            continue
        conditions = with_condition(
            conditions,
            condition_type,
            value,
            reason=reason,
            message=message,
            now=now,
            observed_generation=observed,
        )
    status["conditions"] = conditions
    return None if status == old else status


@dataclass(frozen=True, slots=True)
class CapacityStatusSettings:
    """`interval_seconds`: every buffer and overlay is looked at again this often."""

    interval_seconds: float = 60.0


class CapacityStatusController:
    """Keeps CapacityBuffer and NodeOverlay statuses current (module docstring)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        instance_types: Callable[[], Awaitable[Sequence[InstanceType]]],
        settings: CapacityStatusSettings | None = None,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        # The catalog overlays are checked for conflicts against (any EC2NodeClass's).
        self._instance_types = instance_types
        self.settings = settings or CapacityStatusSettings()
        self._reports: dict[str, BufferReport] = {}
        self._wake = asyncio.Event()
        self.passes = 0  # status passes made (tests wait on it)

    def report(self, reports: Sequence[BufferReport]) -> None:
        """The provisioner's round: what it made of each buffer (a wake when that changed)."""
        latest = {r.buffer.name: r for r in reports}
        if latest != self._reports:
            self._reports = latest
            self._wake.set()

    def on_change(self, change: Change) -> None:
        """Mirror listener: a buffer, overlay or NodePool added, deleted or with a new spec."""
        if change.resource not in (CAPACITY_BUFFERS, NODE_OVERLAYS, NODE_POOLS):
            return
        old, new = change.old, change.new
        if old is None or new is None or old.get("spec") != new.get("spec"):
            self._wake.set()

    async def run(self) -> NoReturn:
        while True:
            try:
                await self.write_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("capacity_status_failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.interval_seconds):
                    await self._wake.wait()
            self._wake.clear()

    async def write_all(self) -> int:
        """Write every buffer's and overlay's status that changed; the number written."""
        self.passes += 1
        written = 0
        for obj in self._objects(CAPACITY_BUFFERS):
            error = _invalid(obj, capacity_buffer_from_k8s)
            update = buffer_status(obj, self._reports.get(_name(obj)), error)
            if update is not None:
                written += await self._write(CAPACITY_BUFFERS, _name(obj), update)
        overlays = self._objects(NODE_OVERLAYS)
        errors = {_name(o): _invalid(o, node_overlay_from_k8s) for o in overlays}
        conflicts = await self._conflicts(
            [node_overlay_from_k8s(o) for o in overlays if errors[_name(o)] is None]
        )
        if conflicts is None:
            return written
        for obj in overlays:
            name = _name(obj)
            update = overlay_status(errors[name], conflicts.get(name))
            written += await self._write(NODE_OVERLAYS, name, update)
        return written

    def _objects(self, resource: Resource) -> list[KubeObject]:
        if resource not in self._mirror.resources:
            return []
        return [
            o
            for o in self._mirror.objects(resource).values()
            if not (o.get("metadata") or {}).get("deletionTimestamp")
        ]

    async def _conflicts(self, overlays: list[NodeOverlay]) -> dict[str, str] | None:
        """The overlays in conflict; None when the catalog they are checked against cannot
        be read (their statuses are left as they are)."""
        weights = [o.weight for o in overlays]
        if len(set(weights)) == len(weights):
            return {}
        try:
            catalog = await self._instance_types()
        except ActuatorError as error:
            log.info("nodeoverlay_status_catalog_unavailable", error=str(error))
            return None
        return overlay_conflicts(catalog, overlays)

    async def _write(self, resource: Resource, name: str, update: StatusUpdate) -> int:
        current = self._mirror.get(resource, name)
        if current is None or updated_status(current, update) is None:
            return 0
        try:
            written = await self._writer.update_status(
                resource, name, lambda fresh: updated_status(fresh, update)
            )
        except KubeNotFoundError:
            return 0
        except KubeApiError as error:
            log.warning("capacity_status_write_failed", name=name, error=str(error))
            return 0
        return 0 if written is None else 1


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _invalid(obj: KubeObject, convert: Callable[[KubeObject], object]) -> InvalidObjectError | None:
    try:
        convert(obj)
    except InvalidObjectError as error:
        return error
    return None
