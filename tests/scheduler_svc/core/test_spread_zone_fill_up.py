"""Zone-spread claims filled together (``Packing._distribute``): once every zone's claim is
full the remaining pods open the next set of claims, and the zone a lone pod goes to is priced
on the capacity types its NodePool allows. t holds two 1.5-cpu pods (4 CPUs)."""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    NodePool,
    Operator,
    Pod,
    Requirement,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, priced_type, run

_SPREAD = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "x"}))


def _spread_pods(count: int, cpu: float) -> list[Pod]:
    return [
        pod(f"x-{i}", cpu, 1, labels={"app": "x"}, topology_spread=(_SPREAD,)) for i in range(count)
    ]


def test_spread_pods_past_full_zone_claims_open_more_claims() -> None:
    """Nine pods over three zones, two per node: the zones take 3 pods each, so each zone gets
    two claims (2 + 1 pods), and every pod is placed."""
    result = run(_spread_pods(9, 1.5), [instance_type("t", 4, 16, 0.10)])
    assert result.unschedulable == ()
    per_zone: dict[str, int] = {}
    for claim in result.new_claims:
        [zone] = {o.zone for o in claim.offerings}
        per_zone[zone] = per_zone.get(zone, 0) + len(claim.pods)
        assert len(claim.pods) <= 2
    assert per_zone == {"zone-a": 3, "zone-b": 3, "zone-c": 3}
    assert len(result.new_claims) == 6


def test_a_lone_spread_pod_is_priced_on_the_capacity_types_its_pool_allows() -> None:
    """An on-demand NodePool: zone-a's cheap spot offering does not count, so the lone spread
    pod goes to zone-b, where on-demand costs $0.10 (zone-a's on-demand is $0.20)."""
    t = priced_type(
        "t", ("zone-a", "spot", 0.01), ("zone-a", "on-demand", 0.20), ("zone-b", "on-demand", 0.10)
    )
    on_demand = NodePool(
        "default", requirements=(Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),)
    )
    result = run(_spread_pods(1, 1), [t], [on_demand])
    [claim] = result.new_claims
    assert [(o.zone, o.capacity_type) for o in claim.offerings] == [("zone-b", "on-demand")]
