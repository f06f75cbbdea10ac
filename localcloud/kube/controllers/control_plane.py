"""`ControlPlane`: the behaviours that make the local cluster move, started and stopped together.

    async with ControlPlane(store, ec2_endpoint_url=emulator.endpoint_url) as plane:
        ...   # pods get scheduled, instances become nodes, deployments get pods

Each behaviour can be switched off (`ControlPlaneSettings(scheduler=False, ...)`) for tests
that want a still cluster; kubelets need an EC2 endpoint (read over HTTP) or an in-process
`Ec2Emulator` (read directly) and are off without either.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import structlog

from localcloud.ec2 import Ec2Emulator
from localcloud.kube.controllers.daemonsets import DaemonSetController
from localcloud.kube.controllers.kubelets import Kubelets
from localcloud.kube.controllers.node_lifecycle import NodeLifecycleController
from localcloud.kube.controllers.scheduler import DefaultScheduler
from localcloud.kube.controllers.workloads import DeploymentController, ReplicaSetController
from localcloud.kube.store import Store

log = structlog.get_logger("localcloud.kube.controllers.control_plane")


@dataclass(frozen=True)
class ControlPlaneSettings:
    """Which behaviours run, and their timings (seconds)."""

    scheduler: bool = True
    kubelets: bool = True
    controllers: bool = True
    boot_seconds: float = 5.0
    ec2_poll_seconds: float = 1.0
    retry_debounce_seconds: float = 0.1
    container_stop_seconds: float = 0.0
    lease_renew_seconds: float = 10.0
    scheduler_events: bool = True


class ControlPlane:
    """Runs the switched-on behaviours against `store` until closed."""

    def __init__(
        self,
        store: Store,
        *,
        ec2_endpoint_url: str | None = None,
        emulator: Ec2Emulator | None = None,
        region: str = "us-east-1",
        cluster_name: str = "daiku",
        settings: ControlPlaneSettings | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or ControlPlaneSettings()
        s = self.settings
        self.scheduler = (
            DefaultScheduler(
                store, retry_debounce_seconds=s.retry_debounce_seconds, events=s.scheduler_events
            )
            if s.scheduler
            else None
        )
        self.kubelets = (
            Kubelets(
                store,
                ec2_endpoint_url=ec2_endpoint_url,
                emulator=emulator,
                region=region,
                cluster_name=cluster_name,
                boot_seconds=s.boot_seconds,
                poll_seconds=s.ec2_poll_seconds,
                container_stop_seconds=s.container_stop_seconds,
                lease_renew_seconds=s.lease_renew_seconds,
            )
            if s.kubelets and (ec2_endpoint_url or emulator)
            else None
        )
        self.deployments = DeploymentController(store) if s.controllers else None
        self.replicasets = ReplicaSetController(store) if s.controllers else None
        self.daemonsets = DaemonSetController(store) if s.controllers else None
        self.node_lifecycle = NodeLifecycleController(store) if s.controllers else None
        self._tasks: list[asyncio.Task[None]] = []

    def _runners(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        runners: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        for name, component in (
            ("scheduler", self.scheduler),
            ("kubelets", self.kubelets),
            ("deployment-controller", self.deployments),
            ("replicaset-controller", self.replicasets),
            ("daemonset-controller", self.daemonsets),
            ("node-lifecycle-controller", self.node_lifecycle),
        ):
            if component is not None:
                runners.append((name, component.run))
        return runners

    async def start(self) -> None:
        for name, run in self._runners():
            task = asyncio.create_task(self._supervise(name, run), name=f"localcloud-{name}")
            self._tasks.append(task)
        log.info("control_plane_started", behaviours=[n for n, _ in self._runners()])

    @staticmethod
    async def _supervise(name: str, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("control_plane_behaviour_failed", behaviour=name)
            raise

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if tasks:
            log.info("control_plane_stopped")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
