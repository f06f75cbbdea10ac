"""The EC2NodeClass's fleet allocation strategy through the actuator over gRPC, honoured by the
EC2 emulator over HTTP: on-demand `lowest-price` launches EC2's cheapest override whatever the
claim's order, the default `prioritized` the claim's first; spot `capacity-optimized-prioritized`
follows the claim's order where the default picks by price; a strategy EC2 does not take for
that capacity type is refused naming the field."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest

from daiku.actuator.v1 import actuator_pb2 as pb
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import launch_request, node_class, offering

if TYPE_CHECKING:
    from daiku.actuator.v1 import actuator_pb2_grpc

    Stub = actuator_pb2_grpc.ActuatorAsyncStub

ZONE = "us-east-1a"


async def launched_type(stub: Stub, name: str, capacity_type: str, **strategies: str) -> str:
    # The claim lists the dearer type first: only a price-ordered strategy picks m5.large.
    response = await stub.LaunchNodeClaim(
        launch_request(
            name,
            offering("m5.2xlarge", ZONE, capacity_type),
            offering("m5.large", ZONE, capacity_type),
            node_class=node_class(**strategies),
        )
    )
    return response.instance_type


async def test_on_demand_strategy_is_passed_and_honoured(stub: Stub, emulator: Ec2Emulator) -> None:
    assert await launched_type(stub, "od-default", "on-demand") == "m5.2xlarge"
    cheapest = await launched_type(
        stub, "od-lowest", "on-demand", on_demand_allocation_strategy="lowest-price"
    )
    assert cheapest == "m5.large"


async def test_spot_strategy_is_passed_and_honoured(stub: Stub, emulator: Ec2Emulator) -> None:
    assert await launched_type(stub, "spot-default", "spot") == "m5.large"
    prioritized = await launched_type(
        stub, "spot-prio", "spot", spot_allocation_strategy="capacity-optimized-prioritized"
    )
    assert prioritized == "m5.2xlarge"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("spot_allocation_strategy", "prioritized"),
        ("on_demand_allocation_strategy", "capacity-optimized"),
    ],
)
async def test_a_strategy_ec2_does_not_take_is_refused(stub: Stub, field: str, value: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.ResolveNodeClass(
            pb.ResolveNodeClassRequest(node_class=node_class(**{field: value}))
        )
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"node_class.{field}" in (raised.value.details() or "")
