"""The domains a topology spread counts for its minimum (kube-scheduler's global minimum over
the eligible domains): existing nodes the pod's node affinity and, when honoured, taint policy
admit (full or not), plus the domains the NodePools can launch the pod into, through the
instance types and offerings the pod could use there."""

from __future__ import annotations

from collections import Counter

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    Offering,
    Operator,
    Pod,
    Requirement,
    Resources,
    SchedulingResult,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)

from .builders import GIB, ZONES, instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"
CT = "karpenter.sh/capacity-type"
ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
TIER = "example.com/tier"
TAINT = Taint("dedicated", TaintEffect.NO_SCHEDULE, "x")


def _spread_pods(
    count: int, key: str, app: str = "web", cpu: float = 1, **kwargs: object
) -> list[Pod]:
    """``count`` pods of ``app`` spread over ``key`` with maxSkew 1 (honour and taint policies
    as given by ``honor_affinity`` / ``honor_taints``), other pod fields from ``kwargs``."""
    spread = TopologySpreadConstraint(
        key,
        1,
        label_selector=LabelSelector.of({"app": app}),
        node_affinity_policy_honor=bool(kwargs.pop("honor_affinity", True)),
        node_taints_policy_honor=bool(kwargs.pop("honor_taints", False)),
    )
    return [
        pod(f"{app}-{i}", cpu, 1, labels={"app": app}, topology_spread=(spread,), **kwargs)
        for i in range(count)
    ]


def _per(result: SchedulingResult, what: str) -> dict[str, int]:
    """Pods placed on new claims per zone or capacity type (``what``) of the chosen offering."""
    counted: Counter[str] = Counter()
    for claim in result.new_claims:
        counted[getattr(claim.offerings[0], what)] += len(claim.pods)
    return dict(counted)


def _full(name: str, labels: dict[str, str], *pods: Pod, taints: tuple[Taint, ...] = ()) -> Node:
    """A node with no room for a 1-cpu pod, running ``pods``."""
    return Node(name, labels, taints, allocatable=Resources(500, GIB, 110), pods=pods)


def test_zones_reached_only_through_an_excluded_capacity_type_are_not_domains() -> None:
    """On-demand is offered in zone-a and zone-b only (spot everywhere): for on-demand pods
    zone-c is no domain, so four pods spread two and two, none left waiting on zone-c."""
    shape = Resources(2000, 4 * GIB, 110)
    offers = [Offering(z, "on-demand", 0.1) for z in ZONES[:2]]
    offers += [Offering(z, "spot", 0.05) for z in ZONES]
    on_demand_a_b = InstanceType("m", shape, shape, {}, tuple(offers))

    result = run(_spread_pods(4, ZONE, node_selector={CT: "on-demand"}), [on_demand_a_b])

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 2, "zone-b": 2}


def test_zones_only_types_outside_the_nodepool_offer_are_not_domains() -> None:
    """The NodePool launches only "small", offered in zone-a and zone-b; "big" (outside the
    pool) is offered in zone-c too, which therefore counts for nothing."""
    small = instance_type("small", 2, 4, 0.1, zones=ZONES[:2])
    big = instance_type("big", 8, 16, 0.5)
    pool = NodePool("default", requirements=(Requirement(INSTANCE_TYPE, Operator.IN, ("small",)),))

    result = run(_spread_pods(4, ZONE), [small, big], [pool])

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 2, "zone-b": 2}


def test_a_capacity_type_spread_counts_capacity_types() -> None:
    """Spread over capacity types: on-demand and spot each take two of four pods."""
    result = run(_spread_pods(4, CT), [instance_type("m", 2, 4, 0.1, spot_price=0.05)])

    assert result.unschedulable == ()
    assert _per(result, "capacity_type") == {"on-demand": 2, "spot": 2}


def test_label_values_only_types_outside_the_nodepool_carry_are_not_domains() -> None:
    """The NodePool launches only the gold type: the silver tier (another type's label) is no
    domain, so both pods go to gold (one domain: no skew) instead of waiting for silver."""
    gold = instance_type("gold", 4, 8, 0.1, labels={TIER: "gold"})
    silver = instance_type("silver", 4, 8, 0.1, labels={TIER: "silver"})
    pool = NodePool("default", requirements=(Requirement(INSTANCE_TYPE, Operator.IN, ("gold",)),))

    result = run(_spread_pods(2, TIER), [gold, silver], [pool])

    assert result.unschedulable == ()
    assert [(c.instance_type, len(c.pods)) for c in result.new_claims] == [("gold", 2)]


