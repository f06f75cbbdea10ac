"""``daiku explain node NAME``: why a node is, or is not, going away."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler_svc.core.disruption.explain_methods import method_lines
from scheduler_svc.core.disruption.methods import (
    nominated_message,
    plan_disruption,
    quiet_seconds,
)
from scheduler_svc.core.disruption.model import ConsolidationOptions, DisruptionSnapshot
from scheduler_svc.core.disruption.settings import format_seconds


@dataclass(frozen=True)
class NodeExplanation:
    """``verdict`` in one line; ``details`` the facts behind it, one per line, then one line
    per disruption method (``explain_methods``)."""

    node: str
    is_going_away: bool
    verdict: str
    details: tuple[str, ...]


def explain_node(
    snapshot: DisruptionSnapshot,
    node_name: str,
    now: datetime,
    options: ConsolidationOptions | None = None,
) -> NodeExplanation:
    """Run a pass and say what it means for ``node_name`` (not daiku's: it stays)."""
    candidate = snapshot.candidate(node_name)
    if candidate is None:
        return NodeExplanation(node_name, False, "stays: not a node daiku launched", ())
    if node_name in snapshot.disrupting:
        return NodeExplanation(node_name, True, "going away: already being disrupted", ())
    details = [
        f"NodePool {candidate.nodepool}, {candidate.instance_type} {candidate.capacity_type} "
        f"in {candidate.zone}, ${candidate.price_per_hour:.4f}/h",
        f"age {format_seconds(max(0.0, (now - candidate.created_at).total_seconds()))}; "
        f"pods changed {format_seconds(quiet_seconds(candidate, now))} ago",
        f"{len(candidate.reschedulable_pods())} pod(s) to move "
        f"({len(candidate.pods) - len(candidate.reschedulable_pods())} DaemonSet/mirror)",
    ]
    pool = snapshot.nodepool(candidate.nodepool)
    if pool is not None:
        settings = pool.disruption
        details.append(
            f"consolidationPolicy {settings.consolidation_policy}, consolidateAfter "
            f"{format_seconds(settings.consolidate_after_seconds)}, expireAfter "
            f"{format_seconds(settings.expire_after_seconds)}"
            + (
                ""
                if settings.do_not_disrupt_grace_period_seconds is None
                else ", doNotDisruptGracePeriod "
                f"{format_seconds(settings.do_not_disrupt_grace_period_seconds)}"
            )
        )
    plan = plan_disruption(snapshot, now, options)
    if candidate.is_nominated(now):
        details.append(nominated_message(candidate))
    details.extend(method_lines(snapshot, candidate, plan, now, options))
    for decision in plan.decisions:
        if node_name in decision.nodes:
            verdict = f"going away: {decision.message}"
            if decision.needs_validation:
                verdict += " (after validation)"
            return NodeExplanation(node_name, True, verdict, tuple(details))
        if node_name in decision.deferred:
            verdict = f"going away in a later wave: {decision.message}"
            return NodeExplanation(node_name, True, verdict, tuple(details))
    for blocked in plan.blocked:
        if blocked.node == node_name:
            verdict = f"stays: {blocked.event_reason}: {blocked.message}"
            return NodeExplanation(node_name, False, verdict, tuple(details))
    others = [d.message for d in plan.decisions if d.replacements or d.reason != "Empty"]
    verdict = "stays: no disruption method applies now"
    if others:
        verdict += f" (this pass disrupts other nodes: {others[0]})"
    return NodeExplanation(node_name, False, verdict, tuple(details))
