"""``daiku explain node``'s method lines: for each disruption method, one line on whether it
acts on the node now and why or why not (Empty, Expired, Drifted, Underutilized with the
Balanced score, repair, rebalance). Pure, like the rest of the core."""

from __future__ import annotations

from datetime import datetime

from scheduler_svc.core.disruption.drift import drift_reason
from scheduler_svc.core.disruption.grace import grace_has_ended, grace_note
from scheduler_svc.core.disruption.methods import (
    consolidate_alone,
    expiry_reason,
    is_quiet_for,
    quiet_seconds,
)
from scheduler_svc.core.disruption.model import (
    Candidate,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSnapshot,
)
from scheduler_svc.core.disruption.rebalance import rebalance_status
from scheduler_svc.core.disruption.repair import repair_status
from scheduler_svc.core.disruption.settings import DisruptionReason, format_seconds


def method_lines(
    snapshot: DisruptionSnapshot,
    candidate: Candidate,
    plan: DisruptionPlan,
    now: datetime,
    options: ConsolidationOptions | None = None,
) -> tuple[str, ...]:
    """One line per method, in the order a pass tries them. ``plan`` is this pass's: the
    method that acts on the node says so; a node the pass blocks says it in the verdict."""
    decision = next((d for d in plan.decisions if candidate.name in d.nodes), None)
    acting = None if decision is None else decision.reason
    lines = [
        _empty(snapshot, candidate, now),
        _expired(snapshot, candidate, now) + _hold(snapshot, candidate, _EXPIRED, now),
        _drifted(snapshot, candidate) + _hold(snapshot, candidate, _DRIFTED, now),
        _underutilized(snapshot, candidate, now, options, decision),
        repair_status(snapshot, candidate, now),
        rebalance_status(snapshot, candidate),
    ]
    if acting is not None:
        lines = [f"{line} -> acts now" if line.startswith(f"{acting}:") else line for line in lines]
    return tuple(lines)


_EXPIRED = DisruptionReason.EXPIRED
_DRIFTED = DisruptionReason.DRIFTED


def _hold(
    snapshot: DisruptionSnapshot, candidate: Candidate, reason: DisruptionReason, now: datetime
) -> str:
    """For a due node: ``; held by do-not-disrupt pod X, doNotDisruptGracePeriod 30m ends ...``
    (or ``no longer holds``, or ``for good`` without a grace period); "" otherwise."""
    due = (
        expiry_reason(candidate, snapshot, now)
        if reason is _EXPIRED
        else drift_reason(candidate, snapshot)
    )
    held = [p.key for p in candidate.pods if p.holds(now)]
    if due is None or not held:
        return ""
    note = grace_note(candidate, snapshot, reason)
    if grace_has_ended(candidate, snapshot, reason, now):
        ended = note.replace(" ends ", " ended ")
        return f"; do-not-disrupt pod {held[0]} no longer holds it ({ended})"
    return f"; held by do-not-disrupt pod {held[0]}" + (f", {note}" if note else "")


def _empty(snapshot: DisruptionSnapshot, candidate: Candidate, now: datetime) -> str:
    moving = len(candidate.reschedulable_pods())
    if moving:
        return f"{DisruptionReason.EMPTY}: no, {moving} pod(s) to move"
    pool = snapshot.nodepool(candidate.nodepool)
    wait = None if pool is None else pool.disruption.consolidate_after_seconds
    if wait is None:
        return f"{DisruptionReason.EMPTY}: never (consolidateAfter Never)"
    quiet = format_seconds(quiet_seconds(candidate, now))
    if not is_quiet_for(candidate, now, wait):
        return (
            f"{DisruptionReason.EMPTY}: not yet, quiet {quiet} of consolidateAfter "
            f"{format_seconds(wait)}"
        )
    return f"{DisruptionReason.EMPTY}: yes, quiet {quiet} (consolidateAfter {format_seconds(wait)})"


def _expired(snapshot: DisruptionSnapshot, candidate: Candidate, now: datetime) -> str:
    why = expiry_reason(candidate, snapshot, now)
    if why is not None:
        return why
    pool = snapshot.nodepool(candidate.nodepool)
    limit = None if pool is None else pool.disruption.expire_after_seconds
    if limit is None:
        return f"{DisruptionReason.EXPIRED}: never (expireAfter Never)"
    left = limit - (now - candidate.created_at).total_seconds()
    return f"{DisruptionReason.EXPIRED}: not yet, expires in {format_seconds(left)}"


def _drifted(snapshot: DisruptionSnapshot, candidate: Candidate) -> str:
    drift = drift_reason(candidate, snapshot)
    return f"{DisruptionReason.DRIFTED}: {drift}" if drift else f"{DisruptionReason.DRIFTED}: no"


def _underutilized(
    snapshot: DisruptionSnapshot,
    candidate: Candidate,
    now: datetime,
    options: ConsolidationOptions | None,
    acting: DisruptionDecision | None,
) -> str:
    name = DisruptionReason.UNDERUTILIZED
    pool = snapshot.nodepool(candidate.nodepool)
    if pool is None:
        return f"{name}: no, NodePool {candidate.nodepool} not found"
    policy = pool.disruption.consolidation_policy
    if not policy.consolidates_underutilized:
        return f"{name}: never (consolidationPolicy {policy})"
    if not candidate.reschedulable_pods():
        return f"{name}: no, empty (the Empty method's)"
    if acting is not None and acting.reason is name:
        return acting.message
    decision, why_not = consolidate_alone(snapshot, candidate, now, options)
    if decision is None:
        return f"{name}: no, {why_not}"
    return f"{name}: alone it would: {decision.message.removeprefix(f'{name}: ')}"
