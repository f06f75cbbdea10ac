"""The reason a pending pod gets when no NodePool can launch a node for it
(``InstanceFit._fit_pool_uncached``), as ``daiku plan --explain`` and the pod's Event show it:
the NodePool's name in place of "the NodePool", and the DaemonSet overhead named when it is
what leaves a pod without room. t is a 4-cpu, 16 GiB type."""

from __future__ import annotations

from scheduler_svc.core import NodePool, Operator, Pod, Requirement
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, run

T = instance_type("t", 4, 16, 0.10)


def test_a_conflicting_node_selector_names_the_nodepool() -> None:
    """The pod selects zone-a; NodePool zone-b-only launches only in zone-b."""
    pool = NodePool(
        "zone-b-only", requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-b",)),)
    )
    result = run([pod("p", 1, 1, node_selector={LABEL_ZONE: "zone-a"})], [T], [pool])
    [refused] = result.unschedulable
    assert refused.reason == (
        "NodePool zone-b-only: pod requires topology.kubernetes.io/zone In [zone-a] but "
        "zone-b-only has topology.kubernetes.io/zone In [zone-b]"
    )


def test_daemonset_overhead_is_named_when_it_leaves_no_room() -> None:
    """A 3-cpu pod fits t's 4 CPUs alone, not beside a 1.5-cpu DaemonSet: the reason shows
    the pod's own 3 CPUs and says the overhead counted."""
    daemon = Pod("agent", containers=pod("x", 1.5, 0).containers)
    result = run([pod("p", 3, 1)], [T], daemonsets=(daemon,))
    [refused] = result.unschedulable
    assert refused.reason == (
        "no instance type has 3 cpu allocatable (with DaemonSet overhead) under NodePool default"
    )


def test_a_pod_too_big_without_overhead_says_no_more() -> None:
    """A 5-cpu pod fits no type; no DaemonSet runs, so no overhead is named."""
    [refused] = run([pod("p", 5, 1)], [T]).unschedulable
    assert refused.reason == "no instance type has 5 cpu allocatable under NodePool default"
