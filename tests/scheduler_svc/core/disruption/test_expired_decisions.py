"""Expired nodes, decision by decision: what the decision carries, the budget that blocks it
(named for Expired), an older expired node that is held not stopping a younger one, the
do-not-disrupt pods whose grace period ended listed by name, and the pass's own refusals: a
naive clock, a replacement holding room, and a cheaper node that cannot be had in the pod's
zone."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.core.disruption import (
    BlockedNode,
    Budget,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionReason,
    NodePoolState,
    plan_disruption,
)
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import priced_type
from tests.scheduler_svc.core.disruption.builders import (
    T0,
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    pods,
    pool,
    snapshot,
)

HOUR = 3600.0


def expiring(**settings: Any) -> NodePoolState:
    """WhenEmpty (no consolidation in the way), expireAfter 1h, no budget unless given."""
    options: dict[str, Any] = {
        "consolidation_policy": ConsolidationPolicy.WHEN_EMPTY,
        "expire_after_seconds": HOUR,
        "budgets": (),
        **settings,
    }
    return pool(**options)


def test_an_expired_decision_carries_its_node_claim_and_its_instant() -> None:
    old = candidate("old", "c4.xlarge", pods("p", 1), created=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=3000)
    (decision,) = plan_disruption(snapshot([old, room], [expiring()]), at(2 * HOUR)).decisions
    assert (decision.reason, decision.nodes) == (DisruptionReason.EXPIRED, ("old",))
    assert decision.nodeclaims == ("default-old",)
    assert decision.decided_at == at(2 * HOUR)


def test_a_zero_budget_blocks_expiry_and_says_so() -> None:
    old = candidate("old", "c4.xlarge", pods("p", 1), created=0)
    frozen = expiring(budgets=(Budget(nodes=0, percent=None),))
    plan = plan_disruption(snapshot([old], [frozen]), at(2 * HOUR))
    assert plan.decisions == ()
    assert blocked_messages(plan)["old"] == (
        "budget nodes: 0 of NodePool default allows 0 more Expired disruption(s) now "
        "(Expired: 2h old (expireAfter 1h))"
    )


def test_a_held_older_expired_node_does_not_stop_a_younger_one() -> None:
    """older (held by a do-not-disrupt pod) is blocked; younger, also expired, is replaced."""
    held = CandidatePod(app_pod("batch"), do_not_disrupt=True)
    older = candidate("older", "c4.xlarge", (held,), created=0)
    younger = candidate("younger", "c4.xlarge", pods("p", 1), created=60)
    plan = plan_disruption(snapshot([older, younger], [expiring()]), at(2 * HOUR))
    assert [d.nodes for d in plan.decisions] == [("younger",)]
    assert blocked_messages(plan)["older"].startswith("do-not-disrupt pod default/batch")


def test_the_pods_a_grace_period_stopped_holding_are_named() -> None:
    """Two do-not-disrupt pods, one held for good and one for 4h: a 30m grace period after
    expiry ends both holds, and the decision names both."""
    forever = CandidatePod(app_pod("a"), do_not_disrupt=True)
    hours = CandidatePod(app_pod("b"), do_not_disrupt=True, do_not_disrupt_until=at(4 * HOUR))
    old = candidate("old", "c4.xlarge", (forever, hours), created=0)
    graced = expiring(do_not_disrupt_grace_period_seconds=1800.0)
    (decision,) = plan_disruption(snapshot([old], [graced]), at(HOUR + 1800)).decisions
    assert decision.ends_do_not_disrupt
    assert (
        "; do-not-disrupt pod(s) default/a, default/b no longer hold it (doNotDisruptGracePeriod "
        "30m ended 2026-01-05T10:30:00+00:00)"
    ) in decision.message


def test_a_pass_refuses_a_naive_clock() -> None:
    naive = r"^plan_disruption: now must be timezone-aware \(UTC\), got a naive datetime$"
    with pytest.raises(ValueError, match=naive):
        plan_disruption(snapshot([], [expiring()]), T0.replace(tzinfo=None))


def test_a_replacement_holding_room_is_blocked_as_disruption_blocked() -> None:
    deferred = candidate("n2", "c4.large", pods("p", 1))
    room = candidate(
        "r",
        "c4.xlarge",
        created=615,
        room_held_for=frozenset({"default-n2"}),
        room_held_until=at(915),
    )
    plan = plan_disruption(snapshot([deferred, room], [consolidating()]), at(700))
    (held,) = [b for b in plan.blocked if b.node == "r"]
    assert held == BlockedNode(
        "r",
        "DisruptionBlocked",
        "holds room for default-n2, deferred by a consolidation in waves until "
        "2026-01-05T09:15:15+00:00",
    )


def test_a_cheaper_type_not_offered_cheaply_in_the_pods_zone_holds_nothing() -> None:
    """The pod must stay in zone-b; r.large is cheap only in zone-a ($0.10/h) and dearer than
    the node in zone-b ($0.50/h): no cheaper node holds the pod, said as the solver says it."""
    pinned = CandidatePod(app_pod("p", node_selector={LABEL_ZONE: "zone-b"}))
    node = candidate("n", "c4.xlarge", (pinned,), price=0.40, zone="zone-b")
    catalog = [priced_type("r.large", ("zone-a", "on-demand", 0.10), ("zone-b", "on-demand", 0.50))]
    plan = plan_disruption(snapshot([node], [consolidating()], catalog), at(600))
    assert plan.decisions == ()
    assert blocked_messages(plan)["n"].startswith(
        "no cheaper node holds the pods (would cost more: no replacement saves 10% and $0.01/h "
        "on $0.4000/h): "
    )
