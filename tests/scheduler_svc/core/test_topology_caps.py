"""How many copies a domain allows under each constraint of a pod (kube-scheduler's filters):
every spread on the key, a spread counting other pods (matchNum - minMatchNum > maxSkew),
minDomains, every required pod affinity and anti-affinity term on the key, and other pods'
anti-affinity, with the reason named when none is allowed."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler_svc.core import (
    LabelSelector,
    Node,
    NodePool,
    Operator,
    PodAffinityTerm,
    Requirement,
    Resources,
    SchedulingResult,
    TopologySpreadConstraint,
)

from .builders import GIB, instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"
CT = "karpenter.sh/capacity-type"
HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
TYPES = [instance_type("m", 4, 8, 0.1)]


def _selects(app: str) -> LabelSelector:
    return LabelSelector.of({"app": app})


def _node(name: str, zone: str, *apps: str, cpu: float = 0.5) -> Node:
    """A node in ``zone`` running one small pod per app in ``apps``; by default too full for
    another 1-cpu pod."""
    pods = tuple(pod(f"{name}-{i}", 0.1, 0.1, labels={"app": a}) for i, a in enumerate(apps))
    return Node(
        name,
        {ZONE: zone, CT: "on-demand"},
        allocatable=Resources(int(cpu * 1000), 4 * GIB, 110),
        pods=pods,
    )


def _zones(result: SchedulingResult) -> dict[str, str]:
    """Pod -> zone of its new claim's chosen offering."""
    return {p: c.offerings[0].zone for c in result.new_claims for p in c.pods}


def _zone_only(*zones: str) -> NodePool:
    return NodePool("default", requirements=(Requirement(ZONE, Operator.IN, zones),))


def test_a_zone_spread_listed_after_a_hostname_spread_still_applies() -> None:
    """A loose hostname spread (maxSkew 10) comes first, a zone spread (maxSkew 1) second: the
    roomy zone-a node takes one pod, not all four, and the zones end two and two."""
    web = _selects("web")
    spreads = (
        TopologySpreadConstraint(HOST, 10, label_selector=web),
        TopologySpreadConstraint(ZONE, 1, label_selector=web),
    )
    pods = [pod(f"w{i}", 1, 1, labels={"app": "web"}, topology_spread=spreads) for i in range(4)]
    roomy = _node("n-a", "zone-a", cpu=8)

    result = run(pods, TYPES, [_zone_only("zone-a", "zone-b")], nodes=(roomy,))

    on_node = [p for e in result.existing_placements for p in e.pods]
    per_zone = Counter(_zones(result).values())
    per_zone["zone-a"] += len(on_node)
    assert result.unschedulable == ()
    assert len(on_node) == 1
    assert dict(per_zone) == {"zone-a": 2, "zone-b": 2}


def test_a_spread_on_a_label_no_node_can_have_is_unschedulable_with_the_reason() -> None:
    """No type, NodePool or node has a rack label: a DoNotSchedule spread on rack filters
    every node out (kube-scheduler: missing required label), and the reason says so."""
    spread = TopologySpreadConstraint(RACK, 1, label_selector=_selects("web"))

    result = run([pod("w", 1, 1, labels={"app": "web"}, topology_spread=(spread,))], TYPES)

    assert result.new_claims == ()
    assert [u.reason for u in result.unschedulable] == [
        f"NodePool default: topology spread on {RACK} (maxSkew 1): node has no {RACK} label"
    ]


def test_min_domains_met_exactly_keeps_the_global_minimum() -> None:
    """minDomains 2 and exactly two zones: the minimum is the real one, so four pods go two
    and two (with fewer domains than minDomains it would be 0 and allow one per zone)."""
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=_selects("web"), min_domains=2)
    pods = [pod(f"w{i}", 1, 1, labels={"app": "web"}, topology_spread=(spread,)) for i in range(4)]

    result = run(pods, TYPES, [_zone_only("zone-a", "zone-b")])

    assert result.unschedulable == ()
    assert Counter(_zones(result).values()) == {"zone-a": 2, "zone-b": 2}


