"""A rebalance recommendation is voluntary: a PodDisruptionBudget that allows no eviction of
one of the node's pods holds it (named in the Event), and only such a budget does; the
NodePool's reason-less budgets pace it while they are active, counting the nodes already
going."""

from __future__ import annotations

import pytest

from scheduler_svc.core import LabelSelector
from scheduler_svc.core.disruption import (
    DISRUPTION_BLOCKED,
    BlockedNode,
    Budget,
    CandidatePod,
    DisruptionReason,
    PodDisruptionBudget,
    RebalanceRecommendationPolicy,
    plan_rebalance,
)
from tests.scheduler_svc.core.builders import instance_type
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

REPLACE = pool(rebalance_policy=RebalanceRecommendationPolicy.REPLACE)
WEB = LabelSelector.of({"app": "app"})


def recommended(*members: CandidatePod) -> list:  # type: ignore[type-arg]
    node = candidate(
        "n1", "c4.xlarge", members, capacity_type="spot", rebalance_recommended_at=at(0)
    )
    return [node]


def test_a_pdb_allowing_no_eviction_of_its_pod_holds_the_node() -> None:
    pdb = PodDisruptionBudget("default", "web", WEB, 0)
    plan = plan_rebalance(snapshot(recommended(*pods("w", 1)), [REPLACE], pdbs=(pdb,)), at(60))
    assert plan.decisions == ()
    assert plan.blocked == (
        BlockedNode(
            "n1",
            DISRUPTION_BLOCKED,
            "pdb default/web (pod default/w-0; no disruption allowed now) "
            "(rebalance recommended at 09:00:00)",
        ),
    )


@pytest.mark.parametrize(
    "pdb",
    [
        pytest.param(PodDisruptionBudget("default", "web", WEB, 1), id="allows-one"),
        pytest.param(
            PodDisruptionBudget("default", "db", LabelSelector.of({"app": "db"}), 0),
            id="other-pods",
        ),
        pytest.param(PodDisruptionBudget("other", "web", WEB, 0), id="other-namespace"),
    ],
)
def test_a_pdb_that_allows_an_eviction_or_covers_no_pod_of_the_node_does_not_hold_it(
    pdb: PodDisruptionBudget,
) -> None:
    plan = plan_rebalance(snapshot(recommended(*pods("w", 1)), [REPLACE], pdbs=(pdb,)), at(60))
    assert [d.nodes for d in plan.decisions] == [("n1",)]
    assert plan.blocked == ()


def test_a_daemonset_pod_under_a_pdb_does_not_hold_the_node() -> None:
    """The DaemonSet's pod is not evicted for a rebalance (it is on every node)."""
    daemon = CandidatePod(app_pod("ds", 25, 0), owner_kind="DaemonSet")
    pdb = PodDisruptionBudget("default", "web", WEB, 0)
    plan = plan_rebalance(snapshot(recommended(daemon), [REPLACE], pdbs=(pdb,)), at(60))
    assert [d.nodes for d in plan.decisions] == [("n1",)]


def spot(name: str) -> list:  # type: ignore[type-arg]
    return [
        candidate(
            name, "c4.xlarge", pods(name, 1), capacity_type="spot", rebalance_recommended_at=at(0)
        )
    ]


def test_the_decision_is_a_rebalance_made_now() -> None:
    plan = plan_rebalance(snapshot(spot("n1"), [REPLACE]), at(60))
    (decision,) = plan.decisions
    assert decision.reason is DisruptionReason.REBALANCE_RECOMMENDED
    assert decision.decided_at == at(60)
    assert decision.message.startswith(
        "RebalanceRecommended: EC2 rebalance recommended at 09:00:00 "
        "(rebalanceRecommendationPolicy Replace)"
    )


def test_each_node_already_going_counts_once_against_the_budget() -> None:
    """20 nodes, 10 %: two at once; one is already going, so one recommended node goes."""
    nodes = [n for i in range(20) for n in spot(f"n{i:02}")]
    state = snapshot(nodes, [REPLACE], disrupting=frozenset({"n00"}))
    assert len(plan_rebalance(state, at(60)).decisions) == 1


def test_a_scheduled_budget_paces_rebalancing_only_while_it_is_active() -> None:
    """A reason-less ``nodes: 0`` budget from 09:00 for an hour holds every recommended node
    at 09:01; at 10:00 it has ended and the 100 % budget lets both go."""
    freeze = Budget(nodes=0, percent=None, schedule="0 9 * * *", duration_seconds=3600.0)
    settings = pool(
        rebalance_policy=RebalanceRecommendationPolicy.REPLACE,
        budgets=(freeze, Budget(percent=100)),
    )
    state = snapshot([*spot("a"), *spot("b")], [settings])
    held = plan_rebalance(state, at(60))
    assert held.decisions == ()
    assert [b.message for b in held.blocked] == [
        "budget nodes: 0 (schedule '0 9 * * *' for 1h) of NodePool default allows 0 more "
        "disruption(s) now (rebalance recommended at 09:00:00)"
    ] * 2
    assert len(plan_rebalance(state, at(3600)).decisions) == 2


def test_the_event_names_the_first_of_equally_tight_budgets() -> None:
    nodes = [n for i in range(10) for n in spot(f"n{i}")]
    settings = pool(
        rebalance_policy=RebalanceRecommendationPolicy.REPLACE,
        budgets=(Budget(nodes=1, percent=None), Budget(percent=10)),
    )
    plan = plan_rebalance(snapshot(nodes, [settings]), at(60))
    assert len(plan.decisions) == 1
    assert plan.blocked[0].message.startswith("budget nodes: 1 of NodePool default allows 0 more")


def test_a_budget_naming_reasons_never_paces_rebalancing_wherever_it_is_listed() -> None:
    """``RebalanceRecommended`` cannot be named: a ``nodes: 0`` budget for Drifted holds no
    rebalance, before or after the reason-less 50 % one."""
    nodes = [n for i in range(4) for n in spot(f"n{i}")]
    drifted = Budget(nodes=0, percent=None, reasons=frozenset({DisruptionReason.DRIFTED}))
    for budgets in [(Budget(percent=50), drifted), (drifted, Budget(percent=50))]:
        settings = pool(rebalance_policy=RebalanceRecommendationPolicy.REPLACE, budgets=budgets)
        assert len(plan_rebalance(snapshot(nodes, [settings]), at(60)).decisions) == 2


def test_the_replacement_never_launches_into_the_warned_spot_pool() -> None:
    """EC2 warned about c4.large spot in zone-a: the replacement for the node's pods may take
    c4.large spot in zone-b (cheapest first) or anything else, never that pool again."""
    zones = ("zone-a", "zone-b")
    catalog = (
        instance_type("c4.large", 1.93, 3.0, 0.10, zones=zones, spot_price=0.03),
        instance_type("c4.xlarge", 3.92, 6.4, 0.199, zones=zones, spot_price=0.06),
    )
    node = candidate(
        "n1", "c4.large", pods("n1", 2), capacity_type="spot", rebalance_recommended_at=at(0)
    )
    plan = plan_rebalance(snapshot([node], [REPLACE], catalog=catalog), at(60))
    (decision,) = plan.decisions
    (replacement,) = decision.replacements
    offered = [(o.instance_type, o.zone, o.capacity_type) for o in replacement.offerings]
    assert ("c4.large", "zone-a", "spot") not in offered
    assert offered[0] == ("c4.large", "zone-b", "spot")
    assert ("c4.large", "zone-a", "on-demand") in offered
