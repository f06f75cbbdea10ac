"""Capacity Blocks end: their nodes are drained before EC2 reclaims them (leader only).

EC2 starts terminating a Capacity Block's instances 30 minutes before the block's end date.
Every `interval_seconds` this controller looks at the NodeClaims labelled
`karpenter.k8s.aws/capacity-reservation-type=capacity-block` and, once their block (from their
EC2NodeClass's `status.capacityReservations`) is within 40 minutes of its end
(`core.reservations.claims_to_drain`), treats them as interrupted: the node is cordoned, a
Warning Event `CapacityBlockExpiring` says when the block ends, and the NodeClaim is deleted, so
termination drains it and the provisioner launches replacements elsewhere (the expiring block
is an unavailable offering by then). The end date, not EC2's warning event, drives it, so a
scheduler that restarts inside the window acts at once (Karpenter's reasoning too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

import structlog

from scheduler_svc.core.reservations import (
    CAPACITY_BLOCK,
    LABEL_RESERVATION_ID,
    LABEL_RESERVATION_TYPE,
    CapacityReservation,
    ClaimInReservation,
    claims_to_drain,
)
from scheduler_svc.errors import InvalidObjectError, KubeApiError
from scheduler_svc.kube.convert import capacity_reservations_from_k8s
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_CLAIMS
from scheduler_svc.kube.writer import KubeWriter, name_of
from scheduler_svc.lifecycle.termination import Terminator
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class CapacityBlockSettings:
    interval_seconds: float = 30.0


class CapacityBlockController:
    """Drains the nodes of Capacity Blocks about to end (module docstring)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        terminator: Terminator,
        clock: Callable[[], datetime],
        settings: CapacityBlockSettings | None = None,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._terminator = terminator
        self._clock = clock
        self.settings = settings or CapacityBlockSettings()
        # Claims this controller deleted: the mirror may not show their deletion yet, and a
        # second pass must not record a second Event (bounded: only claims still listed stay).
        self._drained: set[str] = set()

    async def run(self) -> NoReturn:
        while True:
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad object must not stop the loop
                log.exception("capacity_block_check_failed")
            await asyncio.sleep(self.settings.interval_seconds)

    def _reservations(self) -> dict[str, CapacityReservation]:
        found: dict[str, CapacityReservation] = {}
        for node_class in self._mirror.objects(EC2_NODE_CLASSES).values():
            try:
                found.update({r.id: r for r in capacity_reservations_from_k8s(node_class)})
            except InvalidObjectError as error:
                log.warning("nodeclass_reservations_unreadable", error=str(error))
        return found

    async def check_once(self) -> list[str]:
        """Drain what is due now; the names of the claims deleted."""
        claims = [
            ClaimInReservation(name_of(c), labels[LABEL_RESERVATION_ID])
            for c in self._mirror.objects(NODE_CLAIMS).values()
            if (labels := (c.get("metadata") or {}).get("labels") or {}).get(LABEL_RESERVATION_TYPE)
            == CAPACITY_BLOCK
            and labels.get(LABEL_RESERVATION_ID)
            and not (c.get("metadata") or {}).get("deletionTimestamp")
        ]
        self._drained &= {c.name for c in claims}
        if not claims:
            return []
        deleted = []
        for name, why in claims_to_drain(claims, self._reservations(), self._clock()):
            claim = self._mirror.nodeclaim(name)
            if claim is None or name in self._drained:
                continue
            node = self._terminator.node_of(claim)
            try:
                if node is not None:
                    await self._terminator.cordon(node)
                await self._terminator.record(
                    claim, node, "CapacityBlockExpiring", why, warning=True
                )
                await self._writer.delete_nodeclaim(name)
            except KubeApiError as error:
                log.warning("capacity_block_drain_failed", nodeclaim=name, error=str(error))
                continue
            log.info("nodeclaim_capacity_block_expiring", nodeclaim=name, reason=why)
            self._drained.add(name)
            deleted.append(name)
        return deleted
