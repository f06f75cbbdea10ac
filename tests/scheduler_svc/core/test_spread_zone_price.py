"""New claims for pods spread over zones (``Packing._distribute``): every zone is as good for
the spread while the zones hold the same number of the pods, so the next pod goes to the zone
where its claim is cheapest, not to the first zone by name. t costs $0.20 in zone-a, $0.10 in
zone-b and $0.15 in zone-c; a pod takes 1 of its 4 CPUs."""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    Pod,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import pod, priced_type, run

T = priced_type(
    "t", ("zone-a", "on-demand", 0.20), ("zone-b", "on-demand", 0.10), ("zone-c", "on-demand", 0.15)
)
_SPREAD = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "x"}))


def _spread_pods(count: int) -> list[Pod]:
    return [
        pod(f"x-{i}", 1, 1, labels={"app": "x"}, topology_spread=(_SPREAD,)) for i in range(count)
    ]


def _pods_by_zone(count: int) -> dict[str, int]:
    result = run(_spread_pods(count), [T])
    assert not result.unschedulable
    by_zone: dict[str, int] = {}
    for claim in result.new_claims:
        [zone] = {o.zone for o in claim.offerings}
        by_zone[zone] = by_zone.get(zone, 0) + len(claim.pods)
    return by_zone


def test_a_lone_spread_pod_goes_to_the_cheapest_zone() -> None:
    """One pod: any zone meets maxSkew 1, so its claim costs $0.10 in zone-b, not $0.20."""
    assert _pods_by_zone(1) == {"zone-b": 1}


def test_two_spread_pods_take_the_two_cheapest_zones() -> None:
    """Two pods must be in two zones: zone-b and zone-c ($0.25/h), not zone-a and zone-b."""
    assert _pods_by_zone(2) == {"zone-b": 1, "zone-c": 1}


def test_the_pod_beyond_a_round_goes_to_the_cheapest_zone() -> None:
    """Four pods: one in each zone, and the fourth (skew 2-1 allowed anywhere) beside the
    first in zone-b."""
    assert _pods_by_zone(4) == {"zone-a": 1, "zone-b": 2, "zone-c": 1}
