"""Node repair on the pure core: tolerations (exactly 30 min is due), the 20 % rule (exactly
20 % still repairs, rounding up as Karpenter), replacements only when the pods need them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler_svc.core.disruption import (
    DEFAULT_REPAIR_POLICIES,
    NODE_REPAIR_BLOCKED,
    Budget,
    DisruptionReason,
    NodeCondition,
    RepairPolicy,
    plan_repair,
    repair_status,
    unhealthy_condition,
)
from tests.scheduler_svc.core.disruption.builders import at, candidate, pods, pool, snapshot

READY = (NodeCondition("Ready", "True", at(0)),)


def broken(
    status: str = "Unknown", since: float = 0.0, kind: str = "Ready"
) -> tuple[NodeCondition, ...]:
    return (NodeCondition(kind, status, at(since)),)


def healthy_nodes(count: int, prefix: str = "ok") -> list:  # type: ignore[type-arg]
    return [candidate(f"{prefix}{i}", "c4.2xlarge", conditions=READY) for i in range(count)]


@pytest.mark.parametrize("status", ["False", "Unknown"])
@pytest.mark.parametrize(("elapsed", "repaired"), [(30 * 60 - 1, False), (30 * 60, True)])
def test_ready_false_or_unknown_is_repaired_at_exactly_thirty_minutes(
    status: str, elapsed: int, repaired: bool
) -> None:
    sick = candidate("sick", "c4.xlarge", conditions=broken(status))
    plan = plan_repair(snapshot([sick, *healthy_nodes(4)]), at(elapsed))
    assert [d.nodes for d in plan.decisions] == ([("sick",)] if repaired else [])
    assert not plan.blocked
    if repaired:
        [decision] = plan.decisions
        assert decision.reason is DisruptionReason.UNHEALTHY
        assert decision.message.startswith(f"Unhealthy: Ready {status} for 30m")
        assert "(toleration 30m)" in decision.message


def test_ready_true_and_pressure_conditions_are_not_repaired() -> None:
    node = candidate(
        "n", "c4.xlarge", conditions=(*READY, NodeCondition("MemoryPressure", "True", at(0)))
    )
    assert unhealthy_condition(node, at(10**6)) is None
    assert not plan_repair(snapshot([node]), at(10**6)).decisions


def test_each_condition_has_its_own_toleration_and_the_first_due_counts() -> None:
    """AcceleratedHardwareReady=False is tolerated 10 min; with Ready Unknown since earlier
    the one due first is the reason."""
    gpu = candidate("gpu", "c4.xlarge", conditions=broken("False", kind="AcceleratedHardwareReady"))
    assert not plan_repair(snapshot([gpu, *healthy_nodes(4)]), at(599)).decisions
    [decision] = plan_repair(snapshot([gpu, *healthy_nodes(4)]), at(600)).decisions
    assert "AcceleratedHardwareReady False for 10m" in decision.message
    both = candidate(
        "both",
        "c4.xlarge",
        conditions=(
            NodeCondition("Ready", "Unknown", at(0)),
            NodeCondition("KernelReady", "False", at(-1200)),
        ),
    )
    found = unhealthy_condition(both, at(0))
    assert found is not None
    assert found.policy.condition_type == "KernelReady"
    assert found.due == at(600)


def test_policies_are_the_karpenter_aws_ones() -> None:
    assert {
        (p.condition_type, p.status, p.toleration_seconds) for p in DEFAULT_REPAIR_POLICIES
    } == {
        ("Ready", "False", 1800.0),
        ("Ready", "Unknown", 1800.0),
        ("AcceleratedHardwareReady", "False", 600.0),
        ("StorageReady", "False", 1800.0),
        ("NetworkingReady", "False", 1800.0),
        ("KernelReady", "False", 1800.0),
        ("ContainerRuntimeReady", "False", 1800.0),
    }


def test_a_condition_without_a_transition_time_is_never_repaired_on_a_guess() -> None:
    node = candidate("n", "c4.xlarge", conditions=(NodeCondition("Ready", "Unknown", None),))
    assert not plan_repair(snapshot([node]), at(10**6)).decisions


@pytest.mark.parametrize(
    ("sick_count", "total", "repaired"),
    [
        (1, 5, True),  # exactly 20 %
        (2, 10, True),  # exactly 20 %: ceil(2.0) = 2 allowed
        (3, 10, False),  # 30 %
        (2, 5, False),  # 40 %
        (1, 3, True),  # 33 %, but 20 % of 3 rounds up to 1 node (as Karpenter)
        (2, 6, True),  # 33 %: ceil(1.2) = 2 allowed
        (3, 6, False),
    ],
)
def test_no_repair_when_more_than_twenty_percent_of_the_nodepool_is_unhealthy(
    sick_count: int, total: int, repaired: bool
) -> None:
    # Only the first is past its toleration; the others turned unhealthy a minute ago and
    # still count against the 20 %.
    sick = [candidate("sick0", "c4.xlarge", conditions=broken(since=0))]
    sick += [
        candidate(f"sick{i}", "c4.xlarge", conditions=broken(since=1800 - 60))
        for i in range(1, sick_count)
    ]
    plan = plan_repair(snapshot([*sick, *healthy_nodes(total - sick_count)]), at(1800))
    assert [d.nodes for d in plan.decisions] == ([("sick0",)] if repaired else [])
    if not repaired:
        [held] = plan.blocked
        assert held.node == "sick0"
        assert held.event_reason == NODE_REPAIR_BLOCKED
        assert f"{sick_count} of {total} nodes of NodePool default are unhealthy" in held.message


def test_the_twenty_percent_rule_is_per_nodepool() -> None:
    """A broken other NodePool does not hold this one's repair."""
    mine = candidate("sick", "c4.xlarge", conditions=broken())
    others = [
        candidate(f"gpu{i}", "c4.xlarge", nodepool="gpu", conditions=broken(since=1700))
        for i in range(3)
    ]
    plan = plan_repair(
        snapshot([mine, *healthy_nodes(4), *others], pools=[pool(), pool("gpu")]), at(1800)
    )
    assert [d.nodes for d in plan.decisions] == [("sick",)]


