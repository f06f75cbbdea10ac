"""What replaces one node that must go whatever consolidation thinks (node repair, rebalance
recommendations): its pods are simulated onto the nodes that stay, and new NodeClaims are
planned only for the pods that do not fit, so the replacement is launched first only when the
pods need it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption.model import Candidate, DisruptionDecision, DisruptionSnapshot
from scheduler_svc.core.disruption.settings import DisruptionReason
from scheduler_svc.core.model import SchedulingInput, SchedulingResult, UnavailableOffering
from scheduler_svc.core.solver import solve


def simulate_replacement(
    snapshot: DisruptionSnapshot,
    candidate: Candidate,
    *,
    leaving: Iterable[str] = (),
    avoid: Iterable[UnavailableOffering] = (),
    catalogs: CatalogCache | None = None,
) -> SchedulingResult:
    """Reschedule ``candidate``'s pods onto every node that stays (not disrupting, not in
    ``leaving``), and onto new NodeClaims of any NodePool for what does not fit; offerings in
    ``avoid`` are not launched (e.g. the spot pool EC2 warned about)."""
    gone = snapshot.disrupting | frozenset(leaving) | {candidate.name}
    nodes = [c.to_node() for c in snapshot.candidates if c.name not in gone]
    nodes += [n for n in snapshot.other_nodes if n.name not in gone]
    pods = tuple(p.pod for p in candidate.reschedulable_pods())
    if not pods:
        return SchedulingResult(new_claims=(), existing_placements=(), unschedulable=())
    return solve(
        SchedulingInput(
            pods=pods,
            # Static pools refill themselves (their controller), never take moved pods' claims.
            nodepools=tuple(p.nodepool for p in snapshot.nodepools if not p.nodepool.is_static),
            instance_types=snapshot.instance_types,
            nodes=tuple(nodes),
            daemonsets=snapshot.daemonsets,
            unavailable_offerings=snapshot.unavailable_offerings | frozenset(avoid),
        ),
        catalogs=catalogs,
    )


def where_pods_go(candidate: Candidate, result: SchedulingResult) -> str:
    """What a decision's message says of ``candidate``'s pods after ``result`` (the simulation
    of their move): the replacements launched, that they fit on other nodes (only when the
    simulation put some there), or that there are none; then the pods that will wait."""
    said = ""
    if result.new_claims:
        said += f"; replaced by {', '.join(c.instance_type for c in result.new_claims)}"
    elif result.existing_placements:
        said += "; its pods fit on other nodes"
    elif not candidate.reschedulable_pods():
        said += "; no pods to move"
    if result.unschedulable:
        said += f"; {len(result.unschedulable)} pod(s) will wait: {result.unschedulable[0].reason}"
    return said


def replacement_decision(
    candidate: Candidate,
    reason: DisruptionReason,
    why: str,
    result: SchedulingResult,
    now: datetime,
) -> DisruptionDecision:
    """The decision to replace ``candidate`` for ``reason`` (``why`` starts the message)."""
    message = why + where_pods_go(candidate, result)
    return DisruptionDecision(
        reason=reason,
        nodes=(candidate.name,),
        nodeclaims=(candidate.nodeclaim,),
        replacements=result.new_claims,
        message=message,
        decided_at=now,
        old_price_per_hour=candidate.price_per_hour,
        new_price_per_hour=result.total_price_per_hour,
    )
