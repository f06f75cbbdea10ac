"""Rebalance recommendations on the pure core: only Replace NodePools act, within the budgets
that name no reason, never back onto the warned spot pool."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    DISRUPTION_BLOCKED,
    Budget,
    Candidate,
    CandidatePod,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
    RebalanceRecommendationPolicy,
    plan_rebalance,
    rebalance_status,
)
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

REPLACE = RebalanceRecommendationPolicy.REPLACE


def spot(name: str, recommended: float | None = 0.0, members: int = 2) -> Candidate:
    return candidate(
        name,
        "c4.xlarge",
        pods(name, members),
        capacity_type="spot",
        rebalance_recommended_at=None if recommended is None else at(recommended),
    )


def test_the_policy_is_read_from_the_nodepool_and_defaults_to_ignore() -> None:
    assert (
        DisruptionSettings.from_spec("p", {}).rebalance_policy
        is RebalanceRecommendationPolicy.IGNORE
    )
    spec = {"disruption": {"rebalanceRecommendationPolicy": "Replace"}}
    assert DisruptionSettings.from_spec("p", spec).rebalance_policy is REPLACE
    with pytest.raises(DisruptionSettingsError, match="rebalanceRecommendationPolicy: 'Now'"):
        DisruptionSettings.from_spec("p", {"disruption": {"rebalanceRecommendationPolicy": "Now"}})


def test_ignore_leaves_a_recommended_node_alone() -> None:
    plan = plan_rebalance(snapshot([spot("n1")]), at(1))
    assert not plan.decisions
    assert not plan.blocked


def test_replace_launches_a_replacement_off_the_warned_pool() -> None:
    """The pods fit nowhere else: one replacement, whose offerings leave out the node's own
    spot pool (c4.xlarge spot in zone-a)."""
    node = spot("n1")
    plan = plan_rebalance(snapshot([node], pools=[pool(rebalance_policy=REPLACE)]), at(1))
    [decision] = plan.decisions
    assert decision.reason is DisruptionReason.REBALANCE_RECOMMENDED
    assert decision.message.startswith("RebalanceRecommended: EC2 rebalance recommended at")
    [replacement] = decision.replacements
    assert ("c4.xlarge", "zone-a", "spot") not in {
        (o.instance_type, o.zone, o.capacity_type) for o in replacement.offerings
    }
    assert sorted(replacement.pods) == ["default/n1-0", "default/n1-1"]


def test_nodes_without_a_recommendation_or_already_going_are_left_alone() -> None:
    nodes = [spot("plain", recommended=None), spot("going")]
    plan = plan_rebalance(
        snapshot(nodes, pools=[pool(rebalance_policy=REPLACE)], disrupting=frozenset({"going"})),
        at(1),
    )
    assert not plan.decisions
    assert not plan.blocked


def test_budgets_that_name_no_reason_pace_it_oldest_recommendation_first() -> None:
    """Ten recommended nodes, default budget 10 %: one at a time, the oldest first; the
    others are DisruptionBlocked naming the budget. A budget naming reasons does not apply."""
    nodes = [spot(f"n{i}", recommended=100 - i) for i in range(10)]
    plan = plan_rebalance(snapshot(nodes, pools=[pool(rebalance_policy=REPLACE)]), at(200))
    assert [d.nodes for d in plan.decisions] == [("n9",)]
    assert {b.event_reason for b in plan.blocked} == {DISRUPTION_BLOCKED}
    assert len(plan.blocked) == 9
    assert "budget nodes: 10% of NodePool default allows 0 more" in plan.blocked[0].message
    named = Budget(nodes=0, percent=None, reasons=frozenset({DisruptionReason.DRIFTED}))
    loose = pool(rebalance_policy=REPLACE, budgets=(named, Budget(percent=50)))
    plan = plan_rebalance(snapshot(nodes, pools=[loose]), at(200))
    assert len(plan.decisions) == 5


def test_nodes_already_disrupting_count_against_the_budget() -> None:
    nodes = [spot(f"n{i}") for i in range(10)]
    plan = plan_rebalance(
        snapshot(
            nodes,
            pools=[pool(rebalance_policy=REPLACE)],
            disrupting=frozenset({"n0"}),
        ),
        at(1),
    )
    assert not plan.decisions
    assert len(plan.blocked) == 9


def test_a_do_not_disrupt_pod_holds_it() -> None:
    node = candidate(
        "n1",
        "c4.xlarge",
        pods("n1", 1, do_not_disrupt=True),
        capacity_type="spot",
        rebalance_recommended_at=at(0),
    )
    plan = plan_rebalance(snapshot([node], pools=[pool(rebalance_policy=REPLACE)]), at(1))
    [held] = plan.blocked
    assert held.message.startswith("do-not-disrupt pod default/n1-0")


def test_rebalance_status_names_the_policy() -> None:
    node = spot("n1")
    assert "Event only" in rebalance_status(snapshot([node]), node)
    replace = snapshot([node], pools=[pool(rebalance_policy=REPLACE)])
    assert "replaced first" in rebalance_status(replace, node)
    plain = spot("n2", recommended=None)
    assert rebalance_status(replace, plain).startswith("rebalance: no recommendation")


@pytest.mark.parametrize(("now", "held"), [(599, True), (600, False)])
def test_a_timed_do_not_disrupt_pod_holds_it_until_its_end(now: int, held: bool) -> None:
    """``do-not-disrupt: "10m"`` ends at start + 10 min for a rebalance too (it held for good)."""
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True, do_not_disrupt_until=at(600))
    node = candidate(
        "n1", "c4.xlarge", (hold,), capacity_type="spot", rebalance_recommended_at=at(0)
    )
    plan = plan_rebalance(snapshot([node], pools=[pool(rebalance_policy=REPLACE)]), at(now))
    assert [d.nodes for d in plan.decisions] == ([] if held else [("n1",)])
