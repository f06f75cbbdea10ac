"""Subnets out of addresses on the stack: the only subnet of the cheapest zone has no free
address; the actuator skips it up front (no CreateFleet fails on it) and the node lands in the
next zone. The at-launch path (InsufficientFreeAddressesInSubnet, then the zone's next subnet
in the same call) is tests/actuator_svc/test_subnet_addresses.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

FULL_ZONE, NEXT_ZONE = "us-east-1a", "us-east-1b"


async def test_a_zone_whose_subnet_is_full_is_skipped_without_a_failed_call(stack: Stack) -> None:
    # On-demand prices are the same in every zone: the claim lists us-east-1a first.
    await stack.apply_pool(
        requirements=[
            {
                "key": "topology.kubernetes.io/zone",
                "operator": "In",
                "values": [FULL_ZONE, NEXT_ZONE],
            },
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ]
    )
    stack.cloud.ec2.exhaust_subnet(stack.cloud.ec2.subnet_ids[FULL_ZONE])
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="1", memory="1Gi", prefix="addresses")

    async def launched() -> dict[str, Any] | None:
        claims = await stack.objects("nodeclaims")
        done = [c for c in claims if "topology.kubernetes.io/zone" in c["metadata"]["labels"]]
        return done[0] if done else None

    claim = await until(launched)
    assert claim["metadata"]["labels"]["topology.kubernetes.io/zone"] == NEXT_ZONE
    codes = [code for call in stack.cloud.ec2.create_fleet_calls for _, code in call.errors]
    assert "InsufficientFreeAddressesInSubnet" not in codes
