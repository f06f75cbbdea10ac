"""The CapacityBuffers' virtual pods for one provisioning round, with their metrics (the room
each wants is the core's `buffer_room`; see `scheduler_svc.core.headroom`), and what the round
made of each buffer (`BufferReport`, which its status shows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import structlog

from scheduler_svc.core.headroom import (
    BufferRoom,
    CapacityBuffer,
    buffer_room,
    is_headroom,
    requested_in_pool,
    virtual_pods,
)
from scheduler_svc.core.model import Pod, UnschedulablePod
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.pool_validation import ValidPool
from scheduler_svc.state.core_snapshot import CoreSnapshot

__all__ = ["BufferReport", "buffer_reports", "headroom_pods", "is_headroom"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class BufferReport:
    """What one round made of a buffer: the room it wants (`room.units`), why its NodePool
    takes none (`problem`, "" when it does), and how many units found no place, with the
    first reason."""

    buffer: CapacityBuffer
    room: BufferRoom
    problem: str = ""
    unplaced: int = 0
    unplaced_reason: str = ""


def headroom_pods(
    snapshot: CoreSnapshot, pools: Sequence[ValidPool], metrics: SchedulerMetrics
) -> tuple[tuple[Pod, ...], tuple[BufferReport, ...]]:
    """Every buffer's virtual pods for a valid, dynamic NodePool, and a report per buffer; the
    room each wants is set on `daiku_scheduler_headroom_pods` (0 for a buffer whose pool is
    missing or static)."""
    usable = {p.model.name: p.model for p in pools if not p.model.is_static}
    static = {p.model.name for p in pools if p.model.is_static}
    known = {p.name for p in snapshot.nodepools} | {
        e.name for e in snapshot.invalid if e.kind == "NodePool" and e.name
    }
    rooms = []
    reports = []
    for buffer in snapshot.buffers:
        room = buffer_room(buffer, requested_in_pool(buffer.nodepool, snapshot.nodes))
        wanted = room.units if buffer.nodepool in usable else 0
        problem = ""
        if buffer.nodepool not in usable:
            log.info(
                "headroom_nodepool_unusable", capacitybuffer=buffer.name, nodepool=buffer.nodepool
            )
            problem = (
                f"NodePool {buffer.nodepool} is static: its node count is its replicas"
                if buffer.nodepool in static
                else f"NodePool {buffer.nodepool} is not valid or not ready (see its status)"
                if buffer.nodepool in known
                else f"NodePool {buffer.nodepool} not found"
            )
        metrics.headroom_pods.labels(capacitybuffer=buffer.name, nodepool=buffer.nodepool).set(
            wanted
        )
        rooms.append(room)
        reports.append(BufferReport(buffer, room, problem))
    return virtual_pods(rooms, usable), tuple(reports)


def buffer_reports(
    reports: Sequence[BufferReport], unschedulable: Mapping[str, UnschedulablePod]
) -> tuple[BufferReport, ...]:
    """`reports` with the units each buffer could not place (its virtual pods the solve left
    unschedulable) and the first reason."""
    missed: dict[str, list[UnschedulablePod]] = {}
    for key, pod in sorted(unschedulable.items()):
        if is_headroom(key):
            name = key.split("/", 1)[1].rsplit("-", 1)[0]
            missed.setdefault(name, []).append(pod)
    return tuple(
        dataclasses.replace(
            r,
            unplaced=len(missed.get(r.buffer.name, ())),
            unplaced_reason=next((p.reason for p in missed.get(r.buffer.name, ())), ""),
        )
        for r in reports
    )
