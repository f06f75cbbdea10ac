"""A do-not-disrupt annotation with a duration (``karpenter.sh/do-not-disrupt: "1h"``, Karpenter
v1.12) holds its node against voluntary disruption only until the pod's start time plus that
duration; expiry, drift and consolidation proceed after it."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    CandidatePod,
    ConsolidationPolicy,
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


def expired_with(hold: CandidatePod) -> DisruptionSnapshot:
    old = candidate("old", "c4.xlarge", (hold,), created=0, last_event=10)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=3000, last_event=3500)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY, expire_after_seconds=3600.0, budgets=()
    )
    return snapshot([old, room], [settings])


@pytest.mark.parametrize(
    ("now", "goes"),
    [(3600, False), (5399, False), (5400, True)],  # held until 5400 exactly, not at it
)
def test_expiry_proceeds_once_the_hold_ends(now: int, goes: bool) -> None:
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True, do_not_disrupt_until=at(5400))
    plan = plan_disruption(expired_with(hold), at(now))
    assert [d.nodes for d in plan.decisions] == ([("old",)] if goes else [])
    if not goes:
        (held,) = [b for b in plan.blocked if b.node == "old"]
        assert held.message.startswith(
            "do-not-disrupt pod default/batch until 2026-01-05T10:30:00+00:00"
        )


def test_a_true_hold_never_ends() -> None:
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True)
    plan = plan_disruption(expired_with(hold), at(10**7))
    assert "old" not in [n for d in plan.decisions for n in d.nodes]


def test_consolidation_proceeds_once_the_hold_ends() -> None:
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True, do_not_disrupt_until=at(900))
    small = candidate("small", "c4.xlarge", (hold,), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    state = snapshot([small, room], [pool(expire_after_seconds=None, budgets=())])
    assert plan_disruption(state, at(899)).decisions == ()
    assert [d.nodes for d in plan_disruption(state, at(900)).decisions] == [("small",)]
