"""Balanced consolidation (Karpenter v1.14, ``consolidationPolicy: Balanced``): a move is made
only when its saving justifies its disruption, both as fractions of its NodePool's totals.

    savings_fraction    = (old price - new price) / NodePool price (every candidate's)
    disruption_fraction = move's disruption cost / NodePool disruption cost
    score               = savings_fraction / disruption_fraction;  passes when >= 1/k

A node's disruption cost is 1 (the per-node baseline: an empty node costs something, and no
division is by zero) plus ``max(0, eviction_cost(pod))`` of each pod that would be evicted; k
is ``consolidationThreshold`` (1-3, default 2). Moves that save nothing never pass. Only the
scoring is here; whether a move is feasible and cheaper is ``methods._consolidate``'s, and
daiku's own saving thresholds still apply before it. Decision 0015 lists where daiku differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_svc.core.disruption.model import Candidate, CandidatePod, DisruptionSnapshot
from scheduler_svc.core.disruption.settings import ConsolidationPolicy

# Karpenter's EvictionCost: pod-deletion-cost / 2^27 and priority / 2^25 around 1, clamped.
_DELETION_COST_SCALE = 2.0**27
_PRIORITY_SCALE = 2.0**25
_EVICTION_COST_BOUND = 10.0
NODE_BASELINE_COST = 1.0


def eviction_cost(pod: CandidatePod) -> float:
    """How costly evicting ``pod`` is: 1 by default, more with a higher
    ``controller.kubernetes.io/pod-deletion-cost`` or priority, in [-10, 10]."""
    cost = 1.0 + pod.deletion_cost / _DELETION_COST_SCALE + pod.priority / _PRIORITY_SCALE
    return max(-_EVICTION_COST_BOUND, min(_EVICTION_COST_BOUND, cost))


def disruption_cost(candidate: Candidate) -> float:
    """The baseline plus the (non-negative) eviction cost of every pod that would move."""
    return NODE_BASELINE_COST + sum(
        max(0.0, eviction_cost(p)) for p in candidate.reschedulable_pods()
    )


@dataclass(frozen=True)
class BalancedScore:
    """One move's score against its NodePools' totals, and whether it passes."""

    savings_per_hour: float
    pool_price_per_hour: float
    pods_moved: int
    disruption: float
    pool_disruption: float
    threshold: int

    @property
    def savings_fraction(self) -> float:
        return self.savings_per_hour / self.pool_price_per_hour if self.pool_price_per_hour else 0.0

    @property
    def disruption_fraction(self) -> float:
        return self.disruption / self.pool_disruption

    @property
    def score(self) -> float:
        return self.savings_fraction / self.disruption_fraction

    @property
    def passes(self) -> bool:
        """Saves something, and scores at least 1/k (a tiny epsilon forgives float noise at
        the boundary: a single-node pool's delete scores exactly 1)."""
        return self.savings_per_hour > 0 and self.score >= 1.0 / self.threshold - 1e-12

    def describe(self) -> str:
        """``Balanced score 0.83 >= 0.50: saves $0.10/h (12% of $0.80/h), disrupts 3 pod(s)
        (cost 4.0, 9% of 44.0)``."""
        sign = ">=" if self.passes else "<"
        return (
            f"Balanced score {self.score:.2f} {sign} {1.0 / self.threshold:.2f} "
            f"(consolidationThreshold {self.threshold}): saves ${self.savings_per_hour:.4f}/h "
            f"({self.savings_fraction:.0%} of ${self.pool_price_per_hour:.4f}/h), disrupts "
            f"{self.pods_moved} pod(s) (cost {self.disruption:.1f}, "
            f"{self.disruption_fraction:.0%} of {self.pool_disruption:.1f})"
        )


def balanced_score(
    snapshot: DisruptionSnapshot, nodes: Sequence[Candidate], new_price_per_hour: float
) -> BalancedScore | None:
    """The score of removing ``nodes`` for ``new_price_per_hour`` of replacements, when any of
    them is in a Balanced NodePool (None: none is; the move is not scored). A move across
    NodePools is scored against the Balanced pools' combined totals, with the strictest
    threshold among them."""
    pools = [snapshot.nodepool(c.nodepool) for c in nodes]
    balanced = {
        p.name: p.disruption.consolidation_threshold
        for p in pools
        if p is not None and p.disruption.consolidation_policy is ConsolidationPolicy.BALANCED
    }
    if not balanced:
        return None
    members = [c for c in snapshot.candidates if c.nodepool in balanced]
    old_price = sum(c.price_per_hour for c in nodes)
    return BalancedScore(
        savings_per_hour=old_price - new_price_per_hour,
        pool_price_per_hour=sum(c.price_per_hour for c in members),
        pods_moved=sum(len(c.reschedulable_pods()) for c in nodes),
        disruption=sum(disruption_cost(c) for c in nodes),
        pool_disruption=sum(disruption_cost(c) for c in members) or NODE_BASELINE_COST,
        threshold=min(balanced.values()),
    )
