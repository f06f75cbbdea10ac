"""The reason a pod that no NodePool can take is left unschedulable with: none to launch,
every taint it does not tolerate, or each NodePool's own reason in weight order."""

from __future__ import annotations

from scheduler_svc.core import NodePool, Operator, Requirement, Taint, TaintEffect
from scheduler_svc.core.requirements import LABEL_INSTANCE_TYPE
from tests.scheduler_svc.core.builders import instance_type, pod, run

SMALL = instance_type("small", 2, 4, 0.10)


def test_without_a_nodepool_a_pod_waits_because_none_can_launch_a_node() -> None:
    """No NodePool at all: the pod is unschedulable, and says that no NodePool can launch a
    node for it."""
    result = run([pod("p", 1, 1)], [SMALL], pools=())

    assert result.new_claims == ()
    assert [(u.pod, u.reason) for u in result.unschedulable] == [
        ("default/p", "no NodePool can launch a node for it")
    ]


def test_min_values_on_a_label_no_instance_type_has_count_no_values() -> None:
    """A NodePool asks for 2 distinct values of a label no instance type carries: none are
    found, and the pod waits with the minValues it could not meet (0 fit)."""
    gen = "example.com/generation"
    pool = NodePool("default", requirements=(Requirement(gen, Operator.EXISTS, (), 2),))

    result = run([pod("p", 1, 1)], [SMALL], [pool])

    assert result.new_claims == ()
    assert [(u.pod, u.reason) for u in result.unschedulable] == [
        ("default/p", f"NodePool default: minValues 2 for {gen} (only 0 fit)")
    ]


def _tainted(name: str, key: str, weight: int = 0) -> NodePool:
    return NodePool(name, taints=(Taint(key, TaintEffect.NO_SCHEDULE, "x"),), weight=weight)


def test_a_pod_tolerating_no_nodepools_taint_names_every_taint_once() -> None:
    """Every NodePool is tainted and the pod tolerates none: one reason lists the taints,
    sorted and comma-separated."""
    pools = [_tainted("gpu", "gpu"), _tainted("batch", "batch"), _tainted("gpu-2", "gpu")]

    result = run([pod("p", 1, 1)], [SMALL], pools)

    assert [u.reason for u in result.unschedulable] == [
        "tolerates no NodePool's taint batch=x:NoSchedule, gpu=x:NoSchedule"
    ]


def test_reasons_per_nodepool_are_joined_in_weight_order() -> None:
    """A tainted NodePool (heavier) and one whose types are too small: the reason names the
    taint the pod does not tolerate there, then the other NodePool's reason."""
    small_only = NodePool(
        "small-only", requirements=(Requirement(LABEL_INSTANCE_TYPE, Operator.IN, ("small",)),)
    )
    pools = [_tainted("gpu", "gpu", weight=10), small_only]

    result = run([pod("p", 8, 1)], [SMALL, instance_type("large", 16, 64, 1.0)], pools)

    assert [u.reason for u in result.unschedulable] == [
        "does not tolerate NodePool gpu's taint gpu=x:NoSchedule; "
        "no instance type has 8 cpu allocatable under NodePool small-only"
    ]