def test_a_nodepool_the_pod_cannot_use_does_not_stop_the_next_from_counting() -> None:
    """The heavier NodePool is arm64 only (the pods need amd64); the next one reaches all three
    zones, and zone-a already runs a web pod on a full node: the spread counts every zone, so
    the three new pods go one to each (zone-a ends with two, the others with one)."""
    arm = NodePool("a-arm", weight=10, requirements=(Requirement(ARCH, Operator.IN, ("arm64",)),))
    running = _full("n1", {ZONE: "zone-a"}, pod("old", 0.1, 0.1, labels={"app": "web"}))
    pods = _spread_pods(3, ZONE, node_selector={ARCH: "amd64"})

    result = run(
        pods, [instance_type("m", 2, 4, 0.1)], [arm, NodePool("b-default")], nodes=(running,)
    )

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 1, "zone-b": 1, "zone-c": 1}


def test_a_tainted_nodepool_the_pod_cannot_use_at_all_adds_no_domain() -> None:
    """nodeTaintsPolicy Ignore counts a tainted NodePool's domains, but only those the pod's
    node affinity could use: this one is arm64 only and the pods need amd64, so it adds
    nothing and the plain pool's zones (a, b) take two pods each."""
    tainted = NodePool(
        "a-tainted", taints=(TAINT,), requirements=(Requirement(ARCH, Operator.IN, ("arm64",)),)
    )
    small = instance_type("small", 2, 4, 0.1, zones=ZONES[:2])

    result = run(
        _spread_pods(4, ZONE, node_selector={ARCH: "amd64"}),
        [small],
        [tainted, NodePool("b-plain")],
    )

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 2, "zone-b": 2}


def test_a_tainted_nodepool_counts_only_zones_of_the_types_the_pod_selects() -> None:
    """nodeTaintsPolicy Ignore: the tainted NodePool's domains count, through the types the
    pod's node affinity allows ("small", zones a and b), not "big"'s zone-c."""
    small = instance_type("small", 2, 4, 0.1, zones=ZONES[:2])
    big = instance_type("big", 8, 16, 0.5)
    tainted = NodePool("a-tainted", taints=(TAINT,))
    pods = _spread_pods(4, ZONE, node_selector={INSTANCE_TYPE: "small"})

    result = run(pods, [small, big], [tainted, NodePool("b-plain")])

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 2, "zone-b": 2}


def test_a_nodepool_with_no_type_big_enough_adds_no_domain_even_ignoring_affinity() -> None:
    """nodeAffinityPolicy Ignore counts every domain a NodePool reaches, but a NodePool whose
    types cannot hold the pod (3 cpu, its type has 2) launches nothing there: its zone-c is
    no domain and the other pool's zones a and b take two pods each."""
    too_small = NodePool(
        "a-too-small", requirements=(Requirement(INSTANCE_TYPE, Operator.IN, ("small",)),)
    )
    big_a_b = NodePool("b-big", requirements=(Requirement(INSTANCE_TYPE, Operator.IN, ("big",)),))
    types = [instance_type("small", 2, 4, 0.1), instance_type("big", 8, 16, 0.5, zones=ZONES[:2])]

    result = run(_spread_pods(4, ZONE, cpu=3, honor_affinity=False), types, [too_small, big_a_b])

    assert result.unschedulable == ()
    assert _per(result, "zone") == {"zone-a": 2, "zone-b": 2}


ZONE_A_TEAM_X = NodePool(
    "default", labels={"team": "x"}, requirements=(Requirement(ZONE, Operator.IN, ("zone-a",)),)
)


def test_full_nodes_the_pods_affinity_admits_are_domains_and_others_are_not() -> None:
    """The pool launches only in zone-a, where a full node runs a web pod. A full zone-b node
    without the team label the pod selects is no domain: the pod is placed in zone-a. A full
    zone-c node with the label is one, with no web pod: zone-a would be 2 ahead, so the pod
    cannot be placed."""
    outsider = _full("a-outsider", {ZONE: "zone-b"})
    running = _full(
        "b-running", {ZONE: "zone-a", "team": "x"}, pod("old", 0.1, 0.1, labels={"app": "web"})
    )
    empty = _full("c-empty", {ZONE: "zone-c", "team": "x"})
    pods = _spread_pods(1, ZONE, node_selector={"team": "x"})
    types = [instance_type("m", 2, 4, 0.1)]

    admitted = run(pods, types, [ZONE_A_TEAM_X], nodes=(outsider, running))
    counted = run(pods, types, [ZONE_A_TEAM_X], nodes=(outsider, running, empty))

    assert admitted.unschedulable == ()
    assert _per(admitted, "zone") == {"zone-a": 1}
    assert [u.pod for u in counted.unschedulable] == ["default/web-0"]
    assert "topology spread" in counted.unschedulable[0].reason


