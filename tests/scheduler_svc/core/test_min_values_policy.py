"""minValues under ``MinValuesPolicy.BEST_EFFORT`` (Karpenter's ``--min-values-policy``): a claim
whose pods the catalog cannot give enough distinct values is opened with minValues lowered to
what it offers, and says so; ``Strict`` (the default) keeps such pods pending."""

from __future__ import annotations

from scheduler_svc.core.model import MinValuesPolicy, NodePool, RelaxedMinValues
from scheduler_svc.core.requirements import Operator, Requirement
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
TYPES = [
    instance_type("a.large", 2, 8, 0.1, labels={FAMILY: "a"}),
    instance_type("b.large", 2, 8, 0.12, labels={FAMILY: "b"}),
    instance_type("a.2xlarge", 8, 32, 0.4, labels={FAMILY: "a"}),
]
POOL = NodePool("default", requirements=(Requirement(FAMILY, Operator.IN, ("a", "b"), 2),))


def test_strict_leaves_a_pod_only_one_family_holds_pending() -> None:
    result = run([pod("big", 6, 1)], TYPES, [POOL])
    assert result.new_claims == ()
    assert "minValues 2 for karpenter.k8s.aws/instance-family" in result.unschedulable[0].reason


def test_best_effort_opens_the_claim_with_minvalues_lowered_and_says_which() -> None:
    result = run([pod("big", 6, 1)], TYPES, [POOL], min_values_policy=MinValuesPolicy.BEST_EFFORT)
    assert result.unschedulable == ()
    (claim,) = result.new_claims
    assert claim.instance_type == "a.2xlarge"
    assert claim.min_values_relaxed == (RelaxedMinValues(FAMILY, 2, 1),)


def test_best_effort_relaxes_nothing_when_the_catalog_meets_minvalues() -> None:
    result = run(
        [pod("small", 1.5, 1)], TYPES, [POOL], min_values_policy=MinValuesPolicy.BEST_EFFORT
    )
    (claim,) = result.new_claims
    assert claim.min_values_relaxed == ()
    assert {o.instance_type.split(".")[0] for o in claim.offerings} == {"a", "b"}


def test_a_claim_opened_unrelaxed_keeps_its_minvalues_for_later_pods() -> None:
    """Relaxing happens only as a claim opens (Karpenter's new-NodeClaim path): two 1.5-cpu
    pods would leave only family a, so each gets its own claim keeping both families, as
    under Strict, rather than one claim relaxed to one family."""
    pods = [pod("one", 1.5, 1), pod("two", 1.5, 1)]
    result = run(pods, TYPES, [POOL], min_values_policy=MinValuesPolicy.BEST_EFFORT)
    assert result == run(pods, TYPES, [POOL])
    assert len(result.new_claims) == 2
    assert all(c.min_values_relaxed == () for c in result.new_claims)
