"""Node repair's rules beyond the basics: the order repairs go in, what counts against the
20 % rule (custom policies, conditions with no transition time), which nodes take a broken
node's pods, and the exact words of NodeRepairBlocked."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    NODE_REPAIR_BLOCKED,
    BlockedNode,
    NodeCondition,
    RepairPolicy,
    plan_repair,
    repair_status,
    unhealthy_condition,
)
from tests.scheduler_svc.core.disruption.builders import at, candidate, pods, pool, snapshot

READY = (NodeCondition("Ready", "True", at(0)),)
DISK = (RepairPolicy("DiskPressure", "True", 60.0),)
WHY = "a NodePool-wide problem is not fixed by replacing nodes"


def condition(status: str, since: float | None, kind: str = "Ready") -> tuple[NodeCondition, ...]:
    return (NodeCondition(kind, status, None if since is None else at(since)),)


def healthy(count: int) -> list:  # type: ignore[type-arg]
    return [candidate(f"ok{i}", "c4.2xlarge", conditions=READY) for i in range(count)]


def test_the_node_due_first_is_repaired_first() -> None:
    later = candidate("a", "c4.xlarge", conditions=condition("Unknown", 100))
    first = candidate("b", "c4.xlarge", conditions=condition("Unknown", 0))
    plan = plan_repair(snapshot([later, first, *healthy(8)]), at(2000))
    assert [d.nodes for d in plan.decisions] == [("b",), ("a",)]


def test_a_node_being_disrupted_does_not_stop_the_others_repair() -> None:
    going = candidate("b", "c4.xlarge", conditions=condition("Unknown", 0))
    due = candidate("a", "c4.xlarge", conditions=condition("Unknown", 100))
    plan = plan_repair(snapshot([going, due, *healthy(8)], disrupting=frozenset({"b"})), at(2000))
    assert [d.nodes for d in plan.decisions] == [("a",)]


def test_conditions_with_no_transition_time_count_against_the_twenty_percent() -> None:
    """Two nodes Ready Unknown with no lastTransitionTime are not repaired themselves, but they
    are unhealthy: with the due node, 3 of 5, and nothing is repaired."""
    due = candidate("b", "c4.xlarge", conditions=condition("Unknown", 0))
    unstamped = [
        candidate(f"x{i}", "c4.xlarge", conditions=condition("Unknown", None)) for i in range(2)
    ]
    state = snapshot([due, *unstamped, *healthy(2)])
    message = f"3 of 5 nodes of NodePool default are unhealthy (more than 20 %, 1 allowed): {WHY}"
    plan = plan_repair(state, at(2000))
    assert plan.decisions == ()
    assert plan.blocked == (BlockedNode("b", NODE_REPAIR_BLOCKED, message),)
    assert repair_status(state, due, at(2000)) == (
        f"repair: Ready Unknown for 33m20s (toleration 30m); {NODE_REPAIR_BLOCKED}: {message}"
    )
    assert repair_status(state, unstamped[0], at(2000)) == (
        "repair: Ready Unknown for 0s (toleration 30m); due in 30m"
    )


def test_custom_policies_decide_the_twenty_percent_and_the_status_line() -> None:
    due = candidate("s1", "c4.xlarge", conditions=condition("True", 0, "DiskPressure"))
    recent = candidate("s3", "c4.xlarge", conditions=condition("True", 1790, "DiskPressure"))
    state = snapshot([due, recent, *healthy(2)])
    message = f"2 of 4 nodes of NodePool default are unhealthy (more than 20 %, 1 allowed): {WHY}"
    assert plan_repair(state, at(1800), DISK).blocked == (
        BlockedNode("s1", NODE_REPAIR_BLOCKED, message),
    )
    assert repair_status(state, due, at(1800), DISK) == (
        f"repair: DiskPressure True for 30m (toleration 1m); {NODE_REPAIR_BLOCKED}: {message}"
    )


def test_a_node_unhealthy_under_a_custom_policy_takes_no_moved_pods() -> None:
    """The other NodePool's node has room but DiskPressure too: the broken node's pods get a
    replacement rather than moving onto it."""
    due = candidate(
        "s1", "c4.xlarge", pods("w", 3), conditions=condition("True", 0, "DiskPressure")
    )
    roomy = candidate(
        "s2", "c4.2xlarge", nodepool="other", conditions=condition("True", 1790, "DiskPressure")
    )
    plan = plan_repair(snapshot([due, roomy], pools=[pool(), pool("other")]), at(1800), DISK)
    (decision,) = plan.decisions
    assert (
        decision.message
        == "Unhealthy: DiskPressure True for 30m (toleration 1m); replaced by c4.large"
    )


def test_a_condition_stamped_ahead_of_the_clock_has_lasted_0s() -> None:
    node = candidate("f", "c4.xlarge", conditions=condition("Unknown", 30))
    found = unhealthy_condition(node, at(0))
    assert found is not None
    assert found.describe(at(0)) == "Ready Unknown for 0s (toleration 30m)"


def test_a_naive_now_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="timezone-aware") as raised:
        plan_repair(snapshot([]), at(0).replace(tzinfo=None))
    assert str(raised.value) == (
        "plan_repair: now must be timezone-aware (UTC), got a naive datetime"
    )


def test_the_twenty_percent_rule_holds_each_nodepool_s_repairs_apart() -> None:
    """A NodePool with 2 of 2 nodes broken repairs nothing; the next NodePool's due node is
    still repaired in the same pass (its own 1 of 5), and the decision is stamped now."""
    broken_pool = [
        candidate(f"gpu{i}", "c4.xlarge", nodepool="gpu", conditions=condition("False", 0))
        for i in range(2)
    ]
    mine = candidate("mine", "c4.xlarge", conditions=condition("False", 100))
    state = snapshot([*broken_pool, mine, *healthy(4)], pools=[pool(), pool("gpu")])
    plan = plan_repair(state, at(2000))
    assert [d.nodes for d in plan.decisions] == [("mine",)]
    assert plan.decisions[0].decided_at == at(2000)
    assert [b.node for b in plan.blocked] == ["gpu0", "gpu1"]


def test_of_two_conditions_due_together_the_first_policy_names_the_repair() -> None:
    """Ready and KernelReady went False at the same moment (both tolerated 30 min): the
    repair names Ready, the first of the default policies."""
    node = candidate(
        "n",
        "c4.xlarge",
        conditions=(
            NodeCondition("KernelReady", "False", at(0)),
            NodeCondition("Ready", "False", at(0)),
        ),
    )
    found = unhealthy_condition(node, at(1800))
    assert found is not None
    assert found.describe(at(1800)) == "Ready False for 30m (toleration 30m)"
