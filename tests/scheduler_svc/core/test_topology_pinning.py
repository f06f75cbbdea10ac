"""Which domain a new NodeClaim is pinned to when a pod's spread or (anti-)affinity needs one:
only values the claim can still take (its zones, capacity types, labels or requirements), and
among equally good ones the domain the pod's topology group counts fewest."""

from __future__ import annotations

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    SchedulingResult,
    TopologySpreadConstraint,
)

from .builders import GIB, ZONES, instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"
CT = "karpenter.sh/capacity-type"
RACK = "example.com/rack"
TIER = "example.com/tier"
DB = LabelSelector.of({"app": "db"})
WEB = LabelSelector.of({"app": "web"})


def _db(name: str, key: str, **kwargs: object) -> Pod:
    """A db pod that keeps away from every other db pod in its ``key`` domain."""
    return pod(
        name, 1, 1, labels={"app": "db"}, pod_anti_affinity=(PodAffinityTerm(key, DB),), **kwargs
    )


def _offered(*pairs: tuple[str, str]) -> InstanceType:
    """A 2-cpu type offered only in the given (zone, capacity type) pairs (spot cheaper)."""
    shape = Resources(2000, 4 * GIB, 110)
    offers = tuple(Offering(z, ct, 0.05 if ct == "spot" else 0.1) for z, ct in pairs)
    return InstanceType("m", shape, shape, {}, offers)


def _launched(result: SchedulingResult) -> list[tuple[tuple[str, ...], set[tuple[str, str]]]]:
    """Per claim: its pods and the (zone, capacity type) pairs it may launch into."""
    return [(c.pods, {(o.zone, o.capacity_type) for o in c.offerings}) for c in result.new_claims]


def _requirement(result: SchedulingResult, index: int, key: str) -> tuple[str, ...]:
    return next(r.values for r in result.new_claims[index].requirements if r.key == key)


def test_zone_anti_affinity_pins_only_zones_the_pod_allows() -> None:
    """The pod may run in zone-b or zone-c only: its zone anti-affinity places one pod in each
    of those (never zone-a, though the type is offered there) and the third cannot be placed."""
    zones_b_c = ((Requirement(ZONE, Operator.IN, ZONES[1:]),),)
    pods = [_db(f"p{i}", ZONE, required_node_affinity=zones_b_c) for i in range(3)]

    result = run(pods, [instance_type("m", 2, 4, 0.1)])

    assert _launched(result) == [
        (("default/p0",), {("zone-b", "on-demand")}),
        (("default/p1",), {("zone-c", "on-demand")}),
    ]
    assert [u.pod for u in result.unschedulable] == ["default/p2"]
    assert "anti-affinity" in result.unschedulable[0].reason


def test_zone_anti_affinity_pins_only_zones_offering_the_pods_capacity_type() -> None:
    """The pod needs on-demand, offered in zone-b and zone-c only (zone-a sells spot): the
    claims go there, one per zone, and no claim is pinned to zone-a."""
    only_b_c = _offered(*((z, "on-demand") for z in ZONES[1:]), *((z, "spot") for z in ZONES))
    pods = [_db(f"p{i}", ZONE, node_selector={CT: "on-demand"}) for i in range(3)]

    result = run(pods, [only_b_c])

    assert _launched(result) == [
        (("default/p0",), {("zone-b", "on-demand")}),
        (("default/p1",), {("zone-c", "on-demand")}),
    ]
    assert [u.pod for u in result.unschedulable] == ["default/p2"]


def test_capacity_type_anti_affinity_pins_only_types_offered_in_the_pods_zones() -> None:
    """Spot is offered in zone-a only and the pod runs in zone-b or zone-c: the first pod takes
    on-demand, and the second, which would need another capacity type, cannot be placed."""
    zones_b_c = ((Requirement(ZONE, Operator.IN, ZONES[1:]),),)
    spot_in_a = _offered(*((z, "on-demand") for z in ZONES), ("zone-a", "spot"))
    pods = [_db(f"p{i}", CT, required_node_affinity=zones_b_c) for i in range(2)]

    result = run(pods, [spot_in_a])

    assert _launched(result) == [
        (("default/p0",), {("zone-b", "on-demand"), ("zone-c", "on-demand")}),
    ]
    assert [u.pod for u in result.unschedulable] == ["default/p1"]
    assert "anti-affinity on karpenter.sh/capacity-type" in result.unschedulable[0].reason


