"""The scheduler's readiness follows the actuator's gRPC health check over a real socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest

# grpcio-health-checking ships no type hints, and types-grpcio-health-checking's HealthStub has
# no Check method (it would need a cast at every call); the packages import it the same way.
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from scheduler_svc.actuator_client import SERVICE_NAME, ActuatorClient
from scheduler_svc.health import ActuatorProbe, HttpEndpoint, health_app


@pytest.fixture
async def actuator_health() -> AsyncIterator[tuple[str, health.aio.HealthServicer]]:
    """A gRPC server on loopback serving only the standard health service."""
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(grace=None)


async def readyz(port: int) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, await response.text()


async def test_readyz_is_503_with_the_reason_while_the_actuator_is_not_serving(
    actuator_health: tuple[str, health.aio.HealthServicer],
) -> None:
    """/readyz answers 503 naming the actuator before the first check and while the actuator
    says NOT_SERVING, and 200 while it says SERVING; /healthz stays 200 throughout."""
    address, servicer = actuator_health
    async with ActuatorClient.connect(address) as actuator:
        probe = ActuatorProbe(actuator.is_serving, address=address)
        endpoint = HttpEndpoint(health_app(lambda: probe.reason), host="127.0.0.1", port=0)
        await endpoint.start()
        try:
            status, text = await readyz(endpoint.port)
            assert (status, text) == (503, f"actuator at {address} not checked yet")
            await probe.check()
            assert await readyz(endpoint.port) == (200, "ok")
            await servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
            await probe.check()
            assert await readyz(endpoint.port) == (503, f"actuator at {address} is not serving")
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{endpoint.port}/healthz") as response,
            ):
                assert response.status == 200
        finally:
            await endpoint.close()


async def test_the_probe_rechecks_every_interval(
    actuator_health: tuple[str, health.aio.HealthServicer],
) -> None:
    """Running, the probe asks again after each interval, so a recovered actuator turns the
    scheduler ready without a restart."""
    address, servicer = actuator_health
    await servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
    intervals: list[float] = []
    checked = asyncio.Event()

    async def next_interval(seconds: float) -> None:
        intervals.append(seconds)
        checked.set()
        await asyncio.sleep(0)

    async with ActuatorClient.connect(address) as actuator:
        probe = ActuatorProbe(
            actuator.is_serving, address=address, interval_seconds=7.0, sleep=next_interval
        )
        task = asyncio.create_task(probe.run())
        try:
            async with asyncio.timeout(10):
                await checked.wait()
            assert probe.reason == f"actuator at {address} is not serving"
            await servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
            async with asyncio.timeout(10):
                while probe.reason is not None:
                    checked.clear()
                    await checked.wait()
            assert intervals[0] == 7.0
        finally:
            task.cancel()
