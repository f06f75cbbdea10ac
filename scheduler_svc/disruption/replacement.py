"""The replacement controller (leader only): node repair and rebalance recommendations, the two
methods that replace one node because of the node itself, not to save money (decision 0015).

Every `interval_seconds`, and soon after a Node, NodeClaim or NodePool changes, it runs
`plan_repair` (when `node_repair` is on, as Karpenter's NodeRepair gate) and `plan_rebalance`
on the mirror, and for each decision, in its own task (a slow replacement holds no other):

1. cordons the Node (`daiku.dev/disrupted:NoSchedule`, as termination would: no new pods, and
   the disruption controller and the provisioner leave it alone);
2. records `Disrupting` (`Unhealthy: Ready Unknown for 30m ...`) on the Node and NodeClaim;
3. launches the replacements the core planned (only for pods that fit nowhere else) and waits
   until they are Initialized, at most `replacement_timeout_seconds`: a broken or warned node
   goes anyway after that (its pods then wait for the provisioner), with a
   `ReplacementNotInitialized` warning;
4. for a repair, stamps `daiku.dev/nodeclaim-termination-timestamp` = now +
   `repair_drain_seconds`, so termination deletes what its drain has not moved by then;
5. deletes the NodeClaim: termination drains and terminates it.

Blocked nodes get one Event per distinct message (`NodeRepairBlocked: 3 of 10 nodes ...`,
`DisruptionBlocked: budget ...`). Nodes whose claim is being deleted, or that a task of this
controller is replacing, are left alone; a node this controller cordoned before a restart is
taken up again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn

import structlog

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption import (
    DEFAULT_REPAIR_POLICIES,
    TERMINATION_TIMESTAMP_ANNOTATION,
    DisruptionDecision,
    DisruptionReason,
    DisruptionSnapshot,
    RepairPolicy,
    plan_rebalance,
    plan_repair,
    unhealthy_condition,
)
from scheduler_svc.core.model import InstanceType
from scheduler_svc.disruption.controller import disrupting_message
from scheduler_svc.disruption.snapshot import build_snapshot
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.convert_disruption import node_conditions_from_k8s
from scheduler_svc.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, KubeObject
from scheduler_svc.kube.writer import KubeWriter, is_condition_true, name_of, timestamp, utc_now
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.state.cluster import Change, ClusterMirror
from scheduler_svc.state.core_snapshot import CoreSnapshotter

log = structlog.get_logger(__name__)

_DIGITS = re.compile(r"[-\d.]+")
_WATCHED = frozenset({NODES, NODE_CLAIMS, NODE_POOLS})
InstanceTypesSource = Callable[[], Awaitable[tuple[InstanceType, ...]]]
Cordon = Callable[[KubeObject], Awaitable[bool]]  # termination's: taint the Node disrupted


@dataclass(frozen=True, slots=True)
class ReplacementSettings:
    """`node_repair`: act on unhealthy nodes (off by default, as Karpenter's alpha gate);
    `repair_drain_seconds`: how long a repaired node's drain may take before what is left is
    deleted; `interval_seconds`/`min_interval_seconds`: pass pacing; `poll_seconds`: waits'
    polling; `replacement_timeout_seconds`: the longest wait for a replacement."""

    node_repair: bool = False
    repair_drain_seconds: float = 300.0
    policies: tuple[RepairPolicy, ...] = DEFAULT_REPAIR_POLICIES
    interval_seconds: float = 10.0
    min_interval_seconds: float = 1.0
    poll_seconds: float = 0.5
    replacement_timeout_seconds: float = 600.0


def _statuses(node: KubeObject | None) -> tuple[tuple[str, str], ...] | None:
    """A Node's (condition type, status) pairs, read as node repair reads them; None when
    absent."""
    if node is None:
        return None
    return tuple((c.type, c.status) for c in node_conditions_from_k8s(node))


async def _no_instance_types() -> tuple[InstanceType, ...]:
    return ()


class ReplacementController:
    """See the module docstring. `clock` is wall time (UTC, aware), injectable."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        metrics: SchedulerMetrics,
        cordon: Cordon,
        creator: NodeClaimCreator | None = None,
        instance_types: InstanceTypesSource = _no_instance_types,
        settings: ReplacementSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        catalogs: CatalogCache | None = None,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._metrics = metrics
        self._cordon = cordon
        self._creator = creator
        self._instance_types = instance_types
        self.settings = settings or ReplacementSettings()
        self._clock = clock
        self.catalogs = catalogs if catalogs is not None else CatalogCache(size=4)
        self._snapshotter = CoreSnapshotter(mirror)
        self._wake = asyncio.Event()
        self._acting: dict[str, asyncio.Task[None]] = {}  # node -> its replacement
        self._reported: dict[str, str] = {}  # node -> last blocked message sent as an Event
        self.passes = 0

    def on_change(self, change: Change) -> None:
        """Mirror listener: claim and NodePool changes wake a pass, and Node changes that move
        a condition's status (not the kubelets' heartbeats, every 10 s per node)."""
        if change.resource not in _WATCHED:
            return
        if change.resource is NODES and _statuses(change.old) == _statuses(change.new):
            return
        self._wake.set()

    def _has_work(self) -> bool:
        """Whether a pass can decide anything: node repair on, or a NodePool that replaces on
        rebalance recommendations (else the snapshot is not worth building)."""
        if self.settings.node_repair:
            return True
        return any(
            ((pool.get("spec") or {}).get("disruption") or {}).get("rebalanceRecommendationPolicy")
            == "Replace"
            for pool in self._mirror.objects(NODE_POOLS).values()
        )

    async def run(self) -> NoReturn:
        """Pass after pass until cancelled (its replacements with it); a failed pass is
        logged, never fatal."""
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.interval_seconds):
                        await self._wake.wait()
                self._wake.clear()
                try:
                    await self.replace_once()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("replacement_pass_failed")
                await asyncio.sleep(self.settings.min_interval_seconds)
        finally:
            for task in self._acting.values():
                task.cancel()

    async def snapshot(self) -> DisruptionSnapshot:
        """The mirror as the core sees it; disrupting = claims being deleted and this
        controller's own replacements (not merely cordoned nodes: see the module docstring)."""
        try:
            types = await self._instance_types()
        except Exception as error:  # no catalog: pods of a replaced node wait for provisioning
            log.warning("replacement_catalog_unavailable", error=str(error))
            types = ()
        snapshot = build_snapshot(self._mirror, self._snapshotter, instance_types=types)
        deleting = {
            str((claim.get("status") or {}).get("nodeName"))
            for claim in self._mirror.objects(NODE_CLAIMS).values()
            if (claim.get("metadata") or {}).get("deletionTimestamp")
        }
        return dataclasses.replace(snapshot, disrupting=frozenset(deleting | set(self._acting)))

    async def replace_once(self) -> list[DisruptionDecision]:
        """One pass; returns the decisions whose replacement started."""
        self.passes += 1
        if not self._has_work():
            return []
        snapshot = await self.snapshot()
        now = self._clock()
        plans = [plan_rebalance(snapshot, now, catalogs=self.catalogs)]
        if self.settings.node_repair:
            plans.insert(
                0, plan_repair(snapshot, now, self.settings.policies, catalogs=self.catalogs)
            )
        started: list[DisruptionDecision] = []
        for plan in plans:
            for blocked in plan.blocked:
                await self._report_blocked(blocked.node, blocked.event_reason, blocked.message)
            for decision in plan.decisions:
                node = decision.nodes[0]
                if node in self._acting:
                    continue
                self._reported.pop(node, None)
                self._acting[node] = asyncio.create_task(
                    self._replace(decision, self._repair_labels(snapshot, decision, now)),
                    name=f"replace-{node}",
                )
                started.append(decision)
        return started

    async def wait_idle(self) -> None:
        """Until the replacements started so far are done (tests)."""
        while self._acting:
            await asyncio.gather(*self._acting.values(), return_exceptions=True)

    # -- acting -----------------------------------------------------------------------------

    async def _replace(
        self, decision: DisruptionDecision, repair_labels: tuple[str, str] | None
    ) -> None:
        node_name, claim_name = decision.nodes[0], decision.nodeclaims[0]
        try:
            node = self._mirror.get(NODES, node_name)
            if node is not None:
                await self._cordon(node)
            names = await self._launch(decision)
            await self._event(decision, "Disrupting", disrupting_message(decision, names))
            if names and not await self._initialized(names):
                await self._event(
                    decision,
                    "ReplacementNotInitialized",
                    f"{decision.reason}: replacements {', '.join(names)} not initialized within "
                    f"{self.settings.replacement_timeout_seconds:.0f}s; the node goes anyway",
                    warning=True,
                )
            current = self._mirror.nodeclaim(claim_name)
            if current is None or (current.get("metadata") or {}).get("deletionTimestamp"):
                # Taken meanwhile (an interruption warning, a user): its pods wait for the
                # replacement launched here, and nothing is left to do.
                self._record(decision, "superseded", "the NodeClaim is already being deleted")
                return
            if decision.reason is DisruptionReason.UNHEALTHY:
                deadline = self._clock() + timedelta(seconds=self.settings.repair_drain_seconds)
                await self._writer.patch_nodeclaim(
                    claim_name,
                    {
                        "metadata": {
                            "annotations": {TERMINATION_TIMESTAMP_ANNOTATION: timestamp(deadline)}
                        }
                    },
                )
            await self._writer.delete_nodeclaim(claim_name)
            self._record(decision, "disrupted")
            if repair_labels is not None:
                condition, nodepool = repair_labels
                self._metrics.nodeclaims_unhealthy_disrupted.labels(
                    condition=condition, nodepool=nodepool
                ).inc()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the next pass decides again
            self._record(decision, "failed", str(error))
            log.exception("replacement_failed", node=node_name, nodeclaim=claim_name)
        finally:
            self._acting.pop(node_name, None)
            self._wake.set()

    async def _launch(self, decision: DisruptionDecision) -> list[str]:
        names: list[str] = []
        for plan in decision.replacements:
            pool = self._mirror.get(NODE_POOLS, plan.nodepool)
            if pool is None or self._creator is None:
                continue
            created = await self._creator.create(
                plan, pool, replaces=list(decision.nodeclaims), reason=decision.reason
            )
            if created is not None:
                names.append(created.name)
        return names

    async def _initialized(self, names: list[str]) -> bool:
        deadline = self._clock() + timedelta(seconds=self.settings.replacement_timeout_seconds)
        while self._clock() < deadline:
            claims = [self._mirror.nodeclaim(n) for n in names]
            if any(c is None or (c.get("metadata") or {}).get("deletionTimestamp") for c in claims):
                return False  # a launch failed and its claim was deleted
            if all(c is not None and is_condition_true(c, "Initialized") for c in claims):
                return True
            await asyncio.sleep(self.settings.poll_seconds)
        return False

    # -- recording --------------------------------------------------------------------------

    def _repair_labels(
        self, snapshot: DisruptionSnapshot, decision: DisruptionDecision, now: datetime
    ) -> tuple[str, str] | None:
        """(condition, nodepool) of a repair for its metric once done; None for a rebalance."""
        if decision.reason is not DisruptionReason.UNHEALTHY:
            return None
        candidate = snapshot.candidate(decision.nodes[0])
        found = (
            None
            if candidate is None
            else unhealthy_condition(candidate, now, self.settings.policies)
        )
        return (
            found.policy.condition_type if found else "unknown",
            candidate.nodepool if candidate else "unknown",
        )

    def _record(self, decision: DisruptionDecision, outcome: str, why: str = "") -> None:
        self._metrics.disruption_decisions.labels(
            reason=str(decision.reason), outcome=outcome
        ).inc()
        log.info(
            "disruption_decision",
            reason=str(decision.reason),
            outcome=outcome,
            nodes=list(decision.nodes),
            nodeclaims=list(decision.nodeclaims),
            replacements=len(decision.replacements),
            message=decision.message,
            why=why,
        )

    async def _event(
        self, decision: DisruptionDecision, reason: str, message: str, *, warning: bool = False
    ) -> None:
        involved: list[KubeObject | None] = [self._mirror.get(NODES, n) for n in decision.nodes]
        involved += [self._mirror.nodeclaim(c) for c in decision.nodeclaims]
        await self._write_events(involved, reason, message, warning=warning)

    async def _write_events(
        self, involved: list[KubeObject | None], reason: str, message: str, *, warning: bool
    ) -> None:
        for obj in involved:
            if obj is None:
                continue
            try:
                await self._writer.event(obj, reason, message, warning=warning)
            except KubeApiError as error:
                log.warning("replacement_event_failed", object=name_of(obj), error=str(error))

    async def _report_blocked(self, node: str, event_reason: str, message: str) -> None:
        # Durations in messages move every pass: one Event per distinct reason, not per pass.
        text = _DIGITS.sub("#", f"{event_reason}: {message}")
        if self._reported.get(node) == text:
            return
        self._reported[node] = text
        self._metrics.disruption_blocked.labels(reason=event_reason).inc()
        log.info("replacement_blocked", node=node, reason=event_reason, message=message)
        claim = next(
            (
                c
                for c in self._mirror.objects(NODE_CLAIMS).values()
                if (c.get("status") or {}).get("nodeName") == node
            ),
            None,
        )
        await self._write_events(
            [self._mirror.get(NODES, node), claim], event_reason, message, warning=True
        )

    async def close(self) -> None:
        """Nothing outlives `run` (its replacements are cancelled with it)."""