def test_capacity_type_anti_affinity_pins_only_capacity_types_the_pod_allows() -> None:
    """The pod refuses spot: one pod goes on-demand, the second has no capacity type left."""
    no_spot = ((Requirement(CT, Operator.NOT_IN, ("spot",)),),)
    pods = [_db(f"p{i}", CT, required_node_affinity=no_spot) for i in range(2)]

    result = run(pods, [instance_type("m", 2, 4, 0.1, spot_price=0.05)])

    assert [(c.pods, _requirement(result, i, CT)) for i, c in enumerate(result.new_claims)] == [
        (("default/p0",), ("on-demand",))
    ]
    assert [u.pod for u in result.unschedulable] == ["default/p1"]


def test_spread_on_an_instance_type_label_pins_the_claim_to_the_targets_value() -> None:
    """A spread over a label the instance types carry (tier): the claim is pinned to its type's
    tier, and both pods (one domain, so no skew) share it."""
    spread = TopologySpreadConstraint(TIER, 1, label_selector=WEB)
    pods = [pod(f"p{i}", 1, 1, labels={"app": "web"}, topology_spread=(spread,)) for i in range(2)]

    result = run(pods, [instance_type("gold", 4, 8, 0.1, labels={TIER: "gold"})])

    assert result.unschedulable == ()
    assert [c.pods for c in result.new_claims] == [("default/p0", "default/p1")]
    assert _requirement(result, 0, TIER) == ("gold",)


def test_anti_affinity_on_a_label_the_target_type_lacks_does_not_pin_it() -> None:
    """The cheapest type has no tier label (another type has): a node without the key is in
    no tier domain, so anti-affinity on tier keeps neither pod off it (kube-scheduler ignores
    a term whose key the node lacks) and both run on the cheap type."""
    types = [
        instance_type("plain", 4, 8, 0.1),
        instance_type("gold", 4, 8, 0.2, labels={TIER: "gold"}),
    ]
    pods = [
        pod(f"p{i}", 1, 1, labels={"app": "web"}, pod_anti_affinity=(PodAffinityTerm(TIER, WEB),))
        for i in range(2)
    ]

    result = run(pods, types)

    assert result.unschedulable == ()
    assert [(c.pods, c.instance_type) for c in result.new_claims] == [
        (("default/p0", "default/p1"), "plain")
    ]


def test_anti_affinity_on_a_key_no_node_can_have_is_met_everywhere() -> None:
    """No instance type, NodePool or node has a rack label: the anti-affinity on rack never
    applies, so the three pods share one claim."""
    pods = [
        pod(f"p{i}", 1, 1, labels={"app": "web"}, pod_anti_affinity=(PodAffinityTerm(RACK, WEB),))
        for i in range(3)
    ]

    result = run(pods, [instance_type("m", 4, 8, 0.1)])

    assert result.unschedulable == ()
    assert [c.pods for c in result.new_claims] == [("default/p0", "default/p1", "default/p2")]


def _full_node(labels: dict[str, str]) -> Node:
    """A node with no room left for a 1-cpu pod, running one web pod."""
    web = pod("web-0", 0.1, 0.1, labels={"app": "web"})
    return Node("n1", labels, allocatable=Resources(200, GIB, 110), pods=(web,))


def test_a_spread_on_a_nodepool_label_pins_the_rack_its_group_counts_fewest() -> None:
    """The NodePool labels its nodes rack r1 or r2 and r1 already runs a web pod: an api pod
    spreading web pods over racks (it is not one itself, so both racks allow it) gets a claim
    pinned to r2, where its spread counts fewer."""
    pool = NodePool("default", requirements=(Requirement(RACK, Operator.IN, ("r1", "r2")),))
    spread = TopologySpreadConstraint(RACK, 1, label_selector=WEB)
    api = pod("api", 1, 1, labels={"app": "api"}, topology_spread=(spread,))

    result = run([api], [instance_type("m", 2, 4, 0.1)], [pool], nodes=(_full_node({RACK: "r1"}),))

    assert result.unschedulable == ()
    assert _requirement(result, 0, RACK) == ("r2",)


def test_a_pod_counted_by_a_zone_spread_opens_its_claim_where_the_spread_counts_fewest() -> None:
    """A web pod has no zone constraint of its own, but another pod spreads web pods over
    zones and zone-a already runs one: the web pod's claim is pinned to zone-b (the first of
    the zones counting none), not to zone-a."""
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=WEB)
    watcher = pod("watcher", 0.1, 0.1, labels={"app": "api"}, topology_spread=(spread,))
    web = pod("web", 2, 1, labels={"app": "web"})

    result = run(
        [web, watcher], [instance_type("m", 4, 8, 0.1)], nodes=(_full_node({ZONE: "zone-a"}),)
    )

    assert result.unschedulable == ()
    web_claim = next(c for c in result.new_claims if "default/web" in c.pods)
    assert {o.zone for o in web_claim.offerings} == {"zone-b"}
