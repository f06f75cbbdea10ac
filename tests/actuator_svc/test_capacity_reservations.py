"""Reserved capacity through the actuator over real gRPC, against the EC2 emulator over HTTP:
ResolveNodeClass lists the selected reservations, a reserved offering launches into its
reservation (the free count goes down, termination gives it back), and a full reservation
falls back to the claim's next offering in the same LaunchNodeClaim call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import grpc
import pytest

from actuator_svc.service import RunningActuator
from daiku.actuator.v1 import actuator_pb2 as pb
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import launch_request, node_class, offering

if TYPE_CHECKING:
    from daiku.actuator.v1 import actuator_pb2_grpc

    Stub = actuator_pb2_grpc.ActuatorAsyncStub

ZONE = "us-east-1a"


def reserved(
    instance_type: str, reservation_id: str, reservation_type: str = "default"
) -> pb.Offering:
    return pb.Offering(
        instance_type=instance_type,
        zone=ZONE,
        capacity_type="reserved",
        capacity_reservation_id=reservation_id,
        capacity_reservation_type=reservation_type,
    )


def reserving_class(*terms: pb.CapacityReservationSelectorTerm) -> pb.NodeClass:
    return node_class(capacity_reservation_selector_terms=list(terms))


async def _available(stub: Stub, reservation_id: str) -> int:
    answer = await stub.ResolveNodeClass(
        pb.ResolveNodeClassRequest(
            node_class=reserving_class(pb.CapacityReservationSelectorTerm(id=reservation_id))
        )
    )
    (found,) = [r for r in answer.capacity_reservations if r.id == reservation_id]
    return found.available_instance_count


async def test_resolve_lists_reservations_by_id_and_by_tags(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    by_tag = emulator.create_capacity_reservation(
        instance_type="m5.xlarge", zone=ZONE, count=3, tags={"team": "ml"}
    )
    other = emulator.create_capacity_reservation(
        instance_type="m5.xlarge", zone=ZONE, count=1, tags={"team": "web"}
    )
    answer = await stub.ResolveNodeClass(
        pb.ResolveNodeClassRequest(
            node_class=reserving_class(pb.CapacityReservationSelectorTerm(tags={"team": "ml"}))
        )
    )
    ids = [r.id for r in answer.capacity_reservations]
    assert by_tag.id in ids
    assert other.id not in ids
    (found,) = [r for r in answer.capacity_reservations if r.id == by_tag.id]
    assert (found.instance_type, found.zone, found.reservation_type) == (
        "m5.xlarge",
        ZONE,
        "default",
    )
    assert (found.available_instance_count, found.total_instance_count) == (3, 3)
    assert found.state == "active"
    assert not found.HasField("end_time")
    assert found.owner_id == emulator.account_id


async def test_reserved_launch_takes_a_slot_and_termination_gives_it_back(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    reservation = emulator.create_capacity_reservation(instance_type="c5.large", zone=ZONE, count=1)
    klass = reserving_class(pb.CapacityReservationSelectorTerm(id=reservation.id))
    response = await stub.LaunchNodeClaim(
        launch_request(
            "reserved-1",
            reserved("c5.large", reservation.id),
            offering("c5.large", ZONE, "on-demand"),
            node_class=klass,
        )
    )
    assert response.capacity_type == "reserved"
    assert response.capacity_reservation_id == reservation.id
    assert response.capacity_reservation_type == "default"
    assert 0 < response.price < 0.001  # already paid for: on-demand / 10^7
    assert await _available(stub, reservation.id) == 0
    claim = await stub.GetNodeClaim(pb.GetNodeClaimRequest(nodeclaim_name="reserved-1"))
    assert claim.nodeclaim.capacity_type == "reserved"
    assert claim.nodeclaim.capacity_reservation_id == reservation.id
    await stub.TerminateNodeClaim(pb.TerminateNodeClaimRequest(nodeclaim_name="reserved-1"))
    assert await _available(stub, reservation.id) == 1


async def test_a_full_reservation_falls_back_to_on_demand_in_one_call(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    reservation = emulator.create_capacity_reservation(
        instance_type="c5.xlarge", zone=ZONE, count=1
    )
    klass = reserving_class(pb.CapacityReservationSelectorTerm(id=reservation.id))
    first = await stub.LaunchNodeClaim(
        launch_request("full-1", reserved("c5.xlarge", reservation.id), node_class=klass)
    )
    assert first.capacity_type == "reserved"
    emulator.clear_create_fleet_calls()
    second = await stub.LaunchNodeClaim(
        launch_request(
            "full-2",
            reserved("c5.xlarge", reservation.id),
            offering("c5.xlarge", ZONE, "on-demand"),
            node_class=klass,
        )
    )
    assert second.capacity_type == "on-demand"
    assert not second.capacity_reservation_id
    assert [e.error_code for a in second.attempts for e in a.errors] == [
        "ReservationCapacityExceeded"
    ]
    gap = second.attempts[1].start_time.ToDatetime() - second.attempts[0].end_time.ToDatetime()
    assert gap < timedelta(seconds=1)  # the next CreateFleet went out at once
    calls = emulator.create_fleet_calls
    assert [c.capacity_type for c in calls] == ["on-demand", "on-demand"]


async def test_capacity_block_launches_as_capacity_block_and_expiring_blocks_show(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    now = datetime.now(UTC)
    block = emulator.create_capacity_reservation(
        instance_type="m5.2xlarge",
        zone=ZONE,
        count=2,
        reservation_type="capacity-block",
        end_date=now + timedelta(hours=5),
    )
    ending = emulator.create_capacity_reservation(
        instance_type="m5.2xlarge",
        zone=ZONE,
        count=2,
        reservation_type="capacity-block",
        end_date=now + timedelta(minutes=20),
        tags={"block": "ending"},
    )
    emulator.clear_create_fleet_calls()
    response = await stub.LaunchNodeClaim(
        launch_request(
            "block-1",
            reserved("m5.2xlarge", block.id, "capacity-block"),
            node_class=reserving_class(pb.CapacityReservationSelectorTerm(id=block.id)),
        )
    )
    assert response.capacity_reservation_type == "capacity-block"
    assert [c.capacity_type for c in emulator.create_fleet_calls] == ["capacity-block"]
    answer = await stub.ResolveNodeClass(
        pb.ResolveNodeClassRequest(
            node_class=reserving_class(
                pb.CapacityReservationSelectorTerm(id=block.id),
                pb.CapacityReservationSelectorTerm(tags={"block": "ending"}),
            )
        )
    )
    states = {r.id: (r.state, r.reservation_type) for r in answer.capacity_reservations}
    assert states == {
        block.id: ("active", "capacity-block"),
        ending.id: ("expiring", "capacity-block"),
    }
    # EC2 is reclaiming the ending block: a launch into it fails like an ICE.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.LaunchNodeClaim(
            launch_request(
                "block-2",
                reserved("m5.2xlarge", ending.id, "capacity-block"),
                node_class=reserving_class(pb.CapacityReservationSelectorTerm(id=ending.id)),
            )
        )
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    ("term", "field"),
    [
        (pb.CapacityReservationSelectorTerm(), "capacity_reservation_selector_terms[0]"),
        (
            pb.CapacityReservationSelectorTerm(id="cr-1", tags={"a": "b"}),
            "capacity_reservation_selector_terms[0]",
        ),
        (
            pb.CapacityReservationSelectorTerm(id="i-123"),
            "capacity_reservation_selector_terms[0].id",
        ),
    ],
)
async def test_bad_reservation_terms_are_refused_with_the_field(
    stub: Stub, term: pb.CapacityReservationSelectorTerm, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.ResolveNodeClass(pb.ResolveNodeClassRequest(node_class=reserving_class(term)))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"node_class.{field}" in (raised.value.details() or "")


async def test_a_reserved_offering_without_its_reservation_is_refused(
    stub: Stub, actuator: RunningActuator
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.LaunchNodeClaim(
            launch_request("no-reservation", offering("m5.large", ZONE, "reserved"))
        )
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "offerings[0].capacity_reservation_id" in (raised.value.details() or "")
