"""Node repair (Karpenter v1.1's NodeRepair): a node whose conditions say it is broken for
longer than the condition's toleration is replaced.

- **Policies** (``RepairPolicy``): a Node condition type and status, and how long it is
  tolerated. The defaults are Karpenter AWS's (``DEFAULT_REPAIR_POLICIES``): ``Ready`` False or
  Unknown (a kubelet that stopped posting status) for 30 min, and the EKS node monitoring
  agent's ``AcceleratedHardwareReady`` (10 min), ``StorageReady``, ``NetworkingReady``,
  ``KernelReady`` and ``ContainerRuntimeReady`` (30 min) at False. The toleration counts from
  the condition's ``lastTransitionTime``; a node is repaired when ``now`` reaches it (exactly
  30 min is due). With several unhealthy conditions the one due first counts.
- **Not when many are broken**: no node of a NodePool is repaired while more of its nodes are
  unhealthy (any policy's condition, however recent) than 20 % of them, rounded up as
  Karpenter does (1 of 3 may be repaired; 2 of 10 are, 3 of 10 are not): replacing nodes does
  not fix a zone or network outage, it only churns. The node gets ``NodeRepairBlocked``.
- **Forceful, as in Karpenter**: budgets, PodDisruptionBudgets and do-not-disrupt do not hold a
  repair; daiku's termination bounds the drain instead (decision 0015).
- **Replacement first when the pods need it** (daiku, decision 0015; Karpenter deletes at once):
  the pods are simulated onto the healthy nodes; new NodeClaims are planned for those that do
  not fit, and the controller waits (bounded) for them before the broken node goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption.model import (
    BlockedNode,
    Candidate,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSnapshot,
)
from scheduler_svc.core.disruption.replacement import replacement_decision, simulate_replacement
from scheduler_svc.core.disruption.settings import DisruptionReason, format_seconds

NODE_REPAIR_BLOCKED = "NodeRepairBlocked"
# Karpenter's allowedUnhealthyPercent: above it a NodePool's problem is not a node's.
MAX_UNHEALTHY_PERCENT = 20


@dataclass(frozen=True)
class RepairPolicy:
    """A Node condition ``condition_type`` at ``status`` is tolerated ``toleration_seconds``."""

    condition_type: str
    status: str
    toleration_seconds: float


_MINUTE = 60.0
DEFAULT_REPAIR_POLICIES: tuple[RepairPolicy, ...] = (
    RepairPolicy("Ready", "False", 30 * _MINUTE),
    RepairPolicy("Ready", "Unknown", 30 * _MINUTE),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * _MINUTE),
    RepairPolicy("StorageReady", "False", 30 * _MINUTE),
    RepairPolicy("NetworkingReady", "False", 30 * _MINUTE),
    RepairPolicy("KernelReady", "False", 30 * _MINUTE),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * _MINUTE),
)


@dataclass(frozen=True)
class Unhealthy:
    """The condition that makes a node unhealthy: which policy, since when, and when the
    toleration ends (``due``)."""

    policy: RepairPolicy
    since: datetime
    due: datetime

    def describe(self, now: datetime) -> str:
        """``Ready Unknown for 31m (toleration 30m)``."""
        policy = self.policy
        lasted = max(0.0, (now - self.since).total_seconds())
        return (
            f"{policy.condition_type} {policy.status} for {format_seconds(lasted)} "
            f"(toleration {format_seconds(policy.toleration_seconds)})"
        )


def unhealthy_condition(
    candidate: Candidate,
    now: datetime,
    policies: Sequence[RepairPolicy] = DEFAULT_REPAIR_POLICIES,
) -> Unhealthy | None:
    """The node's unhealthy condition due first (None: healthy). A condition without a
    ``lastTransitionTime`` counts from ``now`` (it is never repaired on a guess)."""
    found: Unhealthy | None = None
    for policy in policies:
        for condition in candidate.conditions:
            if condition.type != policy.condition_type or condition.status != policy.status:
                continue
            since = condition.since or now
            due = since + timedelta(seconds=policy.toleration_seconds)
            if found is None or due < found.due:
                found = Unhealthy(policy, since, due)
    return found


@dataclass(frozen=True)
class NodePoolHealth:
    """How many of a NodePool's nodes are unhealthy, and how many may be (20 %, rounded up)."""

    nodepool: str
    unhealthy: int
    total: int

    @property
    def allowed(self) -> int:
        """ceil(total x 20 %), in integers so 20 % of 10 is exactly 2."""
        return -(-self.total * MAX_UNHEALTHY_PERCENT // 100)

    @property
    def is_healthy(self) -> bool:
        """Whether repair may act: at most ``allowed`` nodes unhealthy."""
        return self.unhealthy <= self.allowed

    def describe(self) -> str:
        """``3 of 10 nodes of NodePool default are unhealthy (more than 20 %, 2 allowed)``."""
        return (
            f"{self.unhealthy} of {self.total} nodes of NodePool {self.nodepool} are unhealthy "
            f"(more than {MAX_UNHEALTHY_PERCENT} %, {self.allowed} allowed): a NodePool-wide "
            "problem is not fixed by replacing nodes"
        )


def nodepool_health(
    snapshot: DisruptionSnapshot,
    nodepool: str,
    now: datetime,
    policies: Sequence[RepairPolicy] = DEFAULT_REPAIR_POLICIES,
) -> NodePoolHealth:
    """The NodePool's unhealthy count among its nodes (every node of it, disrupting or not)."""
    nodes = [c for c in snapshot.candidates if c.nodepool == nodepool]
    unhealthy = sum(1 for c in nodes if unhealthy_condition(c, now, policies) is not None)
    return NodePoolHealth(nodepool, unhealthy, len(nodes))


def plan_repair(
    snapshot: DisruptionSnapshot,
    now: datetime,
    policies: Sequence[RepairPolicy] = DEFAULT_REPAIR_POLICIES,
    *,
    catalogs: CatalogCache | None = None,
) -> DisruptionPlan:
    """Decisions (reason ``Unhealthy``) for the nodes past their toleration, with replacements
    for pods that fit nowhere else; ``NodeRepairBlocked`` for those held by the 20 % rule.
    Nodes already being disrupted are left alone. ``now`` is timezone-aware."""
    if now.tzinfo is None:
        raise ValueError("plan_repair: now must be timezone-aware (UTC), got a naive datetime")
    due: list[tuple[Candidate, Unhealthy]] = []
    for candidate in snapshot.candidates:
        if candidate.name in snapshot.disrupting:
            continue
        found = unhealthy_condition(candidate, now, policies)
        if found is not None and now >= found.due:
            due.append((candidate, found))
    sick = {c.name for c in snapshot.candidates if unhealthy_condition(c, now, policies)}
    decisions: list[DisruptionDecision] = []
    blocked: list[BlockedNode] = []
    health: dict[str, NodePoolHealth] = {}
    for candidate, found in sorted(due, key=lambda item: (item[1].due, item[0].name)):
        pool = health.setdefault(
            candidate.nodepool, nodepool_health(snapshot, candidate.nodepool, now, policies)
        )
        if not pool.is_healthy:
            blocked.append(BlockedNode(candidate.name, NODE_REPAIR_BLOCKED, pool.describe()))
            continue
        # Other unhealthy nodes take no pods in the simulation: they are going too, or broken.
        result = simulate_replacement(
            snapshot, candidate, leaving=sick - {candidate.name}, catalogs=catalogs
        )
        decisions.append(
            replacement_decision(
                candidate,
                DisruptionReason.UNHEALTHY,
                f"Unhealthy: {found.describe(now)}",
                result,
                now,
            )
        )
    return DisruptionPlan(tuple(decisions), tuple(blocked))


def repair_status(
    snapshot: DisruptionSnapshot,
    candidate: Candidate,
    now: datetime,
    policies: Sequence[RepairPolicy] = DEFAULT_REPAIR_POLICIES,
) -> str:
    """One line for ``daiku explain node``: healthy, repaired in N, due, or held by 20 %."""
    found = unhealthy_condition(candidate, now, policies)
    if found is None:
        return "repair: healthy (no repair policy's condition holds)"
    if now < found.due:
        left = (found.due - now).total_seconds()
        return f"repair: {found.describe(now)}; due in {format_seconds(left)}"
    pool = nodepool_health(snapshot, candidate.nodepool, now, policies)
    if not pool.is_healthy:
        return f"repair: {found.describe(now)}; {NODE_REPAIR_BLOCKED}: {pool.describe()}"
    return (
        f"repair: {found.describe(now)}; due now (replaced first when the scheduler runs with "
        "--node-repair, drain bounded)"
    )
