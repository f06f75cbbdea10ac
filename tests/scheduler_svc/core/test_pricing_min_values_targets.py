"""Which targets keep a NodePool's minValues when the pool has limits
(``Pricing._targets_meeting_min_values``): a claim keeps only the types no bigger than its
target in the limited resources, so a target meets minValues when those kept types, among
the ones holding the head pod, span enough families. The pool here limits cpu and asks for
two instance families. The integer program's second opinion is off (``max_pods=0``) so the
greedy claims are what is seen."""

from __future__ import annotations

from scheduler_svc.core import (
    InstanceType,
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    Requirement,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.integer_packing import PackingSettings
from tests.scheduler_svc.core.builders import instance_type, pod

FAMILY = "karpenter.k8s.aws/instance-family"
POOL = NodePool(
    "default",
    requirements=(Requirement(FAMILY, Operator.IN, ("a", "b", "c"), 2),),
    limits=NodePoolLimits(cpu_millis=100_000),
)


def _solve(pods: list[Pod], types: list[InstanceType]) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (POOL,), tuple(types))
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert result.unschedulable == ()
    return result


def test_types_of_one_capacity_all_meet_minvalues_together() -> None:
    """a.large, b.large and c.large all have 2 cpu, so a claim targeting any of them keeps
    all three. a.large (cheapest) stays the target: its claim holds the eight 250m/1 GiB
    pods (8 GiB), instead of being swapped for c.large's 2 GiB and four claims."""
    types = [
        instance_type("a.large", 2, 8, 0.10, labels={FAMILY: "a"}),
        instance_type("b.large", 2, 8, 0.12, labels={FAMILY: "b"}),
        instance_type("c.large", 2, 2, 0.15, labels={FAMILY: "c"}),
    ]
    result = _solve([pod(f"p-{i}", 0.25, 1) for i in range(8)], types)
    [claim] = result.new_claims
    assert len(claim.pods) == 8
    assert claim.instance_type == "a.large"
    assert {o.instance_type for o in claim.offerings} == {"a.large", "b.large"}


def test_each_head_pod_gets_the_targets_meeting_minvalues_for_it() -> None:
    """The 1.5-cpu pod fits a.large and b.large (two families, both 2 cpu): a.large meets
    minValues for it. The 6 GiB pod does not fit b.large: a claim targeting a.large would
    keep a.large alone, so its claim targets c.xlarge, keeps a.large and c.xlarge, and
    still buys a.large; the pod is placed, not refused for minValues."""
    types = [
        instance_type("a.large", 2, 8, 0.10, labels={FAMILY: "a"}),
        instance_type("b.large", 2, 4, 0.11, labels={FAMILY: "b"}),
        instance_type("c.xlarge", 4, 16, 0.40, labels={FAMILY: "c"}),
    ]
    result = _solve([pod("first", 1.5, 1), pod("second", 1, 6)], types)
    offered = {c.pods[0]: {o.instance_type for o in c.offerings} for c in result.new_claims}
    assert offered == {
        "default/first": {"a.large", "b.large"},
        "default/second": {"a.large", "c.xlarge"},
    }
    assert [c.instance_type for c in result.new_claims] == ["a.large", "a.large"]
