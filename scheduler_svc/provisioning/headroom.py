"""The CapacityBuffers' virtual pods for one provisioning round, with their metrics (the room
each wants is the core's `buffer_room`; see `scheduler_svc.core.headroom`)."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from scheduler_svc.core.headroom import (
    buffer_room,
    is_headroom,
    requested_in_pool,
    virtual_pods,
)
from scheduler_svc.core.model import Pod
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.pool_validation import ValidPool
from scheduler_svc.state.core_snapshot import CoreSnapshot

__all__ = ["headroom_pods", "is_headroom"]

log = structlog.get_logger(__name__)


def headroom_pods(
    snapshot: CoreSnapshot, pools: Sequence[ValidPool], metrics: SchedulerMetrics
) -> tuple[Pod, ...]:
    """Every buffer's virtual pods for a valid, dynamic NodePool; the room each wants is set
    on `daiku_scheduler_headroom_pods` (0 for a buffer whose pool is missing or static)."""
    usable = {p.model.name: p.model for p in pools if not p.model.is_static}
    rooms = []
    for buffer in snapshot.buffers:
        room = buffer_room(buffer, requested_in_pool(buffer.nodepool, snapshot.nodes))
        wanted = room.units if buffer.nodepool in usable else 0
        if buffer.nodepool not in usable:
            log.info(
                "headroom_nodepool_unusable", capacitybuffer=buffer.name, nodepool=buffer.nodepool
            )
        metrics.headroom_pods.labels(capacitybuffer=buffer.name, nodepool=buffer.nodepool).set(
            wanted
        )
        rooms.append(room)
    return virtual_pods(rooms, usable)
