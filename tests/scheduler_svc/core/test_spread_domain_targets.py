"""A zone the NodePool offers only through other instance types than the cheapest still gets a
claim for a zone spread (as Karpenter's claim pinned to a zone keeps the types offered there):
left empty, it held every other zone at maxSkew and the rest of the spread pods waited for ever,
reported as "cannot be met"."""

from __future__ import annotations

from collections import Counter

from scheduler_svc.core import NodePool, Pod, SchedulingInput, solve
from scheduler_svc.core.model import LabelSelector, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, zone_of

SMALL = instance_type("small", 2, 8, 0.10, zones=("zone-a", "zone-b"))
BIG = instance_type("big", 16, 64, 1.60, zones=("zone-a", "zone-b", "zone-c"))


def _spread_pods(count: int) -> list[Pod]:
    spread = TopologySpreadConstraint(
        LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "web"})
    )
    return [
        pod(f"web-{i}", 1, 2, labels={"app": "web"}, topology_spread=(spread,))
        for i in range(count)
    ]


def test_a_zone_only_a_dearer_type_reaches_gets_its_share_of_the_spread() -> None:
    """Six 1-cpu pods over zones a, b (small and big offered) and c (big only): two per zone,
    zone c's on a big node, zones a and b on smalls; none left waiting."""
    pods = _spread_pods(6)
    result = solve(SchedulingInput(tuple(pods), (NodePool("default"),), (SMALL, BIG)))
    assert result.unschedulable == ()
    assert Counter(zone_of(result, p.key) for p in pods) == {
        "zone-a": 2,
        "zone-b": 2,
        "zone-c": 2,
    }
    zone_c = {c.instance_type for c in result.new_claims if c.offerings[0].zone == "zone-c"}
    assert zone_c == {"big"}
    elsewhere = {c.instance_type for c in result.new_claims if c.offerings[0].zone != "zone-c"}
    assert elsewhere == {"small"}


def test_a_zone_no_type_reaches_is_no_domain() -> None:
    """Without the big type, zone c is offered by nothing the pool launches: it is no domain,
    and the six pods split three and three over zones a and b."""
    pods = _spread_pods(6)
    result = solve(SchedulingInput(tuple(pods), (NodePool("default"),), (SMALL,)))
    assert result.unschedulable == ()
    assert Counter(zone_of(result, p.key) for p in pods) == {"zone-a": 3, "zone-b": 3}
