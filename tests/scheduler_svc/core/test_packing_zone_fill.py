"""How the greedy pass fills the claims it opens together for a zone spread (one per zone,
``Packing._fill_set``): one spread pod per claim, then each class's proportional slice of
what waits (the rounding carried over to the next class), then largest-first. The integer
program's second opinion is off (``max_pods=0``) so the greedy claims are what is seen.

One type, t: 4 cpu, 16 GiB, $0.10, offered in zones a and b."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler_svc.core import NodePool, Pod, SchedulingInput, SchedulingResult, solve
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import LabelSelector, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod

T = instance_type("t", 4, 16, 0.10, zones=("zone-a", "zone-b"))
GREEDY_ONLY = PackingSettings(max_pods=0)


def _spread(count: int, cpu: float, memory_gib: float) -> list[Pod]:
    """``count`` pods named spread-<i>, spread over zones a and b with maxSkew 1."""
    spread = TopologySpreadConstraint(
        LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "spread"})
    )
    return [
        pod(f"spread-{i}", cpu, memory_gib, labels={"app": "spread"}, topology_spread=(spread,))
        for i in range(count)
    ]


def _plain(name: str, count: int, cpu: float, memory_gib: float) -> list[Pod]:
    return [pod(f"{name}-{i}", cpu, memory_gib) for i in range(count)]


def _solve(pods: list[Pod]) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (NodePool("default"),), (T,))
    result = solve(problem, packing=GREEDY_ONLY)
    assert result.unschedulable == ()
    return result


def _kinds(result: SchedulingResult, index: int) -> Counter[str]:
    """Pods of the ``index``-th new claim, counted by name prefix (spread, b, c, ...)."""
    return Counter(key.split("/")[1].rsplit("-", 1)[0] for key in result.new_claims[index].pods)


def test_zone_claims_take_a_slice_of_memory_heavy_pods_while_filling() -> None:
    """Twelve 1-cpu spread pods and six 250m/5 GiB pods: the zone claims each take a slice
    of the memory-heavy pods before filling up with spread pods, so four t nodes hold all
    (filling them with spread pods first leaves the memory-heavy ones a fifth node)."""
    result = _solve(_spread(12, 1, 1) + _plain("b", 6, 0.25, 5))
    assert len(result.new_claims) == 4
    assert {c.instance_type for c in result.new_claims} == {"t"}
    assert sum(c.offerings[0].price_per_hour for c in result.new_claims) == pytest.approx(0.4)
    assert _kinds(result, 1) == {"spread": 3, "b": 2}


def test_slices_go_on_past_a_class_left_with_no_pods() -> None:
    """Two spread pods (1 cpu) go one per zone claim with nothing left of their class; the
    slices of the next classes (twelve 500m pods, six 250m/4 GiB pods) still fill the two
    claims together, so three t nodes hold everything, not four."""
    result = _solve(_spread(2, 1, 1) + _plain("b", 12, 0.5, 0.5) + _plain("c", 6, 0.25, 4))
    assert len(result.new_claims) == 3
    assert sum(c.offerings[0].price_per_hour for c in result.new_claims) == pytest.approx(0.3)
    assert _kinds(result, 1)["c"] == 3


def test_each_class_slice_carries_the_rounding_to_the_next() -> None:
    """Sixteen 1-cpu pods make four t nodes of demand, so the two zone claims take half of
    each class: five of the ten spread pods left after one per claim (three and two, the
    claims then hold four and three), none of the one-pod class b (half a pod, carried),
    then one-pod class c's carried half plus its own half makes one pod, and d's one finds
    no room left. The first claims are then zone a's four spread pods and zone b's three
    with c's pod."""
    pods = (
        _spread(12, 1, 2) + _plain("b", 1, 1, 1.5) + _plain("c", 1, 1, 1) + _plain("d", 2, 1, 0.5)
    )
    result = _solve(pods)
    assert [c.offerings[0].zone for c in result.new_claims[:2]] == ["zone-a", "zone-b"]
    assert _kinds(result, 0) == {"spread": 4}
    assert _kinds(result, 1) == {"spread": 3, "c": 1}
