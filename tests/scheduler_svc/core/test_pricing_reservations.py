"""Capacity reservations in the target choice (``Pricing._scan_targets``,
``Pricing._take_reservation``, ``Pricing._close_claim``): a closed claim takes an instance
of the first reservation with room among its offerings; a reservation with none left no
longer prices its type (at a reservation's price, ten-millionth of on-demand), so the claims
after it target what they will really run on, another reservation, or nothing."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_svc.core import (
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    Requirement,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import MinValuesPolicy, RelaxedMinValues
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE
from scheduler_svc.core.reservations import CapacityReservation, with_reserved_offerings
from tests.scheduler_svc.core.builders import instance_type, pod

ZONE = "zone-a"
FAMILY = "karpenter.k8s.aws/instance-family"
RESERVED_ONLY = (Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("reserved",)),)
NO_PRICE = "NodePool reserved: no instance type that holds the pod has a priced offering"


def _reservation(rid: str, type_name: str, count: int) -> CapacityReservation:
    return CapacityReservation(rid, type_name, ZONE, available=count, total=count)


def _taken(result: SchedulingResult) -> list[tuple[str, str, int]]:
    """(type, reservation taken or capacity type, pods) of each claim's first offering."""
    return [
        (
            c.instance_type,
            c.offerings[0].capacity_reservation_id or c.offerings[0].capacity_type,
            len(c.pods),
        )
        for c in result.new_claims
    ]


# Two 4-cpu types with reservations: a's one instance is the cheaper (a costs $0.20 on-demand,
# b $0.30), b has two. A pod of 3 cpu fills a node of either.
TWO_RESERVATIONS = with_reserved_offerings(
    (
        instance_type("a", 4, 16, 0.20, zones=(ZONE,)),
        instance_type("b", 4, 16, 0.30, zones=(ZONE,)),
    ),
    [_reservation("cr-a", "a", 1), _reservation("cr-b", "b", 2)],
)


def _reserved_pool(pods: Sequence[Pod]) -> SchedulingResult:
    return solve(
        SchedulingInput(tuple(pods), (NodePool("reserved", RESERVED_ONLY),), TWO_RESERVATIONS)
    )


def test_a_full_reservation_leaves_the_next_claim_to_another_reservation() -> None:
    """A reserved-only NodePool, three 3-cpu pods: the first claim takes a's one instance;
    a no longer has a price the pool may pay, and the next two claims go to b's two."""
    result = _reserved_pool([pod(f"p-{i}", 3) for i in range(3)])
    assert _taken(result) == [("a", "cr-a", 1), ("b", "cr-b", 1), ("b", "cr-b", 1)]
    assert result.unschedulable == ()


def test_a_pod_past_every_reservation_is_refused_not_given_a_full_one() -> None:
    """A fourth pod finds both reservations used up and nothing else the reserved-only pool
    may launch: it stays pending with that reason, rather than getting a fourth claim listing
    reservations that have no instance left."""
    result = _reserved_pool([pod(f"p-{i}", 3) for i in range(4)])
    assert _taken(result) == [("a", "cr-a", 1), ("b", "cr-b", 1), ("b", "cr-b", 1)]
    assert [(u.pod, u.reason) for u in result.unschedulable] == [("default/p-3", NO_PRICE)]


# A 2-cpu type r with one reserved instance, and a 16-cpu type big whose spot price ($0.30,
# ten 1.5-cpu pods) is $0.03 a pod where r's ($0.09, one pod) is $0.09.
R_AND_BIG = with_reserved_offerings(
    (
        instance_type("r", 2, 8, 0.10, spot_price=0.09, zones=(ZONE,)),
        instance_type("big", 16, 64, 0.80, spot_price=0.30, zones=(ZONE,)),
    ),
    [_reservation("cr-r", "r", 1)],
)


def test_targets_are_chosen_again_once_the_reservation_is_used_up() -> None:
    """Twenty 1.5-cpu pods: the first claim takes r's reserved instance (one pod). With it
    gone, r is priced at spot, $0.09 a pod, and the other nineteen go to big spot nodes (ten
    and nine), not to more r nodes targeted at the reserved price. The integer program is
    off (``max_pods=0``) so the greedy claims are what is seen."""
    problem = SchedulingInput(
        tuple(pod(f"p-{i:02}", 1.5) for i in range(20)), (NodePool("default"),), R_AND_BIG
    )
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert _taken(result) == [("r", "cr-r", 1), ("big", "spot", 10), ("big", "spot", 9)]


def test_a_claim_of_a_limited_pool_takes_the_reservation() -> None:
    """A NodePool with a cpu limit (100 cores, far from reached): the claims count against
    the limit and still take reserved instances as they close. Eight 1.5-cpu pods: r's
    reserved instance takes one, a big spot node the other seven (the greedy claims: the
    integer program, off here, may put all eight on the big node for the same price)."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=100_000))
    problem = SchedulingInput(tuple(pod(f"p-{i}", 1.5) for i in range(8)), (pool,), R_AND_BIG)
    result = solve(problem, packing=PackingSettings(max_pods=0))
    assert _taken(result) == [("r", "cr-r", 1), ("big", "spot", 7)]


def test_best_effort_minvalues_fall_back_when_the_reservation_keeping_them_is_used_up() -> None:
    """A reserved-only NodePool limiting cpu and asking for two instance families, under
    BestEffort. The 1-cpu / 6 GiB pods fit a.large (8 GiB) and c.xlarge, not b.large (4 GiB).
    The first claim targets c.xlarge (its reservation the cheapest) and takes its only
    instance. For the second pod a.large's claim would keep one family, and the target that
    kept two, c.xlarge, has no reservation left to price it: the claim still targets
    a.large, with minValues lowered to one, instead of the pod being refused as having no
    priced type."""
    types = [
        instance_type("a.large", 2, 8, 0.10, labels={FAMILY: "a"}, zones=(ZONE,)),
        instance_type("b.large", 2, 4, 0.11, labels={FAMILY: "b"}, zones=(ZONE,)),
        instance_type("c.xlarge", 4, 16, 0.05, labels={FAMILY: "c"}, zones=(ZONE,)),
    ]
    reservations = [
        _reservation("cr-a", "a.large", 5),
        _reservation("cr-b", "b.large", 5),
        _reservation("cr-c", "c.xlarge", 1),
    ]
    pool = NodePool(
        "default",
        requirements=(Requirement(FAMILY, Operator.IN, ("a", "b", "c"), 2), *RESERVED_ONLY),
        limits=NodePoolLimits(cpu_millis=100_000),
    )
    problem = SchedulingInput(
        tuple(pod(f"x-{i}", 1, 6) for i in range(2)),
        (pool,),
        with_reserved_offerings(types, reservations),
        min_values_policy=MinValuesPolicy.BEST_EFFORT,
    )
    result = solve(problem)
    assert result.unschedulable == ()
    assert _taken(result) == [("c.xlarge", "cr-c", 1), ("a.large", "cr-a", 1)]
    assert result.new_claims[1].min_values_relaxed == (RelaxedMinValues(FAMILY, 2, 1),)
