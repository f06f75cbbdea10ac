"""Behaviours Karpenter's scheduling suite asserts that daiku once got wrong (issue 19).

Each test names the upstream test or document it follows; the solver must place (or refuse) a
pod exactly where Karpenter and kube-scheduler would.
"""

from __future__ import annotations

from scheduler_svc.core import NodePool, Operator, Requirement

from .builders import instance_type, pod, run

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
