"""The actuator dies mid-launch (CreateFleet done in EC2, its answer not yet back) and comes
back on the same port: the scheduler relaunches the claim, the actuator finds the instance the
first launch made, and the cloud-event stream reconnects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from actuator_svc.cloud.ec2 import AwsEndpoints, RetryPolicy
from actuator_svc.service import ActuatorSettings, RunningActuator, serve
from localcloud.cluster import LocalCloud
from scheduler_svc.lifecycle.interruption import InterruptionSettings
from scheduler_svc.service import SchedulerService, ServiceOptions
from tests.e2e.conftest import (
    FAST_TERMINATION,
    RunningScheduler,
    Stack,
    demo_object,
    free_port,
    local_cloud_with_crds,
)
from tests.e2e.test_termination import events_about, running
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "content-encoding", "host"})


class HoldingProxy:
    """HTTP proxy to EC2 that, while `hold` is set, forwards CreateFleet at once but keeps its
    answer until `release` is set (the instance exists; the caller has not heard of it)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.hold = False
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    async def __aenter__(self) -> HoldingProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as answer:
            payload = await answer.read()
            status = answer.status
            out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS}
        if self.hold and b"Action=CreateFleet" in body:
            self.held.set()
            await self.release.wait()
        return web.Response(status=status, body=payload, headers=out_headers)


def actuator_settings(cloud: LocalCloud, proxy: HoldingProxy, port: int) -> ActuatorSettings:
    endpoint = cloud.ec2.endpoint_url
    return ActuatorSettings(
        listen=f"127.0.0.1:{port}",
        cluster_name=cloud.cluster_name,
        endpoints=AwsEndpoints(ec2=proxy.url, sqs=endpoint, pricing=endpoint),
        interruption_queue=cloud.ec2.interruption_queue_name,
        interruption_wait_seconds=1,
        retry=RetryPolicy(max_attempts=3, base_seconds=0.01, max_seconds=0.05),
    )


@contextlib.asynccontextmanager
async def cloud_and_proxy(tmp_path: Any) -> AsyncIterator[tuple[LocalCloud, HoldingProxy]]:
    async with (
        local_cloud_with_crds(tmp_path) as cloud,
        HoldingProxy(cloud.ec2.endpoint_url) as proxy,
    ):
        yield cloud, proxy


def claim_instances(stack: Stack, claim_name: str) -> list[dict[str, Any]]:
    reservations = stack.ec2_client().describe_instances(
        Filters=[
            {"Name": "tag:daiku.dev/nodeclaim", "Values": [claim_name]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


async def test_an_actuator_killed_mid_launch_and_restarted_makes_no_duplicate(
    tmp_path: Any,
) -> None:
    """The actuator is stopped while CreateFleet's answer is in flight (the instance exists)
    and restarted on the same port: the claim completes on that one instance (no second one),
    and a spot interruption sent afterwards still reaches the scheduler (stream reconnected)."""
    port = free_port()
    async with cloud_and_proxy(tmp_path) as (cloud, proxy):
        first_exit = contextlib.AsyncExitStack()
        first: RunningActuator = await first_exit.enter_async_context(
            serve(actuator_settings(cloud, proxy, port), grace_seconds=0)
        )
        stack = Stack(cloud, first, tmp_path)
        pool = demo_object("nodepool.yaml")
        pool["spec"]["template"]["spec"]["requirements"] = [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
        ]
        await stack.store.create("ec2nodeclasses", demo_object("ec2nodeclass.yaml"))
        await stack.store.create("nodepools", pool)
        service = SchedulerService(
            stack.settings(),
            options=ServiceOptions(
                lifecycle=FAST_TERMINATION,
                interruption=InterruptionSettings(
                    reconnect_base_seconds=0.1, reconnect_max_seconds=0.5
                ),
            ),
        )
        stop = asyncio.Event()
        lines: list[str] = []
        scheduler = RunningScheduler(
            service, stop, asyncio.create_task(service.run(stop, on_ready=lines.append)), lines
        )
        try:
            await until(lambda: bool(lines), timeout_seconds=20)
            proxy.hold = True
            await stack.create_pods(1, cpu="500m", memory="512Mi")
            await asyncio.wait_for(proxy.held.wait(), timeout=20)
            [claim] = await stack.objects("nodeclaims")
            name = claim["metadata"]["name"]
            assert len(claim_instances(stack, name)) == 1  # EC2 made it; nobody was told

            await first_exit.aclose()  # the actuator dies with the launch unanswered
            proxy.hold = False
            proxy.release.set()
            [claim] = await stack.objects("nodeclaims")
            assert "Launched" not in {
                c["type"] for c in claim.get("status", {}).get("conditions", [])
            }

            async with serve(actuator_settings(cloud, proxy, port), grace_seconds=0) as second:
                stack.actuator = second
                await until(lambda: running(stack, ["app-0"]), timeout_seconds=40)
                assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [name]
                [instance] = claim_instances(stack, name)
                assert len(stack.running_instances()) == 1

                cloud.ec2.send_spot_interruption(instance["InstanceId"])

                async def interrupted() -> bool:
                    return "Interrupted" in [r for r, _ in await events_about(stack, name)]

                await until(interrupted, timeout_seconds=20)
                await scheduler.halt()
        finally:
            if not scheduler.task.done():
                await scheduler.halt()
            await first_exit.aclose()
