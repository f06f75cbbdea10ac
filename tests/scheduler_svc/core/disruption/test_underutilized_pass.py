"""One Underutilized pass over several candidates: the budget's block is a DisruptionBlocked
Event, a merge as large as the budget is an ordinary one (not waves), the extra lengths the
binary search skipped are scanned only as far as allowed, a node beyond the budget hears only
its own refusal, and a node a consolidation in waves deferred is tried first."""

from __future__ import annotations

from scheduler_svc.core.disruption import (
    BlockedNode,
    Budget,
    CandidatePod,
    ConsolidationOptions,
    DisruptionReason,
    plan_disruption,
)
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    one_cpu_nodes,
    pods,
    snapshot,
)


def at_most(nodes: int) -> Budget:
    """A budget of ``nodes`` nodes at a time, for every reason."""
    return Budget(nodes=nodes, percent=None)


def test_a_node_past_the_budget_is_blocked_as_disruption_blocked() -> None:
    """A budget of one already spent on a node being disrupted: the others are DisruptionBlocked
    with the budget named."""
    state = snapshot(
        one_cpu_nodes(2),
        [consolidating(budgets=(at_most(1),))],
        disrupting=frozenset({"n0"}),
    )
    plan = plan_disruption(state, at(600))
    assert plan.blocked == (
        BlockedNode(
            "n1",
            "DisruptionBlocked",
            "budget nodes: 1 of NodePool default allows no more Underutilized disruptions now",
        ),
    )


def test_a_merge_as_large_as_the_budget_is_an_ordinary_merge() -> None:
    """Three c4.large -> one c4.xlarge under a budget of three: all three go now, no wave."""
    state = snapshot(one_cpu_nodes(3), [consolidating(budgets=(at_most(3),))])
    (decision,) = plan_disruption(state, at(600)).decisions
    assert (decision.nodes, decision.deferred) == (("n0", "n1", "n2"), ())


def test_no_extra_lengths_are_scanned_when_none_are_allowed() -> None:
    """The binary search over 2..3 tries 2 only (it does not pay); the merge of all three is a
    skipped length, found by the scan, and not found with ``max_multi_node_scan`` 0."""
    state = snapshot(one_cpu_nodes(3), [consolidating()])
    assert plan_disruption(state, at(600)).decisions
    no_scan = ConsolidationOptions(max_multi_node_scan=0)
    assert plan_disruption(state, at(600), no_scan).decisions == ()


def test_a_node_beyond_the_budget_hears_only_its_own_refusal() -> None:
    """Budget two, three nodes, too young for waves: the first two were tried as a merge and
    their messages say so; the third was not part of it and its message does not."""
    plan = plan_disruption(
        snapshot(one_cpu_nodes(3), [consolidating(budgets=(at_most(2),))]), at(100)
    )
    assert plan.decisions == ()
    alone = "would cost more: no replacement saves 10% and $0.01/h on $0.1000/h"
    messages = blocked_messages(plan)
    assert messages["n2"] == alone
    assert messages["n0"].startswith(f"{alone}; multi-node: merging the first 2 candidates")


def test_a_deferred_node_goes_before_a_node_with_fewer_pods() -> None:
    """big (two pods) was deferred by a merge in waves and r holds room for it; small has one
    pod. Either could go onto r, the budget lets one: big goes, its replacement waiting for
    it."""
    big = candidate("big", "c4.large", pods("b", 2))
    small = candidate("small", "c4.large", (CandidatePod(app_pod("s-0")),))
    room = candidate(
        "r",
        "c4.xlarge",
        created=0,
        room_held_for=frozenset({"default-big"}),
        room_held_until=at(900),
    )
    state = snapshot([small, big, room], [consolidating(budgets=(at_most(1),))])
    (decision,) = plan_disruption(state, at(600)).decisions
    assert (decision.reason, decision.nodes) == (DisruptionReason.UNDERUTILIZED, ("big",))
