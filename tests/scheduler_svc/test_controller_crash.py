"""A controller that crashes makes the scheduler unhealthy and ends its run, instead of leaving a
live process that does nothing (issue 13)."""

from __future__ import annotations

import asyncio
from typing import NoReturn

import aiohttp
import pytest

from scheduler_svc.actuator_client import ActuatorClient
from scheduler_svc.health import HttpEndpoint, health_app
from scheduler_svc.service import SchedulerService
from scheduler_svc.settings import load_settings


class CrashingController:
    async def run(self) -> NoReturn:
        await asyncio.sleep(0)
        raise KeyError("a bug")

    async def close(self) -> None:
        pass


class IdleController:
    async def run(self) -> NoReturn:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self) -> None:
        pass


@pytest.mark.parametrize("controller", ["provisioner", "lifecycle"])
async def test_a_crashed_controller_turns_healthz_503_and_wakes_the_service(
    controller: str,
) -> None:
    """When one leader controller's loop raises, the crash watch records it (the service's run
    then exits non-zero) and /healthz answers 503 naming the controller and the exception."""
    service = SchedulerService(load_settings(["--no-leader-elect"]))
    service.provisioner = IdleController()  # type: ignore[assignment]
    service.lifecycle = IdleController()  # type: ignore[assignment]
    setattr(service, controller, CrashingController())
    service.interruption = service.disruption = service.nodeclass_status = None
    service.options = service.options.__class__(actuator_start_wait_seconds=0.0)
    endpoint = HttpEndpoint(
        health_app(lambda: None, lambda: service.crashes.reason), host="127.0.0.1", port=0
    )
    await endpoint.start()
    async with ActuatorClient.connect("127.0.0.1:9") as actuator:
        service._actuator = actuator
        campaign = asyncio.create_task(service._campaign(), name="campaign")
        service.crashes.watch(campaign)
        try:
            async with asyncio.timeout(10):
                await service.crashes.crashed.wait()
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{endpoint.port}/healthz") as response,
            ):
                assert response.status == 503
                assert (
                    await response.text() == f"controller {controller} crashed: KeyError('a bug')"
                )
        finally:
            campaign.cancel()
            await asyncio.gather(campaign, return_exceptions=True)
            await endpoint.close()
