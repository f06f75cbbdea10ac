"""Which domains a zone (or capacity-type) spread opens claims in together: those the NodePool
can launch the first pod into, through the pod's node term (zones and capacity types it allows)
and the instance types that hold it, and that the spread counts. A domain outside that reach
(here: a zone only an existing node is in) is counted for the skew but gets no claim, and does
not take a share of the NodePool's node limit."""

from __future__ import annotations

from collections import Counter

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Offering,
    Operator,
    Pod,
    Requirement,
    Resources,
    SchedulingResult,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run

WEB = LabelSelector.of({"app": "web"})


def _web(count: int, *spreads: TopologySpreadConstraint) -> list[Pod]:
    """``count`` 1-cpu web pods under ``spreads``."""
    return [
        pod(f"web-{i}", 1, 1, labels={"app": "web"}, topology_spread=spreads) for i in range(count)
    ]


def _zone_c_node() -> Node:
    """A full node in zone-c already running two web pods (no room for another)."""
    running = tuple(pod(f"old-{i}", 0.2, 0.1, labels={"app": "web"}) for i in range(2))
    return Node("n-c", {LABEL_ZONE: "zone-c"}, allocatable=Resources(500, GIB, 110), pods=running)


def _batch(count: int) -> list[Pod]:
    """``count`` 0.9-cpu pods without constraints (smaller than a web pod: placed after it)."""
    return [pod(f"batch-{i}", 0.9, 1) for i in range(count)]


def _pods_per_claim(result: SchedulingResult, what: str) -> Counter[tuple[str, int]]:
    """(zone or capacity type of the claim's first offering, its pod count), counted."""
    return Counter((getattr(c.offerings[0], what), len(c.pods)) for c in result.new_claims)


def _web_per_zone(result: SchedulingResult) -> Counter[str]:
    """Web pods placed on new claims per zone."""
    return Counter(c.offerings[0].zone for c in result.new_claims for p in c.pods if "/web-" in p)


def test_a_zone_outside_the_nodepool_zones_gets_no_share_of_the_node_limit() -> None:
    """The NodePool launches into zones a and b only, at most two 4-cpu nodes. Four web pods
    spread with maxSkew 1 and four 0.9-cpu batch pods; zone-c counts for the spread through an
    existing full node running two web pods. The claims are opened together in a and b, the web
    pods spread first (a=b=c=2), the batch pods fill the rest: 2 + 2 * 0.9 = 3.8 cpu each,
    nothing waits. Counting zone-c as a third claim would ask the limit for three nodes and open
    claims one at a time: the first takes one web pod (b at 0) and three batch pods (3.7 cpu),
    so zone-a never takes a second web pod and one waits on the limit."""
    pool = NodePool(
        "default",
        requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-a", "zone-b")),),
        limits=NodePoolLimits(nodes=2),
    )
    spread = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=WEB)

    result = run(
        _web(4, spread) + _batch(4),
        [instance_type("m", 4, 16, 0.1)],
        [pool],
        nodes=(_zone_c_node(),),
    )

    assert result.unschedulable == ()
    assert _web_per_zone(result) == {"zone-a": 2, "zone-b": 2}
    assert _pods_per_claim(result, "zone") == {("zone-a", 4): 1, ("zone-b", 4): 1}


def test_a_zone_offered_only_as_an_excluded_capacity_type_gets_no_share_of_the_node_limit() -> None:
    """The NodePool launches on-demand only, at most two 4-cpu nodes; the type is on-demand in
    zones a and b, spot in every zone, so zone-c (spot only) is out of the pool's reach, yet
    counts for the spread through an existing full node running two web pods. As above: four
    web pods (maxSkew 1) and four 0.9-cpu batch pods go 2 + 2 to a claim in each of a and b
    (3.8 cpu), none waiting; zone-c as a third claim would ask the limit for three nodes and
    leave a web pod waiting."""
    shape = Resources(4000, 16 * GIB, 110)
    offers = [Offering(z, "on-demand", 0.1) for z in ("zone-a", "zone-b")]
    offers += [Offering(z, "spot", 0.05) for z in ("zone-a", "zone-b", "zone-c")]
    pool = NodePool(
        "default",
        requirements=(Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),),
        limits=NodePoolLimits(nodes=2),
    )
    spread = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=WEB)

    result = run(
        _web(4, spread) + _batch(4),
        [InstanceType("m", shape, shape, {}, tuple(offers))],
        [pool],
        nodes=(_zone_c_node(),),
    )

    assert result.unschedulable == ()
    assert _web_per_zone(result) == {"zone-a": 2, "zone-b": 2}
    assert _pods_per_claim(result, "zone") == {("zone-a", 4): 1, ("zone-b", 4): 1}


def test_a_zone_spread_after_a_hostname_spread_still_fills_one_claim_per_zone() -> None:
    """A hostname spread (maxSkew 10, never binding for six pods) listed before a zone spread
    (maxSkew 1): the zone spread still opens a claim per zone filled together, two pods each
    (a=b=c=2), not six claims of one pod opened one at a time."""
    pods = _web(
        6,
        TopologySpreadConstraint(LABEL_HOSTNAME, 10, label_selector=WEB),
        TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=WEB),
    )

    result = run(pods, [instance_type("m", 8, 16, 0.1)])

    assert result.unschedulable == ()
    assert _pods_per_claim(result, "zone") == {("zone-a", 2): 1, ("zone-b", 2): 1, ("zone-c", 2): 1}


def test_a_capacity_type_spread_fills_one_claim_per_capacity_type() -> None:
    """Four pods spread over capacity types with maxSkew 1: one on-demand and one spot claim
    opened together, two pods each, not four claims of one pod opened one at a time."""
    spread = TopologySpreadConstraint(LABEL_CAPACITY_TYPE, 1, label_selector=WEB)

    result = run(_web(4, spread), [instance_type("m", 4, 8, 0.1, spot_price=0.05)])

    assert result.unschedulable == ()
    assert _pods_per_claim(result, "capacity_type") == {("on-demand", 2): 1, ("spot", 2): 1}
