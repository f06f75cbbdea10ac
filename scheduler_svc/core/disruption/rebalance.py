"""Acting on EC2 rebalance recommendations (aws/karpenter-provider-aws #2813; Karpenter only
emits an Event). A NodePool with ``disruption.rebalanceRecommendationPolicy: Replace`` has a spot
node EC2 recommended rebalancing replaced before any interruption warning: its pods are
simulated elsewhere (never onto the warned spot pool), replacements are launched first for
those that fit nowhere, then the node is drained.

It is voluntary, so it obeys what holds other voluntary disruption: the budgets that name no
reason (as expiry; ``RebalanceRecommended`` cannot be named), a do-not-disrupt pod and a
PodDisruptionBudget allowing no disruption. A node held back stays until they allow it, or
until EC2's two-minute interruption warning, which the interruption handler acts on whatever
they say. ``Ignore`` (the default) leaves the node to that warning (decision 0015).
"""

from __future__ import annotations

from datetime import datetime

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption.methods import DISRUPTION_BLOCKED
from scheduler_svc.core.disruption.model import (
    BlockedNode,
    Candidate,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSnapshot,
)
from scheduler_svc.core.disruption.replacement import replacement_decision, simulate_replacement
from scheduler_svc.core.disruption.settings import (
    DisruptionReason,
    RebalanceRecommendationPolicy,
)
from scheduler_svc.core.model import UnavailableOffering
from scheduler_svc.core.requirements import CAPACITY_TYPE_SPOT

_UNLIMITED = 1 << 30


def _pod_blocker(snapshot: DisruptionSnapshot, candidate: Candidate, now: datetime) -> str | None:
    for pod in candidate.pods:
        if pod.holds(now):  # a timed hold (do-not-disrupt: "1h") ends like everywhere else
            return f"do-not-disrupt pod {pod.key}"
    for pod in candidate.reschedulable_pods():
        for pdb in snapshot.pdbs:
            if pdb.disruptions_allowed <= 0 and pdb.covers(pod.pod):
                return f"pdb {pdb.key} (pod {pod.key}; no disruption allowed now)"
    return None


def _budget_left(
    snapshot: DisruptionSnapshot, nodepool: str, now: datetime, chosen: int
) -> tuple[int, str]:
    """Disruptions the NodePool's active reason-less budgets still allow, and the tightest."""
    pool = snapshot.nodepool(nodepool)
    if pool is None:
        return 0, f"NodePool {nodepool} not found"
    in_pool = [c for c in snapshot.candidates if c.nodepool == nodepool]
    busy = sum(1 for c in in_pool if c.name in snapshot.disrupting) + chosen
    best, which = _UNLIMITED, ""
    for budget in pool.disruption.budgets:
        if not budget.reasons and budget.is_active(now) and budget.allowed(len(in_pool)) < best:
            best, which = budget.allowed(len(in_pool)), budget.describe()
    return best - busy, which


def rebalance_wanted(snapshot: DisruptionSnapshot, candidate: Candidate) -> bool:
    """Whether EC2 recommended rebalancing the node and its NodePool says Replace."""
    pool = snapshot.nodepool(candidate.nodepool)
    return (
        candidate.rebalance_recommended_at is not None
        and pool is not None
        and pool.disruption.rebalance_policy is RebalanceRecommendationPolicy.REPLACE
    )


def plan_rebalance(
    snapshot: DisruptionSnapshot,
    now: datetime,
    *,
    catalogs: CatalogCache | None = None,
) -> DisruptionPlan:
    """Decisions (reason ``RebalanceRecommended``) for the recommended nodes of ``Replace``
    NodePools, oldest recommendation first, as far as the budgets allow; the others are
    ``DisruptionBlocked`` with why. Nodes already being disrupted are left alone."""
    wanted = [
        c
        for c in snapshot.candidates
        if c.name not in snapshot.disrupting and rebalance_wanted(snapshot, c)
    ]
    wanted.sort(key=lambda c: (c.rebalance_recommended_at, c.name))
    chosen: dict[str, int] = {}
    decisions: list[DisruptionDecision] = []
    blocked: list[BlockedNode] = []
    for candidate in wanted:
        why = f"rebalance recommended at {candidate.rebalance_recommended_at:%H:%M:%S}"
        blocker = _pod_blocker(snapshot, candidate, now)
        if blocker is None:
            left, which = _budget_left(
                snapshot, candidate.nodepool, now, chosen.get(candidate.nodepool, 0)
            )
            if left < 1:
                blocker = (
                    f"budget {which} of NodePool {candidate.nodepool} allows {max(left, 0)} "
                    f"more disruption(s) now"
                )
        if blocker is not None:
            blocked.append(BlockedNode(candidate.name, DISRUPTION_BLOCKED, f"{blocker} ({why})"))
            continue
        avoid = (
            [UnavailableOffering(candidate.instance_type, candidate.zone, CAPACITY_TYPE_SPOT)]
            if candidate.capacity_type == CAPACITY_TYPE_SPOT
            else []
        )
        result = simulate_replacement(snapshot, candidate, avoid=avoid, catalogs=catalogs)
        chosen[candidate.nodepool] = chosen.get(candidate.nodepool, 0) + 1
        decisions.append(
            replacement_decision(
                candidate,
                DisruptionReason.REBALANCE_RECOMMENDED,
                f"RebalanceRecommended: EC2 {why} (rebalanceRecommendationPolicy Replace)",
                result,
                now,
            )
        )
    return DisruptionPlan(tuple(decisions), tuple(blocked))


def rebalance_status(snapshot: DisruptionSnapshot, candidate: Candidate) -> str:
    """One line for ``daiku explain node``."""
    pool = snapshot.nodepool(candidate.nodepool)
    policy = pool.disruption.rebalance_policy if pool is not None else None
    if candidate.rebalance_recommended_at is None:
        return f"rebalance: no recommendation (rebalanceRecommendationPolicy {policy})"
    when = f"{candidate.rebalance_recommended_at:%Y-%m-%dT%H:%M:%SZ}"
    if policy is RebalanceRecommendationPolicy.REPLACE:
        return f"rebalance: recommended at {when}; replaced first, then drained within budgets"
    return f"rebalance: recommended at {when}; rebalanceRecommendationPolicy {policy}: Event only"