def test_with_taints_honoured_only_tolerated_nodes_are_domains() -> None:
    """nodeTaintsPolicy Honor: a tainted zone-b node the pod does not tolerate is no domain
    (the pod is placed in zone-a, beside the running one); an untainted zone-c node with no
    web pod is, and then zone-a would be 2 ahead."""
    tainted = _full("a-tainted", {ZONE: "zone-b"}, taints=(TAINT,))
    running = _full("b-running", {ZONE: "zone-a"}, pod("old", 0.1, 0.1, labels={"app": "web"}))
    empty = _full("c-empty", {ZONE: "zone-c"})
    pods = _spread_pods(1, ZONE, honor_taints=True)
    zone_a = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-a",)),))
    types = [instance_type("m", 2, 4, 0.1)]

    tolerated_only = run(pods, types, [zone_a], nodes=(tainted, running))
    counted = run(pods, types, [zone_a], nodes=(tainted, running, empty))

    assert tolerated_only.unschedulable == ()
    assert _per(tolerated_only, "zone") == {"zone-a": 1}
    assert [u.pod for u in counted.unschedulable] == ["default/web-0"]


def test_each_spread_key_counts_its_own_domains() -> None:
    """A zone spread (the larger pods, solved first) and a capacity-type spread in one solve,
    beside a full zone-a node: the capacity-type spread still counts on-demand and spot (not
    zones), and its four pods go two and two."""
    zoned = _spread_pods(3, ZONE, app="zoned", cpu=1.5)
    by_capacity = _spread_pods(4, CT, app="by-ct", cpu=0.5)
    full = _full("n1", {ZONE: "zone-a"})

    result = run(
        [*zoned, *by_capacity],
        [instance_type("m", 2, 4, 0.1, spot_price=0.05)],
        nodes=(full,),
    )

    assert result.unschedulable == ()
    per_capacity: Counter[str] = Counter()
    for claim in result.new_claims:
        per_capacity[claim.offerings[0].capacity_type] += sum("by-ct" in p for p in claim.pods)
    assert dict(per_capacity) == {"on-demand": 2, "spot": 2}


def test_two_pods_with_different_node_affinity_count_different_existing_domains() -> None:
    """Both spread over zones. The team-x pod (solved first) counts only the team-x node in
    zone-a; the other pod counts the zone-b node too, which runs none of its pods, so it
    cannot join its running copy in zone-a (2 ahead)."""
    running = _full(
        "n-a", {ZONE: "zone-a", "team": "x"}, pod("other-old", 0.1, 0.1, labels={"app": "other"})
    )
    empty = _full("n-b", {ZONE: "zone-b"})
    team_x = _spread_pods(1, ZONE, app="teamx", cpu=1.5, node_selector={"team": "x"})
    other = _spread_pods(1, ZONE, app="other")

    result = run(
        [*team_x, *other], [instance_type("m", 2, 4, 0.1)], [ZONE_A_TEAM_X], nodes=(running, empty)
    )

    assert [c.pods for c in result.new_claims] == [("default/teamx-0",)]
    assert [u.pod for u in result.unschedulable] == ["default/other-0"]


def test_two_pods_with_different_tolerations_count_different_existing_domains() -> None:
    """Both spread over zones honouring taints. The intolerant pod (solved first) does not
    count the tainted zone-b node; the tolerant one does, and that node runs none of its pods,
    so it cannot join its running copy in zone-a (2 ahead)."""
    running = _full(
        "n-a", {ZONE: "zone-a"}, pod("tolerant-old", 0.1, 0.1, labels={"app": "tolerant"})
    )
    tainted = _full("n-b", {ZONE: "zone-b"}, taints=(TAINT,))
    intolerant = _spread_pods(1, ZONE, app="intolerant", cpu=1.5, honor_taints=True)
    tolerant = _spread_pods(
        1, ZONE, app="tolerant", honor_taints=True, tolerations=(Toleration("dedicated", "Exists"),)
    )
    zone_a = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-a",)),))

    result = run(
        [*intolerant, *tolerant],
        [instance_type("m", 2, 4, 0.1)],
        [zone_a],
        nodes=(running, tainted),
    )

    assert [c.pods for c in result.new_claims] == [("default/intolerant-0",)]
    assert [u.pod for u in result.unschedulable] == ["default/tolerant-0"]
