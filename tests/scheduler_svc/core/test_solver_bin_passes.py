"""Which bins a solve round fills before it opens new NodeClaims, and how often it passes over
them: every existing node with room (a full one does not end the pass), the claims earlier
rounds opened (so a pod placed after its preference is relaxed joins them), and the bins again
for zone-spread pods while a pass places any."""

from __future__ import annotations

from scheduler_svc.core import (
    HostPort,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from tests.scheduler_svc.core.builders import GIB, ZONES, instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"
SMALL = instance_type("small", 2, 4, 0.10)
LARGE = instance_type("large", 8, 32, 0.50)
# A preference no instance type meets: the pod waits for the round that relaxes it.
DEDICATED = Taint("dedicated", TaintEffect.NO_SCHEDULE, "x")
UNMEETABLE = (PreferredNodeAffinityTerm(10, (Requirement(ZONE, Operator.IN, ("mars-1",)),)),)


def test_a_full_existing_node_does_not_end_the_pass_over_the_others() -> None:
    """The first existing node (by name) has no cpu left; the pod still lands on the second,
    which has room, and no claim is launched."""
    busy = pod("busy", 2, 1)
    full = Node("a-full", {}, allocatable=Resources(2000, 4 * GIB, 110), pods=(busy,))
    roomy = Node("b-roomy", {}, allocatable=Resources(2000, 4 * GIB, 110))

    result = run([pod("p", 1, 1)], [SMALL], nodes=(full, roomy))

    assert result.new_claims == ()
    assert [(e.node, e.pods) for e in result.existing_placements] == [("b-roomy", ("default/p",))]


def _first_and_relaxed() -> list[Pod]:
    # Host ports keep the integer program's repacking off these claims: what the rounds
    # chose is the plan.
    first = pod("first", 1, 1, host_ports=(HostPort(8080),))
    later = pod("later", 1, 1, host_ports=(HostPort(9090),), preferred_node_affinity=UNMEETABLE)
    return [first, later]


def test_a_relaxed_pod_joins_the_claim_an_earlier_round_opened() -> None:
    """A pod whose preference no type meets is placed in the round that drops it: onto the
    small claim the first round opened for the other pod (room for both), not a second node."""
    result = run(_first_and_relaxed(), [SMALL])

    assert result.unschedulable == ()
    assert [sorted(c.pods) for c in result.new_claims] == [["default/first", "default/later"]]
    assert result.new_claims[0].instance_type == "small"


def test_a_relaxed_pod_joins_an_earlier_claim_of_a_limited_nodepool() -> None:
    """The same in a NodePool limited to one node: the relaxed pod shares the first round's
    claim (within the limit) instead of waiting on "limit nodes=1 reached"."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=1))

    result = run(_first_and_relaxed(), [SMALL], [pool])

    assert result.unschedulable == ()
    assert [sorted(c.pods) for c in result.new_claims] == [["default/first", "default/later"]]


def test_a_relaxed_pod_joins_an_unlimited_nodepools_claim_behind_a_limited_ones() -> None:
    """Claims of a limited NodePool come before those of an unlimited one in the bins; the
    relaxed pod still reaches the unlimited pool's claim that has room for it."""
    pinned = NodePool(
        "pinned",
        weight=10,
        limits=NodePoolLimits(nodes=5),
        taints=(DEDICATED,),
    )
    # Only this pod tolerates the pinned pool's taint; the heavier pool gets it first.
    tolerant = pod(
        "tolerant",
        1,
        1,
        host_ports=(HostPort(7070),),
        tolerations=(Toleration("dedicated", "Exists"),),
    )
    result = run([tolerant, *_first_and_relaxed()], [SMALL], [pinned, NodePool("default")])

    assert result.unschedulable == ()
    by_pool = {c.nodepool: sorted(c.pods) for c in result.new_claims}
    assert by_pool == {
        "pinned": ["default/tolerant"],
        "default": ["default/first", "default/later"],
    }


def test_spread_pods_pass_again_over_nodes_behind_one_that_takes_none() -> None:
    """Four zone-spread pods (maxSkew 1), a roomy node in zones a and b and, last by name, a
    node whose taint they do not tolerate: the first pass ends on that node having placed
    three, the second puts the fourth on zone a's node; no claim is launched."""
    app = {"app": "api"}
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=LabelSelector.of(app))
    roomy = Resources(2000, 4 * GIB, 110)
    nodes = (
        Node("n-zone-a", {ZONE: "zone-a"}, allocatable=roomy),
        Node("n-zone-b", {ZONE: "zone-b"}, allocatable=roomy),
        Node(
            "z-tainted",
            {ZONE: "zone-a"},
            taints=(DEDICATED,),
            allocatable=roomy,
        ),
    )
    zones_a_b = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ZONES[:2]),))
    pods = [pod(f"api-{i}", 1, 1, labels=app, topology_spread=(spread,)) for i in range(4)]

    result = run(pods, [SMALL, LARGE], [zones_a_b], nodes=nodes)

    assert result.new_claims == ()
    assert sorted((e.node, len(e.pods)) for e in result.existing_placements) == [
        ("n-zone-a", 2),
        ("n-zone-b", 2),
    ]
