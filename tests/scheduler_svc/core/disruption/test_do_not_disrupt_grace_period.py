"""The NodePool's do-not-disrupt grace period (issue 15 item 4, ``spec.disruption.
doNotDisruptGracePeriod``): a do-not-disrupt pod holds an expired or drifted node for at most
that long after the node became due; then expiry and drift proceed. Consolidation still waits
for the pod."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.core.disruption import (
    CandidatePod,
    ConsolidationPolicy,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
    DisruptionSnapshot,
    plan_disruption,
)
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

HOUR = 3600.0
FOR_GOOD = CandidatePod(app_pod("batch"), do_not_disrupt=True)


def expired(
    grace: float | None, hold: CandidatePod = FOR_GOOD, **kwargs: Any
) -> DisruptionSnapshot:
    """``old`` expires at 1 h (created at 0, expireAfter 1h) and runs a do-not-disrupt pod."""
    old = candidate("old", "c4.xlarge", (hold,), created=0, last_event=10, **kwargs)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=3000, last_event=3500)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
        expire_after_seconds=HOUR,
        budgets=(),
        do_not_disrupt_grace_period_seconds=grace,
    )
    return snapshot([old, room], [settings])


def went(plan: Any) -> list[tuple[str, ...]]:
    return [d.nodes for d in plan.decisions]


@pytest.mark.parametrize(
    ("seconds_after_expiry", "goes"),
    # doNotDisruptGracePeriod 30m: held until exactly 30 min after expiry, not at it.
    [(0, False), (1799, False), (1800, True), (1801, True)],
)
def test_expiry_proceeds_exactly_at_the_grace_period(seconds_after_expiry: int, goes: bool) -> None:
    plan = plan_disruption(expired(1800.0), at(HOUR + seconds_after_expiry))
    assert went(plan) == ([("old",)] if goes else [])
    if goes:
        (decision,) = plan.decisions
        assert decision.ends_do_not_disrupt
        assert decision.message.startswith("Expired: ")
        assert (
            "do-not-disrupt pod(s) default/batch no longer hold it (doNotDisruptGracePeriod 30m "
            "ended 2026-01-05T10:30:00+00:00)"
        ) in decision.message
    else:
        (held,) = [b for b in plan.blocked if b.node == "old"]
        assert held.message.startswith(
            "do-not-disrupt pod default/batch; doNotDisruptGracePeriod 30m ends "
            "2026-01-05T10:30:00+00:00 (Expired: "
        )


def test_without_a_grace_period_the_pod_holds_for_good() -> None:
    plan = plan_disruption(expired(None), at(1000 * HOUR))
    assert ("old",) not in went(plan)


def test_a_shorter_annotation_still_ends_first() -> None:
    """The pod's own duration (Karpenter v1.12) ends before the pool's cap: it is not extended;
    the decision does not mark the drain (nothing holds it any more)."""
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True, do_not_disrupt_until=at(HOUR + 60))
    plan = plan_disruption(expired(4 * HOUR, hold), at(HOUR + 60))
    assert went(plan) == [("old",)]
    assert not plan.decisions[0].ends_do_not_disrupt


def drifted(since: float | None, now: float, grace: float = 1800.0) -> Any:
    """``old`` drifted (its NodePool hash changed), its Drifted condition True since ``since``."""
    drifted_since = None if since is None else at(since)
    state = expired(grace, nodepool_hash="old-hash", drifted_since=drifted_since)
    pool_state = state.nodepools[0]
    settings = DisruptionSettings(
        ConsolidationPolicy.WHEN_EMPTY,
        0.0,
        None,  # no expiry: drift only
        None,
        (),
        do_not_disrupt_grace_period_seconds=grace,
    )
    fresh = type(pool_state)(pool_state.nodepool, settings, nodepool_hash="new-hash")
    return plan_disruption(
        DisruptionSnapshot(
            candidates=state.candidates, nodepools=(fresh,), instance_types=state.instance_types
        ),
        at(now),
    )


@pytest.mark.parametrize(("now", "goes"), [(600 + 1799, False), (600 + 1800, True)])
def test_drift_proceeds_exactly_at_the_grace_period_after_the_drifted_condition(
    now: float, goes: bool
) -> None:
    plan = drifted(600, now)
    assert went(plan) == ([("old",)] if goes else [])
    if goes:
        assert plan.decisions[0].reason is DisruptionReason.DRIFTED


def test_drift_not_yet_recorded_holds() -> None:
    """The grace period counts from the Drifted condition; until it is written the pod holds."""
    assert went(drifted(None, 100 * HOUR)) == []


def test_consolidation_still_waits_for_the_pod() -> None:
    """The grace period is for expiry and drift only: Underutilized stays held for good."""
    small = candidate("small", "c4.xlarge", (FOR_GOOD,), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    settings = pool(expire_after_seconds=None, budgets=(), do_not_disrupt_grace_period_seconds=60.0)
    plan = plan_disruption(snapshot([small, room], [settings]), at(100 * HOUR))
    assert went(plan) == []
    (held,) = [b for b in plan.blocked if b.node == "small"]
    assert held.message == "do-not-disrupt pod default/batch"


def test_settings_read_the_grace_period() -> None:
    spec = {"disruption": {"doNotDisruptGracePeriod": "1h30m"}}
    assert DisruptionSettings.from_spec("p", spec).do_not_disrupt_grace_period_seconds == 5400.0
    assert DisruptionSettings.from_spec("p", {}).do_not_disrupt_grace_period_seconds is None


@pytest.mark.parametrize("text", ["Never", "soon", "-1h", ""])
def test_bad_grace_periods_are_refused(text: str) -> None:
    with pytest.raises(DisruptionSettingsError, match=r"spec\.disruption\.doNotDisruptGracePeriod"):
        DisruptionSettings.from_spec("p", {"disruption": {"doNotDisruptGracePeriod": text}})
