"""Which zone a new claim is pinned to when a pod on it has a zone-keyed term but the claim is
in no zone yet (``Packing._topology_copies``): the zone allowing the most copies; among those,
the one the class's first group counts fewest pods in; then the one where the claim's type is
cheapest; then the first by name. One type, t: 4 cpu, 16 GiB, $0.10 in zones a and b."""

from __future__ import annotations

import pytest

from scheduler_svc.core import (
    LabelSelector,
    Node,
    NodePool,
    Operator,
    PodAffinityTerm,
    Requirement,
    Resources,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, claim_of, instance_type, pod, run, zone_of

T = instance_type("t", 4, 16, 0.10, zones=("zone-a", "zone-b"))
APP = LabelSelector.of({"app": "x"})


def _node_running_one_in(zone: str) -> Node:
    """A full node in ``zone`` running one pod labelled app=x."""
    running = pod("x-old", 1, 1, labels={"app": "x"})
    return Node(
        "n1", {LABEL_ZONE: zone}, allocatable=Resources(1000, 1 * GIB, 110), pods=(running,)
    )


@pytest.mark.parametrize(("running_in", "expected"), [("zone-a", "zone-b"), ("zone-b", "zone-a")])
def test_a_pod_a_zone_spread_counts_goes_where_it_counts_fewest(
    running_in: str, expected: str
) -> None:
    """A 3-cpu app=x pod with no term of its own is counted by a zone spread (maxSkew 1) of
    a small app=x pod; one app=x pod already runs in ``running_in``. The big pod's claim
    goes to the other zone, where the spread counts none, so the spread pod may join it:
    one t node, not two."""
    spread = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=APP)
    big = pod("big", 3, 1, labels={"app": "x"})
    small = pod("small", 0.5, 0.5, labels={"app": "x"}, topology_spread=(spread,))
    result = run([big, small], [T], nodes=(_node_running_one_in(running_in),))
    [claim] = result.new_claims
    assert sorted(claim.pods) == ["default/big", "default/small"]
    assert zone_of(result, "default/big") == expected


def test_zones_alike_in_count_and_price_pin_the_first_by_name() -> None:
    """One pod with zone anti-affinity against its own app: both zones allow it, count no
    app=x pod and price t alike, so the plan is the same on every solve: zone-a."""
    anti = pod(
        "x-0", 1, 1, labels={"app": "x"}, pod_anti_affinity=(PodAffinityTerm(LABEL_ZONE, APP),)
    )
    result = run([anti], [T])
    assert zone_of(result, "default/x-0") == "zone-a"


def test_a_spread_over_a_nodepool_label_pins_each_claim_to_one_value() -> None:
    """A NodePool offers two values of its own label example.com/team (no instance type
    carries it); two pods spread over it with maxSkew 1 go to two claims, one per value,
    the first to the first value by name."""
    team = "example.com/team"
    pool = NodePool("default", requirements=(Requirement(team, Operator.IN, ("blue", "green")),))
    spread = TopologySpreadConstraint(team, 1, label_selector=APP)
    pods = [pod(f"x-{i}", 3, 1, labels={"app": "x"}, topology_spread=(spread,)) for i in range(2)]
    result = run(pods, [T], [pool])
    teams = [next(r.values for r in c.requirements if r.key == team) for c in result.new_claims]
    assert teams == [("blue",), ("green",)]


def test_a_pod_no_zone_admits_is_refused_for_its_term_not_for_minvalues() -> None:
    """Every zone already runs an app=x pod, so a pod with zone anti-affinity against app=x
    fits none: the NodePool (minValues 2 instance types; zone-a offers only s1) reports the
    anti-affinity, not the minValues a claim pinned to zone-a would miss."""
    instance_types = [
        instance_type("s1", 2, 8, 0.10),
        instance_type("s2", 4, 16, 0.20, zones=("zone-b",)),
    ]
    pool = NodePool(
        "default",
        requirements=(
            Requirement("node.kubernetes.io/instance-type", Operator.IN, ("s1", "s2"), 2),
        ),
    )
    nodes = tuple(
        Node(
            f"n-{zone}",
            {LABEL_ZONE: zone},
            allocatable=Resources(1000, 1 * GIB, 110),
            pods=(pod(f"old-{zone}", 1, 1, labels={"app": "x"}),),
        )
        for zone in ("zone-a", "zone-b", "zone-c")
    )
    anti = pod(
        "x-new", 1, 1, labels={"app": "x"}, pod_anti_affinity=(PodAffinityTerm(LABEL_ZONE, APP),)
    )
    result = run([anti], instance_types, [pool], nodes=nodes)
    [refused] = result.unschedulable
    assert refused.reason == (
        "NodePool default: pod anti-affinity on topology.kubernetes.io/zone: "
        "every reachable domain already runs a matching pod"
    )