def test_a_replacement_is_planned_only_when_the_pods_need_one() -> None:
    """The broken node's pods fit on a healthy node with room: no launch; without room, one
    replacement sized for them; another unhealthy node takes no pods."""
    sick = candidate("sick", "c4.xlarge", pods("web", 3), conditions=broken())
    roomy = candidate("roomy", "c4.2xlarge", conditions=READY)
    [decision] = plan_repair(snapshot([sick, roomy, *healthy_nodes(3)]), at(1800)).decisions
    assert decision.replacements == ()
    assert "its pods fit on other nodes" in decision.message

    full = [candidate(f"full{i}", "c4.large", pods(f"f{i}", 3), conditions=READY) for i in range(4)]
    other_sick = candidate("sick2", "c4.2xlarge", conditions=broken(since=1700))
    plan = plan_repair(snapshot([sick, other_sick, *full, *healthy_nodes(0)]), at(1800))
    [decision] = plan.decisions
    assert len(decision.replacements) == 1
    assert sorted(decision.replacements[0].pods) == [
        "default/web-0",
        "default/web-1",
        "default/web-2",
    ]


def test_nodes_being_disrupted_are_left_alone() -> None:
    sick = candidate("sick", "c4.xlarge", conditions=broken())
    plan = plan_repair(
        snapshot([sick, *healthy_nodes(4)], disrupting=frozenset({"sick"})), at(1800)
    )
    assert not plan.decisions
    assert not plan.blocked


def test_repair_ignores_budgets_and_do_not_disrupt() -> None:
    """Forceful as Karpenter's: a zero budget or a do-not-disrupt pod does not hold it."""
    sick = candidate("sick", "c4.xlarge", pods("web", 1, do_not_disrupt=True), conditions=broken())
    zero = pool(budgets=(Budget(nodes=0, percent=None),))
    plan = plan_repair(snapshot([sick, *healthy_nodes(4)], pools=[zero]), at(1800))
    assert [d.nodes for d in plan.decisions] == [("sick",)]


def test_custom_policies_replace_the_defaults() -> None:
    node = candidate("n", "c4.xlarge", conditions=broken("True", kind="DiskPressure"))
    policies = (RepairPolicy("DiskPressure", "True", 60.0),)
    assert [d.nodes for d in plan_repair(snapshot([node]), at(60), policies).decisions] == [("n",)]


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_repair(snapshot([]), at(0).replace(tzinfo=None))


def test_repair_status_says_how_long_is_left_and_what_holds_it() -> None:
    sick = candidate("sick", "c4.xlarge", conditions=broken())
    assert repair_status(snapshot([sick]), healthy_nodes(1)[0], at(0)).startswith("repair: healthy")
    line = repair_status(snapshot([sick, *healthy_nodes(4)]), sick, at(600))
    assert line == "repair: Ready Unknown for 10m (toleration 30m); due in 20m"
    due = repair_status(snapshot([sick, *healthy_nodes(4)]), sick, at(1800) + timedelta(seconds=5))
    assert "due now (replaced first when the scheduler runs with --node-repair" in due
    held = repair_status(snapshot([sick, *healthy_nodes(1)]), sick, at(1800))
    assert "NodeRepairBlocked: 1 of 2 nodes" not in held  # 1 of 2: ceil(0.4) = 1 allowed
    two_sick = [sick, candidate("s2", "c4.xlarge", conditions=broken())]
    held = repair_status(snapshot([*two_sick, *healthy_nodes(3)]), sick, at(1800))
    assert "NodeRepairBlocked: 2 of 5 nodes of NodePool default are unhealthy" in held
