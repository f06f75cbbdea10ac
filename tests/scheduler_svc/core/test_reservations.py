"""Reserved capacity in the pure core: reserved offerings priced as already paid for and
chosen over spot, each reservation handed to no more claims than it has room for (counted by
the solver as it plans, and across solves), the room left by nodes and claims in flight, and
Capacity Block nodes drained 40 minutes before the block ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler_svc.core import solve
from scheduler_svc.core.model import (
    InstanceType,
    Node,
    NodeClaimPlan,
    NodePool,
    Offering,
    OfferingOption,
    Pod,
    Resources,
    SchedulingInput,
    SchedulingResult,
)
from scheduler_svc.core.reservations import (
    LABEL_RESERVATION_ID,
    CapacityReservation,
    ClaimInReservation,
    assign_reservations,
    claims_to_drain,
    reservation_room,
    with_reserved_offerings,
)

GIB = 1024**3
ZONE = "us-east-1a"


def instance_type(name: str, cpu: int, on_demand: float, spot: float) -> InstanceType:
    resources = Resources(cpu_millis=cpu * 1000, memory_bytes=cpu * 4 * GIB, pods=110)
    return InstanceType(
        name=name,
        capacity=resources,
        allocatable=resources,
        labels={"kubernetes.io/arch": "amd64"},
        offerings=(Offering(ZONE, "on-demand", on_demand), Offering(ZONE, "spot", spot)),
    )


CATALOG = (
    instance_type("m5.large", 2, 0.096, 0.04),
    instance_type("m5.xlarge", 4, 0.192, 0.08),
)


def pods(count: int, cpu_millis: int = 1500) -> tuple[Pod, ...]:
    return tuple(Pod(f"p{i}", containers=(Resources(cpu_millis=cpu_millis),)) for i in range(count))


def test_a_reservation_becomes_a_reserved_offering_priced_as_already_paid_for() -> None:
    reservation = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=2, total=2)
    types = {t.name: t for t in with_reserved_offerings(CATALOG, [reservation])}
    reserved = [o for o in types["m5.xlarge"].offerings if o.capacity_type == "reserved"]
    assert len(reserved) == 1
    assert reserved[0].capacity_reservation_id == "cr-1"
    assert reserved[0].price_per_hour == 0.192 / 10_000_000
    assert reserved[0].available
    assert types["m5.large"] == CATALOG[0]


def test_full_or_expiring_reservations_are_unavailable_and_foreign_zones_dropped() -> None:
    full = CapacityReservation("cr-full", "m5.large", ZONE, available=0, total=1)
    expiring = CapacityReservation(
        "cr-block", "m5.large", ZONE, "capacity-block", available=1, state="expiring"
    )
    elsewhere = CapacityReservation("cr-far", "m5.large", "us-east-1f", available=3)
    (m5_large, _) = with_reserved_offerings(CATALOG, [full, expiring, elsewhere])
    reserved = {o.capacity_reservation_id: o.available for o in m5_large.offerings[2:]}
    assert reserved == {"cr-block": False, "cr-full": False}


def test_the_solver_prefers_the_reservation_over_cheaper_spot() -> None:
    reservation = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=1, total=1)
    result = solve(
        SchedulingInput(
            pods=pods(2),
            nodepools=(NodePool("default"),),
            instance_types=with_reserved_offerings(CATALOG, [reservation]),
        )
    )
    (claim,) = result.new_claims
    assert claim.offerings[0].capacity_type == "reserved"
    assert claim.offerings[0].capacity_reservation_id == "cr-1"
    # The fallbacks follow: spot then on-demand of what fits.
    assert {o.capacity_type for o in claim.offerings[1:]} == {"spot", "on-demand"}


def test_without_reserved_in_the_pool_requirements_no_reservation_is_used() -> None:
    from scheduler_svc.core.requirements import Operator, Requirement

    reservation = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=1, total=1)
    pool = NodePool(
        "spot-only",
        requirements=(Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),),
    )
    result = solve(
        SchedulingInput(
            pods=pods(2),
            nodepools=(pool,),
            instance_types=with_reserved_offerings(CATALOG, [reservation]),
        )
    )
    assert all(o.capacity_type == "spot" for c in result.new_claims for o in c.offerings)


# A small type worth reserving and a big one whose spot price is half the small one's per cpu.
SMALL_AND_BIG = (
    instance_type("small", 2, on_demand=0.10, spot=0.09),
    instance_type("big", 8, on_demand=0.40, spot=0.16),
)


def _reserved_claims(result: SchedulingResult, reservation_id: str) -> int:
    return sum(
        1 for c in result.new_claims if c.offerings[0].capacity_reservation_id == reservation_id
    )


def _solve_with_room(pod_count: int, room: int, cpu_millis: int = 1000) -> SchedulingResult:
    reservation = CapacityReservation("cr-small", "small", ZONE, available=room, total=room)
    return solve(
        SchedulingInput(
            pods=pods(pod_count, cpu_millis),
            nodepools=(NodePool("default"),),
            instance_types=with_reserved_offerings(SMALL_AND_BIG, [reservation]),
        )
    )


def test_the_solver_buys_no_more_reserved_nodes_than_the_reservation_has_room_for() -> None:
    # Room for one small node: it takes two pods; the other seven go to one big spot node, the
    # cheapest per cpu. A solver that did not count gave the reservation to five small claims
    # (each sized for a free node), four of which then paid the small type's spot price.
    result = _solve_with_room(9, room=1)
    assert _reserved_claims(result, "cr-small") == 1
    (reserved,) = (c for c in result.new_claims if c.offerings[0].capacity_type == "reserved")
    assert len(reserved.pods) == 2
    others = [c for c in result.new_claims if c is not reserved]
    assert [c.offerings[0].instance_type for c in others] == ["big"]
    assert all(o.capacity_type != "reserved" for c in others for o in c.offerings)
    assert sum(c.offerings[0].price_per_hour for c in result.new_claims) < 0.16 + 1e-6


def test_room_left_over_is_not_handed_out_and_no_claim_exceeds_it() -> None:
    # However the pods fall, the reservation is first on at most `room` claims; with more room
    # than claims, every small claim gets it.
    for pod_count in (1, 2, 3, 5, 8, 9, 13):
        for room in range(4):
            for cpu_millis in (500, 1000, 1500):
                result = _solve_with_room(pod_count, room, cpu_millis)
                assert _reserved_claims(result, "cr-small") <= room, (pod_count, room, cpu_millis)
                assert not result.unschedulable
    assert _reserved_claims(_solve_with_room(4, room=3), "cr-small") == 2


def test_a_reservation_without_room_is_not_offered() -> None:
    result = _solve_with_room(2, room=0)
    assert all(o.capacity_type != "reserved" for c in result.new_claims for o in c.offerings)


def test_room_is_capped_by_what_nodes_and_claims_in_flight_already_hold() -> None:
    # The status still says 3 free (resolved before the last launch); two of the four
    # instances are this cluster's (a node and a claim in flight): two are left.
    reservation = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=3, total=4)
    nodes = (
        Node("node-a", labels={LABEL_RESERVATION_ID: "cr-1"}),
        Node("claim-b", labels={LABEL_RESERVATION_ID: "cr-1"}, is_in_flight=True),
        Node("node-c"),
    )
    assert reservation_room([reservation], nodes) == {"cr-1": 2}
    # Someone else's instances lower only the free count, which then wins.
    busy = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=1, total=4)
    assert reservation_room([busy], ()) == {"cr-1": 1}
    expiring = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=3, state="expiring")
    assert reservation_room([expiring], ()) == {"cr-1": 0}


def test_the_room_is_written_on_the_reserved_offering() -> None:
    reservation = CapacityReservation("cr-1", "m5.xlarge", ZONE, available=3, total=4)
    (_, xlarge) = with_reserved_offerings(CATALOG, [reservation], room={"cr-1": 1})
    (offering,) = (o for o in xlarge.offerings if o.capacity_type == "reserved")
    assert offering.reservation_capacity == 1
    assert offering.available
    (_, full) = with_reserved_offerings(CATALOG, [reservation], room={"cr-1": 0})
    assert not any(o.available for o in full.offerings if o.capacity_type == "reserved")


def _plan(*offerings: OfferingOption) -> NodeClaimPlan:
    return NodeClaimPlan("default", (), ("p",), Resources(), offerings)


RESERVED = OfferingOption("m5.xlarge", ZONE, "reserved", 0.0000000192, "cr-1", "default")
SPOT = OfferingOption("m5.xlarge", ZONE, "spot", 0.08)


def test_a_reservation_goes_to_no_more_claims_than_it_has_room_for() -> None:
    plans = assign_reservations([_plan(RESERVED, SPOT)] * 3, {"cr-1": 2})
    assert [p.offerings[0].capacity_type for p in plans] == ["reserved", "reserved", "spot"]
    assert plans[2].offerings == (SPOT,)


def test_a_claim_with_only_a_full_reservation_keeps_it_for_the_actuator_to_report() -> None:
    (plan,) = assign_reservations([_plan(RESERVED)], {"cr-1": 0})
    assert plan.offerings == (RESERVED,)


def test_capacity_block_nodes_drain_forty_minutes_before_the_end() -> None:
    end = datetime(2026, 11, 26, 18, 0, tzinfo=UTC)
    block = CapacityReservation("cr-b", "m5.large", ZONE, "capacity-block", end_time=end)
    odcr = CapacityReservation("cr-o", "m5.large", ZONE, end_time=end)
    claims = [ClaimInReservation("a", "cr-b"), ClaimInReservation("b", "cr-o")]
    by_id = {r.id: r for r in (block, odcr)}
    assert claims_to_drain(claims, by_id, end - timedelta(minutes=41)) == ()
    due = claims_to_drain(claims, by_id, end - timedelta(minutes=40))
    assert [name for name, _ in due] == ["a"]
    assert "cr-b ends at 2026-11-26T18:00:00+00:00" in due[0][1]
