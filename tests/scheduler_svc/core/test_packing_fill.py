"""How the greedy pass fills one new claim (``Packing._fill``): the head pod, then each class's
proportional slice of what waits (the rounding carried over to the next class), then
largest-first. The integer program's second opinion is off (``max_pods=0``) so the greedy
claims are what is seen. Types, all in zone-a: t 4 cpu 16 GiB $0.10; big 8 cpu 32 GiB $0.40
($0.05 per cpu); small 2 cpu 8 GiB $0.12 ($0.06 per cpu)."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    NodePool,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.requirements import LABEL_HOSTNAME, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, instance_type, pod

T = instance_type("t", 4, 16, 0.10, zones=("zone-a",))
BIG = instance_type("big", 8, 32, 0.40, zones=("zone-a",))
SMALL = instance_type("small", 2, 8, 0.12, zones=("zone-a",))


def _pods(name: str, count: int, cpu: float, memory_gib: float) -> list[Pod]:
    return [pod(f"{name}-{i}", cpu, memory_gib) for i in range(count)]


def _solve(pods: list[Pod], types: list[InstanceType]) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (NodePool("default"),), tuple(types))
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert result.unschedulable == ()
    return result


def _cost(result: SchedulingResult) -> float:
    return sum(c.offerings[0].price_per_hour for c in result.new_claims)


def test_each_claim_takes_every_class_slice_with_the_rounding_carried() -> None:
    """Sixteen 1-cpu pods on t (four nodes' worth): after its head, each claim takes its
    share of every class, the fraction of a pod left over carried from class to class, so
    the one-pod classes b and c and the two d's go one per claim (with three a's each) in
    the order their carried shares reach a whole pod: b, d, c, d."""
    pods = (
        _pods("a", 12, 1, 2) + _pods("b", 1, 1, 1.5) + _pods("c", 1, 1, 1) + _pods("d", 2, 1, 0.5)
    )
    result = _solve(pods, [T])
    kinds = [
        Counter(key.split("/")[1].split("-")[0] for key in claim.pods)
        for claim in result.new_claims
    ]
    assert kinds == [{"a": 3, "b": 1}, {"a": 3, "d": 1}, {"a": 3, "c": 1}, {"a": 3, "d": 1}]


def test_slices_go_on_past_a_class_the_head_used_up() -> None:
    """Two 2-cpu pods, eight 1-cpu/3 GiB and fourteen 750m/5 GiB pods on t: each claim's
    head may use up its class, and the slices of the later classes still mix cpu-heavy and
    memory-heavy pods: seven t nodes, not eight."""
    pods = _pods("a", 2, 2, 2) + _pods("b", 8, 1, 3) + _pods("c", 14, 0.75, 5)
    result = _solve(pods, [T])
    assert len(result.new_claims) == 7
    assert _cost(result) == pytest.approx(0.7)


def test_every_placed_slice_counts_toward_the_next_target() -> None:
    """Two 2-cpu, ten 750m/1 GiB, ten 750m/5 GiB and nine 500m/2 GiB pods on big and small:
    the pods a claim's slices placed count as placed, so the target is chosen again for
    what is left as it shrinks ($1.32 in all, not $1.40)."""
    pods = (
        _pods("a", 2, 2, 2)
        + _pods("b", 10, 0.75, 1)
        + _pods("c", 10, 0.75, 5)
        + _pods("d", 9, 0.5, 2)
    )
    result = _solve(pods, [BIG, SMALL])
    assert _cost(result) == pytest.approx(1.32)


def test_a_class_short_of_minvalues_leaves_room_for_smaller_ones() -> None:
    """NodePool minValues 2 instance types, s1 (2 cpu) and s3 (4 cpu). The first claim holds
    a 1.5-cpu pod; the 1-cpu pod would leave only s3 holding it, but a 500m pod keeps s1
    and s3 and joins it (pods differing only in requests are tried each on its own): two
    s1 nodes, not three."""
    it = "node.kubernetes.io/instance-type"
    instance_types = [
        instance_type("s1", 2, 8, 0.10, zones=("zone-a",)),
        instance_type("s3", 4, 16, 0.18, zones=("zone-a",)),
    ]
    pool = NodePool("default", requirements=(Requirement(it, Operator.IN, ("s1", "s3"), 2),))
    pods = _pods("h", 1, 1.5, 1) + _pods("x", 1, 1, 1) + _pods("y", 3, 0.5, 1)
    problem = SchedulingInput(tuple(pods), (pool,), tuple(instance_types))
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert result.unschedulable == ()
    assert sorted(sorted(c.pods) for c in result.new_claims) == [
        ["default/h-0", "default/y-0"],
        ["default/x-0", "default/y-1", "default/y-2"],
    ]
    assert _cost(result) == pytest.approx(0.2)


def test_a_claim_with_room_left_for_exactly_the_smallest_pod_takes_it() -> None:
    """A 2-cpu pod, a 1-cpu/2 GiB and a 1-cpu/1 GiB pod: after the first two the claim has
    exactly the smallest request's 1 cpu left, and the last pod still joins: one t node."""
    result = _solve(_pods("h", 1, 2, 1) + _pods("a", 1, 1, 2) + _pods("b", 1, 1, 1), [T])
    [claim] = result.new_claims
    assert sorted(claim.pods) == ["default/a-0", "default/b-0", "default/h-0"]


def test_pods_placed_after_the_slices_count_toward_the_next_target() -> None:
    """Two 1-cpu/3 GiB, six 750m/512 MiB, fourteen 1.5-cpu and seven 250m pods on big and
    small: what each claim's largest-first pass placed counts too, so the target is chosen
    again as what is left shrinks ($1.56 in all, not $1.68)."""
    pods = (
        _pods("a", 2, 1, 3)
        + _pods("b", 6, 0.75, 0.5)
        + _pods("c", 14, 1.5, 1)
        + _pods("d", 7, 0.25, 1)
    )
    result = _solve(pods, [BIG, SMALL])
    assert _cost(result) == pytest.approx(1.56)


def test_a_class_refused_by_a_claim_does_not_narrow_it() -> None:
    """t costs $0.10 in zone-a, $0.20 in zone-b. Six 1-cpu app=h pods open claims in
    zone-a; two pods selecting zone-b, with hostname anti-affinity against app=h, are
    refused by them (after their zone was checked) and leave them in zone-a: only their
    own claim is in zone-b."""
    shape = Resources(4000, 16 * GIB, 110, 20 * GIB)
    zoned = InstanceType(
        "t",
        shape,
        shape,
        {"kubernetes.io/arch": "amd64"},
        (Offering("zone-a", "on-demand", 0.10), Offering("zone-b", "on-demand", 0.20)),
    )
    away = (PodAffinityTerm(LABEL_HOSTNAME, LabelSelector.of({"app": "h"})),)
    pods = [pod(f"h-{i}", 1, 1, labels={"app": "h"}) for i in range(6)] + [
        pod(f"z-{i}", 0.5, 1, node_selector={LABEL_ZONE: "zone-b"}, pod_anti_affinity=away)
        for i in range(2)
    ]
    result = _solve(pods, [zoned])
    zones = {tuple(sorted(c.pods)): c.offerings[0].zone for c in result.new_claims}
    assert zones == {
        ("default/h-0", "default/h-1", "default/h-2", "default/h-3"): "zone-a",
        ("default/h-4", "default/h-5"): "zone-a",
        ("default/z-0", "default/z-1"): "zone-b",
    }
    assert _cost(result) == pytest.approx(0.4)
