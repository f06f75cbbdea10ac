"""Which minValues a BestEffort claim reports lowered, when its NodePool sets minValues on two
keys and the catalog meets only one: a 6-cpu pod fits only a.2xlarge and a.3xlarge (family a,
two instance types); the pool asks for 2 families and 2 instance types."""

from __future__ import annotations

from scheduler_svc.core.model import MinValuesPolicy, NodePool, RelaxedMinValues
from scheduler_svc.core.requirements import LABEL_INSTANCE_TYPE, Operator, Requirement
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
TYPES = [
    instance_type("a.large", 2, 8, 0.1, labels={FAMILY: "a"}),
    instance_type("b.large", 2, 8, 0.12, labels={FAMILY: "b"}),
    instance_type("a.2xlarge", 8, 32, 0.4, labels={FAMILY: "a"}),
    instance_type("a.3xlarge", 8, 32, 0.5, labels={FAMILY: "a"}),
]
POOL = NodePool(
    "default",
    requirements=(
        Requirement(FAMILY, Operator.IN, ("a", "b"), 2),
        Requirement(LABEL_INSTANCE_TYPE, Operator.EXISTS, (), 2),
    ),
)


def test_only_the_key_lowered_is_reported() -> None:
    """Families are lowered 2 -> 1; the two instance types meet their minValues, so that key
    is not reported (a claim listing every key would say minValues were lowered where they
    were kept)."""
    result = run([pod("big", 6, 1)], TYPES, [POOL], min_values_policy=MinValuesPolicy.BEST_EFFORT)
    assert result.unschedulable == ()
    (claim,) = result.new_claims
    assert {o.instance_type for o in claim.offerings} == {"a.2xlarge", "a.3xlarge"}
    assert claim.min_values_relaxed == (RelaxedMinValues(FAMILY, 2, 1),)
