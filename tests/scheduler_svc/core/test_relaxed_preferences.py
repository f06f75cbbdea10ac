"""The plan says which preferences it dropped to place a pod (issue 19: ``daiku plan --explain``
for placed pods).

Karpenter relaxes a pod's preferences one at a time when it cannot be scheduled with them and
logs each ("relaxing soft constraints for pod since it previously failed to schedule, removing:
..." — kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/preferences.go
``Relax``); daiku records the same in ``SchedulingResult.relaxed``.
"""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    RelaxedPod,
    Requirement,
    Resources,
    Taint,
    TaintEffect,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
)

from .builders import GIB, instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"


def _preferring(name: str, *zones_and_weights: tuple[str, int], cpu: float = 1) -> Pod:
    return pod(
        name,
        cpu,
        1,
        preferred_node_affinity=tuple(
            PreferredNodeAffinityTerm(w, (Requirement(ZONE, Operator.IN, (z,)),))
            for z, w in zones_and_weights
        ),
    )


def test_a_dropped_preferred_node_term_is_listed_for_the_placed_pod() -> None:
    """The heaviest term (zone mars-1, which no offering has) is dropped, the next one is met:
    the result names the dropped term, and a pod whose preference held is not listed."""
    picky = _preferring("picky", ("mars-1", 100), ("zone-c", 50))
    content = _preferring("content", ("zone-b", 10))

    result = run([picky, content], [instance_type("m5.large", 2, 8, 0.096)])

    assert result.unschedulable == ()
    assert result.relaxed == (
        RelaxedPod("default/picky", (f"preferred node affinity (weight 100): {ZONE} In [mars-1]",)),
    )


def test_a_prefer_no_schedule_pool_used_last_is_a_relaxed_preference() -> None:
    """Only the PreferNoSchedule pool can hold the pod: it lands there after the last
    relaxation (Karpenter's toleratePreferNoSchedule), and the result says so."""
    tainted = NodePool("a-tainted", taints=(Taint("big", TaintEffect.PREFER_NO_SCHEDULE),))
    small_only = NodePool(
        "b-small",
        requirements=(Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.large",)),),
    )
    types = [instance_type("m5.large", 2, 8, 0.096), instance_type("m5.4xlarge", 16, 64, 0.768)]

    result = run([pod("big", 8, 8)], types, (tainted, small_only))

    assert [c.nodepool for c in result.new_claims] == ["a-tainted"]
    assert result.relaxed == (
        RelaxedPod("default/big", ("avoiding NodePools' PreferNoSchedule taints",)),
    )


def test_an_unschedulable_pod_is_not_listed_as_relaxed() -> None:
    """Every preference dropped and still no node: the pod is unschedulable, not relaxed."""
    huge = _preferring("huge", ("zone-a", 1), cpu=64)

    result = run([huge], [instance_type("m5.large", 2, 8, 0.096)])

    assert [u.pod for u in result.unschedulable] == ["default/huge"]
    assert result.relaxed == ()


HOSTNAME = "kubernetes.io/hostname"
WEB = LabelSelector.of({"app": "web"})


def _full_pool_and_web_node(*pods_there: Pod) -> tuple[NodePool, Node]:
    """A NodePool that may launch nothing more (limit of one node) and its one node."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=1))
    node = Node(
        "n1",
        {ZONE: "zone-a", HOSTNAME: "n1", "karpenter.sh/nodepool": "default"},
        allocatable=Resources(4000, 8 * GIB, 110),
        pods=pods_there,
    )
    return pool, node


def test_a_dropped_preferred_pod_anti_affinity_is_named_with_its_weight_and_key() -> None:
    """The only node already runs a web pod and no node may be launched: the preference to stay
    apart from web pods is dropped and the result spells it as the pod did."""
    pool, node = _full_pool_and_web_node(pod("web-0", 1, 1, labels={"app": "web"}))
    shy = pod(
        "shy",
        1,
        1,
        preferred_pod_anti_affinity=(WeightedPodAffinityTerm(10, PodAffinityTerm(HOSTNAME, WEB)),),
    )

    result = run([shy], [instance_type("m5.large", 2, 8, 0.096)], (pool,), nodes=(node,))

    assert [p.node for p in result.existing_placements] == ["n1"]
    assert result.relaxed == (
        RelaxedPod("default/shy", (f"preferred pod anti-affinity (weight 10) on {HOSTNAME}",)),
    )


def test_a_dropped_preferred_pod_affinity_is_named_as_affinity() -> None:
    """No web pod runs anywhere, so the wish to share a node with one cannot be met."""
    pool, node = _full_pool_and_web_node()
    clingy = pod(
        "clingy",
        1,
        1,
        preferred_pod_affinity=(WeightedPodAffinityTerm(30, PodAffinityTerm(HOSTNAME, WEB)),),
    )

    result = run([clingy], [instance_type("m5.large", 2, 8, 0.096)], (pool,), nodes=(node,))

    assert result.unschedulable == ()
    assert result.relaxed == (
        RelaxedPod("default/clingy", (f"preferred pod affinity (weight 30) on {HOSTNAME}",)),
    )


def test_a_dropped_schedule_anyway_spread_is_named_with_its_key_and_skew() -> None:
    """zone-a holds a node the pod cannot use (tainted) and no pod of the app; the pool
    launches only in zone-b, which has one already: one more there breaks maxSkew 1, so the
    ScheduleAnyway spread is dropped."""
    app = {"app": "api"}
    spread = TopologySpreadConstraint(
        ZONE, 1, WhenUnsatisfiable.SCHEDULE_ANYWAY, LabelSelector.of(app)
    )
    taken = Node(
        "a1",
        {ZONE: "zone-a", HOSTNAME: "a1"},
        (Taint("team", TaintEffect.NO_SCHEDULE, "x"),),
        allocatable=Resources(4000, 8 * GIB, 110),
    )
    running = Node(
        "b1",
        {ZONE: "zone-b", HOSTNAME: "b1"},
        allocatable=Resources(4000, 8 * GIB, 110),
        pods=(pod("api-0", 1, 1, labels=app),),
    )
    zone_b = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-b",)),))
    api = pod("api-1", 1, 1, labels=app, topology_spread=(spread,))

    result = run([api], [instance_type("m5.large", 2, 8, 0.096)], (zone_b,), nodes=(taken, running))

    assert result.unschedulable == ()
    assert result.relaxed == (
        RelaxedPod("default/api-1", (f"ScheduleAnyway topology spread on {ZONE} (maxSkew 1)",)),
    )
