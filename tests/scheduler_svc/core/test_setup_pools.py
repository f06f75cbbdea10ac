"""NodePools as the solver sees them: every DaemonSet that will run on a new node adds its
requests to the room the node must have, whatever DaemonSets before it in the list are
skipped; nodes a NodePool already runs count against its limits, all of them; and pods equal
in cpu and memory are placed in a set order (more topology keys first, then by name)."""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Pod,
    PodAffinityTerm,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
)
from scheduler_svc.core.requirements import LABEL_HOSTNAME
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run

# 3 cpu (cheap) or 4 cpu: a 1.5-cpu pod fits 3 cpu with one 1-cpu DaemonSet, not with two.
THREE = instance_type("three", 3, 16, 0.10)
FOUR = instance_type("four", 4, 16, 0.20)
GPU_POOL_ONLY = {"karpenter.sh/nodepool": "gpu"}


def _daemon(name: str, **kwargs: object) -> Pod:
    return pod(name, 1, 0.5, **kwargs)


def test_every_daemonset_on_the_nodepool_adds_its_requests() -> None:
    """Two DaemonSets of 1 cpu each run on every new node: 1.5 + 1 + 1 = 3.5 cpu, more than
    the cheap 3-cpu type has, so the claim takes the 4-cpu type (one DaemonSet alone, 2.5
    cpu, would fit 3)."""
    result = run([pod("app", 1.5, 1)], [THREE, FOUR], daemonsets=(_daemon("a"), _daemon("b")))

    assert [c.instance_type for c in result.new_claims] == ["four"]


def test_a_daemonset_not_tolerating_the_taint_does_not_hide_the_ones_after_it() -> None:
    """The NodePool is tainted; the first DaemonSet does not tolerate the taint (it never
    runs there), the next two do. Those two count, 1.5 + 1 + 1 = 3.5 cpu: the 4-cpu type."""
    taint = Taint("dedicated", TaintEffect.NO_SCHEDULE, "batch")
    tolerate = (Toleration("dedicated", "Equal", "batch"),)
    pool = NodePool("batch", taints=(taint,))

    result = run(
        [pod("app", 1.5, 1, tolerations=tolerate)],
        [THREE, FOUR],
        [pool],
        daemonsets=(
            _daemon("intolerant"),
            _daemon("a", tolerations=tolerate),
            _daemon("b", tolerations=tolerate),
        ),
    )

    assert [c.instance_type for c in result.new_claims] == ["four"]


def test_a_daemonset_selecting_other_nodes_does_not_hide_the_ones_after_it() -> None:
    """The first DaemonSet selects the nodes of another NodePool ("gpu"): it never runs on the
    default NodePool's new node. The next two do: 1.5 + 1 + 1 = 3.5 cpu, the 4-cpu type."""
    result = run(
        [pod("app", 1.5, 1)],
        [THREE, FOUR],
        daemonsets=(_daemon("gpu-only", node_selector=GPU_POOL_ONLY), _daemon("a"), _daemon("b")),
    )

    assert [c.instance_type for c in result.new_claims] == ["four"]


def test_every_node_a_nodepool_runs_counts_against_its_cpu_limit() -> None:
    """The NodePool may have 10 cpu and already runs two full 4-cpu nodes: 8 cpu used. A new
    4-cpu node would make 12, over the limit, so the pending pod waits naming the limit (one
    node counted alone, 4 + 4 = 8, would have let it launch)."""
    limited = NodePool("default", limits=NodePoolLimits(cpu_millis=10_000))
    four_cpu = Resources(cpu_millis=4000, memory_bytes=16 * GIB, pods=110)
    nodes = tuple(
        Node(
            f"node-{i}",
            labels={"karpenter.sh/nodepool": "default"},
            allocatable=four_cpu,
            capacity=four_cpu,
            pods=(pod(f"running-{i}", 4, 1),),
        )
        for i in (1, 2)
    )

    result = run([pod("app", 3, 1)], [FOUR], [limited], nodes=nodes)

    assert result.new_claims == ()
    assert [(u.pod, u.reason) for u in result.unschedulable] == [
        ("default/app", "NodePool default limit cpu=10 reached")
    ]


def _room_for_one() -> Node:
    """An existing node with room for one more 1-cpu pod (1 of its 2 cpu taken)."""
    two_cpu = Resources(cpu_millis=2000, memory_bytes=8 * GIB, pods=110)
    return Node(
        "existing",
        labels={"karpenter.sh/nodepool": "default", "kubernetes.io/arch": "amd64"},
        allocatable=two_cpu,
        pods=(pod("running", 1, 1),),
    )


def test_a_pod_with_topology_constraints_gets_the_existing_room_before_a_plain_one() -> None:
    """Two pods of the same size (1 cpu, 1 GiB): "a" is plain, "b" keeps apart from its own
    kind per node (anti-affinity on hostname). The constrained one is placed first (it has
    fewer places to go), so "b" takes the existing node's last cpu although "a" comes first by
    name, and "a" goes on a new claim."""
    apart = PodAffinityTerm(LABEL_HOSTNAME, LabelSelector.of({"app": "b"}))
    plain = pod("a", 1, 1)
    constrained = pod("b", 1, 1, labels={"app": "b"}, pod_anti_affinity=(apart,))

    result = run([plain, constrained], [THREE], nodes=(_room_for_one(),))

    assert [(e.node, e.pods) for e in result.existing_placements] == [("existing", ("default/b",))]
    assert [c.pods for c in result.new_claims] == [("default/a",)]


def test_pods_equal_in_cpu_and_memory_take_the_existing_room_by_name() -> None:
    """Two pods of 1 cpu and 1 GiB, "a" and "b"; "b"'s container also asks for a pod slot
    (so it takes 2 of the node's 110). Order is by cpu, then memory, then name: "a" takes the
    existing node's last cpu, and "b" goes on a new claim."""
    a = pod("a", 1, 1)
    b = Pod("b", containers=(Resources(cpu_millis=1000, memory_bytes=GIB, pods=1),))

    result = run([b, a], [THREE], nodes=(_room_for_one(),))

    assert [(e.node, e.pods) for e in result.existing_placements] == [("existing", ("default/a",))]
    assert [c.pods for c in result.new_claims] == [("default/b",)]
