"""NodePool limits on one resource at a time, and the reason a claim gives when minValues
leaves no type for even one pod."""

from __future__ import annotations

from scheduler_svc.core import NodePool, NodePoolLimits, Operator, Requirement
from scheduler_svc.core.model import MinValuesPolicy
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run

INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def test_a_memory_limit_counts_every_claim_launched_before() -> None:
    """A 16 GiB memory limit and 8 GiB nodes: two nodes fit under it, the third pod (each
    needs a node of its own) waits with the limit as its reason."""
    limited = NodePool("default", limits=NodePoolLimits(memory_bytes=16 * GIB))
    pods = [pod(f"p{i}", 1, 6) for i in range(3)]

    result = run(pods, [instance_type("m.large", 2, 8, 0.10)], (limited,))

    assert len(result.new_claims) == 2
    assert len(result.unschedulable) == 1
    assert "limit" in result.unschedulable[0].reason


def test_a_pod_no_type_set_can_hold_under_min_values_names_the_shortfall_for_one_copy() -> None:
    """minValues 3 instance types, and only two types hold the pod at all (one holds two
    copies): under Strict the pod waits, and the reason counts the types holding one copy."""
    types = [
        instance_type("small", 1, 2, 0.05),
        instance_type("medium", 4, 8, 0.10),
        instance_type("large", 8, 16, 0.20),
    ]
    three_types = NodePool(
        "default", requirements=(Requirement(INSTANCE_TYPE, Operator.EXISTS, (), 3),)
    )

    result = run([pod("p", 4, 4)], types, (three_types,), min_values_policy=MinValuesPolicy.STRICT)

    assert [u.pod for u in result.unschedulable] == ["default/p"]
    assert f"minValues 3 for {INSTANCE_TYPE} (only 2 fit)" in result.unschedulable[0].reason
