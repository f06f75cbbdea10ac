"""The EC2NodeClass's fleetAllocationStrategy on the stack: the scheduler passes it through the
actuator to CreateFleet, where the EC2 emulator orders the pools by it."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Stack
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def test_the_class_strategy_reaches_create_fleet(stack: Stack) -> None:
    await stack.apply_pool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        ]
    )
    await stack.store.patch(
        "ec2nodeclasses",
        "default",
        {"spec": {"fleetAllocationStrategy": {"spot": "capacity-optimized-prioritized"}}},
    )
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="1", memory="1Gi", prefix="strategy")

    def launched() -> list[str]:
        return [c.allocation_strategy for c in stack.cloud.ec2.create_fleet_calls if c.instance_ids]

    assert await until(launched) == ["capacity-optimized-prioritized"]


async def test_a_strategy_ec2_does_not_take_is_refused_by_the_crd(stack: Stack) -> None:
    await stack.apply_pool()
    with pytest.raises(Exception, match="fleetAllocationStrategy"):
        await stack.store.patch(
            "ec2nodeclasses",
            "default",
            {"spec": {"fleetAllocationStrategy": {"onDemand": "capacity-optimized"}}},
        )