@pytest.mark.parametrize(
    ("web_in_a", "web_in_b", "placed"),
    [
        (1, 0, True),  # zone-a: 1 - 0 = 1, not above maxSkew 1
        (1, 1, True),  # zone-a: 1 - 1 = 0
        (2, 0, False),  # zone-a: 2 - 0 = 2 > 1
    ],
)
def test_a_spread_over_other_pods_allows_a_domain_while_its_skew_stays_within(
    web_in_a: int, web_in_b: int, placed: bool
) -> None:
    """An api pod spreads web pods (it is not one): it may join zone-a (the only zone its
    NodePool reaches) while zone-a's web count minus the fewest in any zone (zone-b's full
    node counts) is at most maxSkew; placing it adds no web pod."""
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=_selects("web"))
    api = pod("api", 1, 1, labels={"app": "api"}, topology_spread=(spread,))
    nodes = (
        _node("n-a", "zone-a", *["web"] * web_in_a),
        _node("n-b", "zone-b", *["web"] * web_in_b),
    )

    result = run([api], TYPES, [_zone_only("zone-a")], nodes=nodes)

    assert (_zones(result) == {"default/api": "zone-a"}) is placed
    assert [u.pod for u in result.unschedulable] == ([] if placed else ["default/api"])


def test_a_zone_affinity_term_after_a_capacity_type_term_still_applies() -> None:
    """Required affinity to the cache on capacity type, then on zone: the cache runs in zone-b
    on-demand, so the pod's claim is in zone-b."""
    cache = _selects("cache")
    terms = (PodAffinityTerm(CT, cache), PodAffinityTerm(ZONE, cache))
    p = pod("p", 1, 1, pod_affinity=terms)

    result = run([p], TYPES, nodes=(_node("n-b", "zone-b", "cache"),))

    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-b"}


def test_every_zone_affinity_term_must_be_met() -> None:
    """Affinity to the cache and to the db on zone: the cache runs in zone-a and zone-b, the
    db in zone-b only, so the pod goes to zone-b (zone-a meets only the first term)."""
    terms = (PodAffinityTerm(ZONE, _selects("cache")), PodAffinityTerm(ZONE, _selects("db")))
    nodes = (_node("n-a", "zone-a", "cache"), _node("n-b", "zone-b", "cache", "db"))

    result = run([pod("p", 1, 1, pod_affinity=terms)], TYPES, nodes=nodes)

    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-b"}


def test_a_first_pod_affinity_to_itself_does_not_waive_its_other_terms() -> None:
    """Affinity to its own app (none runs yet: the first may go anywhere) and to the db on
    zone: the db runs in zone-b only, so the pod still goes to zone-b."""
    terms = (PodAffinityTerm(ZONE, _selects("p")), PodAffinityTerm(ZONE, _selects("db")))
    p = pod("p", 1, 1, labels={"app": "p"}, pod_affinity=terms)

    result = run([p], TYPES, nodes=(_node("n-b", "zone-b", "db"),))

    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-b"}


def test_a_zone_anti_affinity_term_after_a_hostname_term_still_applies() -> None:
    """Anti-affinity to the cache on hostname, then on zone: the cache runs in zone-a, so the
    pod's claim avoids zone-a."""
    cache = _selects("cache")
    p = pod(
        "p", 1, 1, pod_anti_affinity=(PodAffinityTerm(HOST, cache), PodAffinityTerm(ZONE, cache))
    )

    result = run([p], TYPES, nodes=(_node("n-a", "zone-a", "cache"),))

    assert "zone-a" not in {o.zone for o in result.new_claims[0].offerings}


def test_self_anti_affinity_on_a_zone_lets_a_roomy_node_take_one_pod() -> None:
    """Two pods that repel each other per zone and an existing zone-a node with room for both:
    the node takes one, the other gets a claim outside zone-a."""
    db = _selects("db")
    pods = [
        pod(f"d{i}", 1, 1, labels={"app": "db"}, pod_anti_affinity=(PodAffinityTerm(ZONE, db),))
        for i in range(2)
    ]

    result = run(pods, TYPES, nodes=(_node("n-a", "zone-a", cpu=8),))

    assert result.unschedulable == ()
    assert [len(e.pods) for e in result.existing_placements] == [1]
    assert [len(c.pods) for c in result.new_claims] == [1]
    assert "zone-a" not in {o.zone for o in result.new_claims[0].offerings}


def test_a_running_pods_anti_affinity_names_itself_as_the_reason() -> None:
    """A running pod keeps web pods out of its zone (zone-a), the only zone the NodePool
    reaches: the web pod cannot be placed and the reason names the other pod's term."""
    guard = pod("guard", 0.1, 0.1, pod_anti_affinity=(PodAffinityTerm(ZONE, _selects("web")),))
    node = Node("n-a", {ZONE: "zone-a"}, allocatable=Resources(500, 4 * GIB, 110), pods=(guard,))
    web = pod("web", 1, 1, labels={"app": "web"})

    result = run([web], TYPES, [_zone_only("zone-a")], nodes=(node,))

    assert [u.reason for u in result.unschedulable] == [
        f"NodePool default: another pod's anti-affinity on {ZONE} excludes it from every "
        "reachable domain"
    ]
