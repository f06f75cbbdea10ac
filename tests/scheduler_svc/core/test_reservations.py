"""Reserved capacity in the pure core: reserved offerings priced as already paid for and
chosen over spot, each reservation handed to no more claims than it has room for, and Capacity
Block nodes drained 40 minutes before the block ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler_svc.core import solve
from scheduler_svc.core.model import (
    InstanceType,
    NodeClaimPlan,
    NodePool,
    Offering,
    OfferingOption,
    Pod,
    Resources,
    SchedulingInput,
)
from scheduler_svc.core.reservations import (
    CapacityReservation,
    ClaimInReservation,
    assign_reservations,
    claims_to_drain,
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
