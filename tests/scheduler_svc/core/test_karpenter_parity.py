"""Behaviours Karpenter's scheduling suite asserts that daiku once got wrong (issue 19).

Each test names the upstream test or document it follows; the solver must place (or refuse) a
pod exactly where Karpenter and kube-scheduler would.
"""

from __future__ import annotations

from scheduler_svc.core import InstanceType, NodePool, Operator, Requirement

from .builders import instance_type, pod, run, zone_of

ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"


def test_a_required_instance_label_no_type_carries_rules_every_type_out() -> None:
    """A pod selecting karpenter.k8s.aws/instance-accelerator-name gets no node from a catalog
    where no type has an accelerator (Karpenter: every type's requirement on a well-known AWS
    label it lacks is DoesNotExist — aws/karpenter-provider-aws
    pkg/providers/instancetype/types.go computeRequirements)."""
    types = [instance_type("t3.nano", 2, 0.5, 0.005), instance_type("m5.large", 2, 8, 0.096)]
    wants_inferentia = pod("inference", 0.1, 0.1, node_selector={ACCELERATOR_NAME: "inferentia"})

    result = run([wants_inferentia], types)

    assert result.new_claims == ()
    assert [u.pod for u in result.unschedulable] == ["default/inference"]


def test_an_instance_label_no_type_carries_still_admits_does_not_exist() -> None:
    """NotIn / DoesNotExist on an instance label every type lacks keeps every type (a missing
    label satisfies them, as in Kubernetes node affinity)."""
    types = [instance_type("m5.large", 2, 8, 0.096)]
    avoids_accelerators = pod(
        "plain",
        0.1,
        0.1,
        required_node_affinity=((Requirement(ACCELERATOR_NAME, Operator.DOES_NOT_EXIST),),),
    )

    result = run([avoids_accelerators], types, (NodePool("default"),))

    assert [c.instance_type for c in result.new_claims] == ["m5.large"]


def _arch_types() -> list[InstanceType]:
    return [
        instance_type("m5.large", 2, 8, 0.096, labels={"kubernetes.io/arch": "amd64"}),
        instance_type("m6g.large", 2, 8, 0.077 * 2, labels={"kubernetes.io/arch": "arm64"}),
    ]


def test_deprecated_arch_selector_selects_the_current_arch_label() -> None:
    """nodeSelector beta.kubernetes.io/arch=arm64 gets an arm64 node (kubernetes-sigs/karpenter
    pkg/scheduling/requirements_test.go "should normalize aliased labels"; NormalizedLabels in
    pkg/apis/v1/labels.go translates pod requirements)."""
    arm = pod("arm", 0.5, 1, node_selector={"beta.kubernetes.io/arch": "arm64"})

    result = run([arm], _arch_types())

    assert [c.instance_type for c in result.new_claims] == ["m6g.large"]


def test_deprecated_zone_keys_in_node_affinity_pin_the_zone() -> None:
    """failure-domain.beta.kubernetes.io/zone and topology.ebs.csi.aws.com/zone (the AWS
    provider adds the EBS CSI key to NormalizedLabels, pkg/operator/operator.go) in required node
    affinity pin the claim to that zone, as topology.kubernetes.io/zone would."""
    types = [instance_type("m5.large", 2, 8, 0.096)]
    beta = pod(
        "beta",
        0.5,
        1,
        required_node_affinity=(
            (Requirement("failure-domain.beta.kubernetes.io/zone", Operator.IN, ("zone-b",)),),
        ),
    )
    ebs = pod(
        "ebs",
        0.5,
        1,
        required_node_affinity=(
            (Requirement("topology.ebs.csi.aws.com/zone", Operator.IN, ("zone-c",)),),
        ),
    )

    result = run([beta, ebs], types)

    assert result.unschedulable == ()
    assert zone_of(result, "default/beta") == "zone-b"
    assert zone_of(result, "default/ebs") == "zone-c"


def test_an_alias_and_its_current_label_disagreeing_match_no_node() -> None:
    """A selector naming arm64 under the old key and amd64 under the new one matches no node:
    after normalisation both are requirements on kubernetes.io/arch, and they conflict."""
    torn = pod(
        "torn",
        0.5,
        1,
        node_selector={"beta.kubernetes.io/arch": "arm64", "kubernetes.io/arch": "amd64"},
    )

    result = run([torn], _arch_types())

    assert [u.pod for u in result.unschedulable] == ["default/torn"]


def test_deprecated_instance_type_key_in_a_nodepool_requirement() -> None:
    """A NodePool requiring beta.kubernetes.io/instance-type launches only that type (Karpenter
    normalises NodePool requirements through the same NewRequirement)."""
    pool = NodePool(
        "default",
        requirements=(
            Requirement("beta.kubernetes.io/instance-type", Operator.IN, ("m6g.large",)),
        ),
    )

    result = run([pod("p", 0.5, 1)], _arch_types(), (pool,))

    assert [c.instance_type for c in result.new_claims] == ["m6g.large"]
