"""The one way a NodeClaim comes to be: named, written, launched, and known to be in flight.

Provisioning (new claims for pending pods) and disruption (replacements) both call
`NodeClaimCreator.create`; the lifecycle controller calls `relaunch` for a claim left without
`Launched` (the scheduler restarted mid-launch) and asks `in_flight` before it times a claim
out or collects it: a claim is in flight from the moment its name is chosen until its launch
call returns, so nothing else launches, expires or garbage-collects it meanwhile. The set is
this object's own; no other component mutates it (Karpenter's provisioner likewise owns
`CreateNodeClaims`).

Naming: `<nodepool>-<random suffix>`; a name the API server already has is drawn again (a few
times). A failed write is logged and leaves nothing behind; a written claim is always launched
(the launch's outcome says what became of it, see `provisioning.launch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler_svc.core.model import NodeClaimPlan
from scheduler_svc.errors import KubeAlreadyExistsError, KubeApiError
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import KubeWriter
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.launch import ClaimLauncher, LaunchResult
from scheduler_svc.provisioning.nodeclaim_template import new_nodeclaim_name, nodeclaim_from_plan

log = structlog.get_logger(__name__)

_NAME_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class CreatedClaim:
    """A NodeClaim written for `plan`, and what its launch did."""

    name: str
    plan: NodeClaimPlan
    launch: LaunchResult


class NodeClaimCreator:
    """Creates and launches NodeClaims (see the module docstring)."""

    def __init__(
        self, *, writer: KubeWriter, launcher: ClaimLauncher, metrics: SchedulerMetrics
    ) -> None:
        self._writer = writer
        self._launcher = launcher
        self._metrics = metrics
        self._in_flight: set[str] = set()

    def in_flight(self, name: str) -> bool:
        """Whether claim `name` is being created or launched by this process right now."""
        return name in self._in_flight

    async def create(
        self,
        plan: NodeClaimPlan,
        nodepool: KubeObject,
        *,
        before_launch: Callable[[], None] | None = None,
        **log_fields: Any,
    ) -> CreatedClaim | None:
        """Write a NodeClaim for `plan` from `nodepool`'s template, then launch it. None when
        it could not be written (logged). `before_launch` runs as the launch is sent;
        `log_fields` go on the `nodeclaim_created` log line (e.g. what it replaces)."""
        for _ in range(_NAME_ATTEMPTS):
            name = new_nodeclaim_name(plan.nodepool)
            self._in_flight.add(name)
            try:
                created = await self._writer.create_nodeclaim(
                    nodeclaim_from_plan(plan, nodepool, name=name)
                )
            except KubeAlreadyExistsError:
                self._in_flight.discard(name)
                continue
            except KubeApiError as error:
                self._in_flight.discard(name)
                log.warning("nodeclaim_create_failed", nodepool=plan.nodepool, error=str(error))
                return None
            try:
                self._metrics.claim_step(plan.nodepool, "created")
                log.info(
                    "nodeclaim_created",
                    nodeclaim=name,
                    nodepool=plan.nodepool,
                    pods=len(plan.pods),
                    instance_type=plan.instance_type,
                    offerings=len(plan.offerings),
                    **log_fields,
                )
                if plan.min_values_relaxed:
                    await self._min_values_relaxed(created, nodepool, plan)
                if before_launch is not None:
                    before_launch()
                return CreatedClaim(name, plan, await self._launcher.launch(created))
            finally:
                self._in_flight.discard(name)
        log.warning("nodeclaim_create_failed", nodepool=plan.nodepool, error="no free name")
        return None

    async def _min_values_relaxed(
        self, claim: KubeObject, nodepool: KubeObject, plan: NodeClaimPlan
    ) -> None:
        """Say on the claim and its NodePool which minValues it was opened without (an Event
        lost is only logged: the claim's annotation and requirements still say it)."""
        name = str((claim.get("metadata") or {}).get("name", ""))
        relaxed = "; ".join(r.describe() for r in plan.min_values_relaxed)
        message = (
            f"NodeClaim {name}: {relaxed}: the instance types that hold its pods offer no more"
            " (--min-values-policy BestEffort)"
        )
        log.info("min_values_relaxed", nodeclaim=name, nodepool=plan.nodepool, relaxed=relaxed)
        self._metrics.nodeclaims_min_values_relaxed.labels(nodepool=plan.nodepool).inc()
        for involved in (claim, nodepool):
            try:
                await self._writer.event(involved, "MinValuesRelaxed", message)
            except KubeApiError as error:
                log.warning("event_failed", reason="MinValuesRelaxed", error=str(error))

    async def relaunch(self, claim: KubeObject) -> LaunchResult | None:
        """Launch a claim that exists without `Launched` (idempotent at the actuator); None
        when it is in flight already."""
        name = str((claim.get("metadata") or {}).get("name", ""))
        if name in self._in_flight:
            return None
        self._in_flight.add(name)
        try:
            log.info("nodeclaim_relaunch", nodeclaim=name)
            return await self._launcher.launch(claim)
        finally:
            self._in_flight.discard(name)
