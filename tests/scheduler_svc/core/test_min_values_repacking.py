"""The integer program's second opinion (decision 0002) in NodePools with minValues: the
greedy claims are repacked when a cheaper packing keeps every claim's minValues, and only then."""

from __future__ import annotations

import pytest

from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import (
    InstanceType,
    MinValuesPolicy,
    NodePool,
    NodePoolLimits,
    SchedulingInput,
    SchedulingResult,
)
from scheduler_svc.core.requirements import Operator, Requirement
from scheduler_svc.core.solver import solve
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
POOL = NodePool("default", requirements=(Requirement(FAMILY, Operator.IN, ("a", "b"), 2),))


def families(result: SchedulingResult, claim: int) -> set[str]:
    """The families among a claim's offerings: the types it keeps."""
    return {o.instance_type.split(".")[0] for o in result.new_claims[claim].offerings}


def cost(result: SchedulingResult) -> float:
    return sum(c.offerings[0].price_per_hour for c in result.new_claims)


# Per cpu the large types are cheapest, so the greedy pass buys them, but a pod of 1.2 cpu
# leaves most of one idle: four one-pod a.large, $0.40/h. An xlarge holds three pods.
TYPES = [
    instance_type("a.large", 2, 8, 0.10, labels={FAMILY: "a"}),
    instance_type("b.large", 2, 8, 0.11, labels={FAMILY: "b"}),
    instance_type("a.xlarge", 4, 16, 0.25, labels={FAMILY: "a"}),
    instance_type("b.xlarge", 4, 16, 0.26, labels={FAMILY: "b"}),
]
PODS = [pod(f"web-{i}", 1.2, 1) for i in range(4)]
GREEDY_COST = 4 * 0.10


def greedy_only(types: list[InstanceType], policy: MinValuesPolicy) -> SchedulingResult:
    problem = SchedulingInput(tuple(PODS), (POOL,), tuple(types), min_values_policy=policy)
    return solve(problem, packing=PackingSettings(max_pods=0))


def test_a_minvalues_pool_gets_the_cheaper_packing_and_each_claim_keeps_two_families() -> None:
    assert cost(greedy_only(TYPES, MinValuesPolicy.STRICT)) == pytest.approx(GREEDY_COST)
    result = run(PODS, TYPES, [POOL])
    assert result.unschedulable == ()
    # one xlarge with three pods and one large: $0.35/h
    assert cost(result) == pytest.approx(0.35)
    assert sorted(len(c.pods) for c in result.new_claims) == [1, 3]
    for claim in range(len(result.new_claims)):
        assert families(result, claim) == {"a", "b"}
        assert result.new_claims[claim].min_values_relaxed == ()


def test_a_cheaper_packing_that_keeps_one_family_is_refused() -> None:
    """Without b.xlarge, the three-pod node could only be an a type: its claim would keep
    one family, so the greedy claims stay."""
    types = [t for t in TYPES if t.name != "b.xlarge"]
    result = run(PODS, types, [POOL])
    assert result == greedy_only(types, MinValuesPolicy.STRICT)
    assert cost(result) == pytest.approx(GREEDY_COST)
    assert cost(run(PODS, types)) < GREEDY_COST  # without minValues it is repacked


def test_best_effort_repacks_without_relaxing_more_than_the_greedy_claims() -> None:
    for types in (TYPES, [t for t in TYPES if t.name != "b.xlarge"]):
        best_effort = run(PODS, types, [POOL], min_values_policy=MinValuesPolicy.BEST_EFFORT)
        assert best_effort == run(PODS, types, [POOL])


def test_in_a_pool_with_limits_the_check_counts_the_types_the_closed_claim_keeps() -> None:
    """The three-pod node targets a.xlarge; b.2xlarge also holds it, so the claim keeps two
    families, unless the pool has limits: then a claim keeps no type bigger than its target
    (its reservation), one family is left, and the greedy claims stay."""
    types = [
        *(t for t in TYPES if t.name != "b.xlarge"),
        instance_type("b.2xlarge", 8, 32, 0.50, labels={FAMILY: "b"}),
    ]
    unlimited = run(PODS, types, [POOL])
    assert cost(unlimited) == pytest.approx(0.35)
    limited_pool = NodePool(
        "default", requirements=POOL.requirements, limits=NodePoolLimits(cpu_millis=100_000)
    )
    limited = run(PODS, types, [limited_pool])
    assert cost(limited) == pytest.approx(GREEDY_COST)
    for claim in range(len(limited.new_claims)):
        assert families(limited, claim) == {"a", "b"}