def test_every_key_of_a_pod_pins_its_claim() -> None:
    """An app=x pod runs on a spot node in zone-a. A pod with anti-affinity against app=x on
    both the capacity type and the zone gets a claim pinned on both keys: on-demand, and
    zone-b only (launching in zone-a would break its zone anti-affinity)."""
    typed = instance_type("t", 4, 16, 0.10, spot_price=0.04, zones=("zone-a", "zone-b"))
    node = Node(
        "n-a",
        {LABEL_ZONE: "zone-a", LABEL_CAPACITY_TYPE: "spot"},
        allocatable=Resources(1000, 1 * GIB, 110),
        pods=(pod("old", 1, 1, labels={"app": "x"}),),
    )
    terms = (PodAffinityTerm(LABEL_ZONE, APP), PodAffinityTerm(LABEL_CAPACITY_TYPE, APP))
    anti = pod("x-new", 1, 1, labels={"app": "x"}, pod_anti_affinity=terms)
    result = run([anti], [typed], nodes=(node,))
    [claim] = result.new_claims
    assert {(o.zone, o.capacity_type) for o in claim.offerings} == {("zone-b", "on-demand")}


def test_a_claim_pinned_to_a_zone_counts_minvalues_on_the_types_offered_there() -> None:
    """NodePool minValues 2 instance types; s1 (2 cpu) and s3 (4 cpu) are offered in every
    zone, s4 (4 cpu) in zone-b only. A 1.5-cpu pod opens a claim; 500m pods with zone
    affinity to each other pin it to zone-a and join it only while both s1 and s3 hold it
    (s4 is not in zone-a and does not count): every claim keeps two types."""
    it = "node.kubernetes.io/instance-type"
    instance_types = [
        instance_type("s1", 2, 8, 0.10),
        instance_type("s3", 4, 16, 0.18),
        instance_type("s4", 4, 16, 0.19, zones=("zone-b",)),
    ]
    pool = NodePool("default", requirements=(Requirement(it, Operator.IN, ("s1", "s3", "s4"), 2),))
    affinity = (PodAffinityTerm(LABEL_ZONE, APP),)
    pods = [pod("h", 1.5, 1)] + [
        pod(f"x-{i}", 0.5, 1, labels={"app": "x"}, pod_affinity=affinity) for i in range(4)
    ]
    result = run(pods, instance_types, [pool])
    assert result.unschedulable == ()
    assert sorted(result.new_claims[claim_of(result, "default/h")].pods) == [
        "default/h",
        "default/x-0",
    ]
    for claim in result.new_claims:
        assert {(o.instance_type, o.zone) for o in claim.offerings} == {
            ("s1", "zone-a"),
            ("s3", "zone-a"),
        }


def test_a_pod_refused_on_its_first_key_is_reported_for_that_key() -> None:
    """An on-demand NodePool; an app=x pod runs on an on-demand node in zone-a. A pod with
    anti-affinity against app=x on the capacity type and on the zone is shut out by the
    capacity type (the pool's only one already runs app=x): that is the reason given, not
    zone-a's anti-affinity, which zone-b would have satisfied."""
    node = Node(
        "n-a",
        {LABEL_ZONE: "zone-a", LABEL_CAPACITY_TYPE: "on-demand"},
        allocatable=Resources(1000, 1 * GIB, 110),
        pods=(pod("old", 1, 1, labels={"app": "x"}),),
    )
    on_demand = NodePool(
        "default", requirements=(Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),)
    )
    terms = (PodAffinityTerm(LABEL_ZONE, APP), PodAffinityTerm(LABEL_CAPACITY_TYPE, APP))
    anti = pod("x-new", 1, 1, labels={"app": "x"}, pod_anti_affinity=terms)
    result = run([anti], [T], [on_demand], nodes=(node,))
    [refused] = result.unschedulable
    assert refused.reason == (
        "NodePool default: pod anti-affinity on karpenter.sh/capacity-type: "
        "every reachable domain already runs a matching pod"
    )
