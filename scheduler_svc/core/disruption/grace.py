"""The do-not-disrupt grace period (issue 15 item 4, daiku's ``spec.disruption.
doNotDisruptGracePeriod``, decision 0016): a ``karpenter.sh/do-not-disrupt`` pod holds an
**expired or drifted** node for at most that long after the node became due, then expiry and
drift proceed and the drain evicts the pod like any other (PodDisruptionBudgets still apply).

- Expired: due at ``creationTimestamp + expireAfter``.
- Drifted: due at its NodeClaim's ``Drifted`` condition's ``lastTransitionTime``; until that
  condition is recorded (the pass after drift is first seen) the hold stands.
- Exactly at due + grace period the hold has ended.
- Consolidation (Empty, Underutilized) and rebalancing still wait for the pod for as long as
  its annotation says: they are optional, so a job's wish not to be moved wins there, as in
  Karpenter's graceful class. Forced termination at ``terminationGracePeriod`` is unchanged.

Unset, the pod holds as long as its annotation says (``true``: for good), as in Karpenter.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler_svc.core.disruption.model import Candidate, DisruptionSnapshot
from scheduler_svc.core.disruption.settings import DisruptionReason, format_seconds

GRACE_REASONS = frozenset({DisruptionReason.EXPIRED, DisruptionReason.DRIFTED})


def grace_ends_at(
    candidate: Candidate, snapshot: DisruptionSnapshot, reason: DisruptionReason
) -> datetime | None:
    """When do-not-disrupt pods stop holding ``candidate`` against ``reason`` (None: they
    hold as their annotations say: no grace period, another reason, or not due yet)."""
    pool = snapshot.nodepool(candidate.nodepool)
    if pool is None or reason not in GRACE_REASONS:
        return None
    grace = pool.disruption.do_not_disrupt_grace_period_seconds
    if grace is None:
        return None
    if reason is DisruptionReason.EXPIRED:
        expire_after = pool.disruption.expire_after_seconds
        if expire_after is None:
            return None
        due = candidate.created_at + timedelta(seconds=expire_after)
    else:
        if candidate.drifted_since is None:
            return None
        due = candidate.drifted_since
    return due + timedelta(seconds=grace)


def grace_has_ended(
    candidate: Candidate, snapshot: DisruptionSnapshot, reason: DisruptionReason, now: datetime
) -> bool:
    """Whether do-not-disrupt pods no longer hold ``candidate`` against ``reason`` at ``now``
    (exactly at the end: ended)."""
    ends = grace_ends_at(candidate, snapshot, reason)
    return ends is not None and now >= ends


def grace_note(candidate: Candidate, snapshot: DisruptionSnapshot, reason: DisruptionReason) -> str:
    """``doNotDisruptGracePeriod 4h ends 2026-01-05T13:00:00+00:00`` (``ended`` once past; ""
    when the pool sets none or the end is not known yet)."""
    ends = grace_ends_at(candidate, snapshot, reason)
    pool = snapshot.nodepool(candidate.nodepool)
    if ends is None or pool is None:
        return ""
    grace = pool.disruption.do_not_disrupt_grace_period_seconds
    return (
        f"doNotDisruptGracePeriod {format_seconds(grace)} ends {ends.isoformat(timespec='seconds')}"
    )
