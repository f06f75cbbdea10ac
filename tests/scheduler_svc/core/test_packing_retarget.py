"""New claims' target is chosen again as what waits shrinks (``Packing._provision_pool``: a new
demand epoch once a tenth of the NodePool's pending pods is placed), here for claims opened
together for a zone spread (``_fill_set`` counts what they placed). big: 8 cpu $0.40
($0.05 per cpu), small: 2 cpu $0.12 ($0.06 per cpu), in zones a and b. The integer
program's second opinion is off (``max_pods=0``) so the greedy claims are what is seen."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler_svc.core import NodePool, Pod, SchedulingInput, SchedulingResult, solve
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import LabelSelector, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod

ZONES = ("zone-a", "zone-b")
BIG = instance_type("big", 8, 32, 0.40, zones=ZONES)
SMALL = instance_type("small", 2, 8, 0.12, zones=ZONES)


def _solve(spread: int, others: list[Pod]) -> SchedulingResult:
    """``spread`` 1-cpu pods spread over the zones (maxSkew 1), then ``others``."""
    constraint = TopologySpreadConstraint(
        LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "web"})
    )
    pods = [
        pod(f"web-{i}", 1, 2, labels={"app": "web"}, topology_spread=(constraint,))
        for i in range(spread)
    ]
    problem = SchedulingInput(tuple(pods + others), (NodePool("default"),), (BIG, SMALL))
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert result.unschedulable == ()
    return result


def _cost(result: SchedulingResult) -> float:
    return sum(c.offerings[0].price_per_hour for c in result.new_claims)


def test_the_tail_of_a_zone_spread_goes_on_small_nodes() -> None:
    """Twelve spread pods, six 1-cpu and four 500m pods (20 cpu): two big zone claims take
    18 of the 22 pods, every class counted; the four 1-cpu pods left are re-targeted and go
    on two smalls ($1.04), not on a third big ($1.32)."""
    others = [pod(f"b-{i}", 1, 1) for i in range(6)] + [pod(f"c-{i}", 0.5, 1) for i in range(4)]
    result = _solve(12, others)
    assert Counter(c.instance_type for c in result.new_claims) == {"big": 2, "small": 2}
    assert _cost(result) == pytest.approx(1.04)


def test_every_class_a_zone_slice_placed_counts_toward_the_next_target() -> None:
    """Seventeen spread pods, two 750m pods and one 500m pod (19 cpu): so many small nodes
    cost less than three bigs, so the first zone claims are smalls; with their pods and the
    slices of every class counted, the 15 cpu left are re-targeted to two bigs ($1.04 in
    all), not more smalls ($1.24)."""
    others = [pod(f"b-{i}", 0.75, 1) for i in range(2)] + [pod("c-0", 0.5, 1)]
    result = _solve(17, others)
    assert Counter(c.instance_type for c in result.new_claims) == {"small": 2, "big": 2}
    assert _cost(result) == pytest.approx(1.04)
