"""`daiku up`'s price book waits for the actuator to say SERVING, i.e. for its catalog, instead of
asking ListInstanceTypes while a slow EC2 is still being retried (issue 17 item 5)."""

from __future__ import annotations

import asyncio
from typing import Any

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.errors import CloudUnavailableError
from actuator_svc.service import ActuatorSettings, serve
from daiku_cli.up_stack import price_book
from tests.actuator_svc.test_launcher import SHAPE
from tests.polling import SteppedSleep, until


class SlowEc2(FakeCloud):
    """DescribeInstanceTypes fails once, then answers only when `back` is set."""

    def __init__(self, **seed: Any) -> None:
        super().__init__(**seed)
        self.describe_calls = 0
        self.back = asyncio.Event()

    async def describe_instance_types(self) -> dict[str, dict[str, Any]]:
        self.describe_calls += 1
        if self.describe_calls == 1:
            raise CloudUnavailableError("DescribeInstanceTypes", "RequestTimeout", "slow")
        await self.back.wait()
        return await super().describe_instance_types()


async def test_price_book_waits_for_the_catalog_past_its_list_deadline() -> None:
    """With the actuator's catalog still loading for longer than the list's 1 s deadline, the
    price book neither fails nor asks early; once the catalog loads it returns its prices."""
    cloud = SlowEc2(
        instance_types={"m5.large": {"InstanceType": "m5.large", **SHAPE}},
        zones={"m5.large": ["us-east-1a"]},
        on_demand_prices={"m5.large": 0.096},
    )
    sleep = SteppedSleep()
    settings = ActuatorSettings(listen="127.0.0.1:0")
    async with serve(settings, cloud=cloud, grace_seconds=0.1, sleep=sleep) as running:
        book = asyncio.create_task(price_book(running.address, timeout_seconds=1.0))
        await until(lambda: sleep.delays == [1.0])
        sleep.step()  # the actuator's retry now waits on the slow EC2
        await until(lambda: cloud.describe_calls == 2)
        # Longer than the list deadline: an early ListInstanceTypes would have failed by now.
        done, _ = await asyncio.wait({book}, timeout=1.5)
        assert not done
        cloud.back.set()
        prices = await asyncio.wait_for(book, timeout=10)
        assert prices == {("m5.large", "us-east-1a", "on-demand"): 0.096}
        assert cloud.describe_calls == 2
