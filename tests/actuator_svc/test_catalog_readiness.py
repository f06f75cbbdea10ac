"""The actuator says SERVING only once its catalog is loaded (issue 17 item 5): a failed prefetch
leaves it NOT_SERVING while it retries with backoff in the background."""

from __future__ import annotations

import grpc

# grpcio-health-checking ships no type hints (as in tests/scheduler_svc/test_health.py).
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.errors import CloudUnavailableError
from actuator_svc.service import SERVICE_NAME, ActuatorSettings, serve
from tests.polling import SteppedSleep, until


async def _status(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
        return int(response.status)


async def test_serving_waits_for_the_catalog_and_the_prefetch_retries_with_backoff() -> None:
    """With EC2 failing the first two catalog fetches, health is NOT_SERVING after start and
    after the first retry (delays 1 s then 2 s), and SERVING once a retry loads the catalog."""
    cloud = FakeCloud(
        instance_types={"m5.large": {"InstanceType": "m5.large"}},
        zones={"m5.large": ["us-east-1a"]},
        on_demand_prices={"m5.large": 0.096},
    )
    slow = CloudUnavailableError("DescribeInstanceTypes", "RequestTimeout", "deadline exceeded")
    cloud.fail_next("describe_instance_types", slow)
    cloud.fail_next("describe_instance_types", slow)
    sleep = SteppedSleep()
    settings = ActuatorSettings(listen="127.0.0.1:0")
    async with serve(settings, cloud=cloud, grace_seconds=0.1, sleep=sleep) as running:
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        assert await _status(running.address) == not_serving
        await until(lambda: sleep.delays == [1.0])
        sleep.step()  # the first retry fails again
        await until(lambda: sleep.delays == [1.0, 2.0])
        assert await _status(running.address) == not_serving
        sleep.step()  # the second retry loads the catalog
        serving = health_pb2.HealthCheckResponse.SERVING
        await until(lambda: _is(running.address, serving), timeout_seconds=10)
        assert sleep.delays == [1.0, 2.0]


async def _is(address: str, status: int) -> bool:
    return await _status(address) == status
