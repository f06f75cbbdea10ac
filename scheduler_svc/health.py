"""`/healthz`, `/readyz` and `/metrics` over HTTP (aiohttp), on the ports the settings name.

/healthz answers 200 while the event loop runs and no controller has crashed (a wedged loop
answers nothing; a crashed controller answers 503 naming it until the process exits).
/readyz answers 200 once the mirror is synced (leader or standby: a standby is ready to
take over) and the actuator answers its gRPC health check as SERVING; 503 otherwise, with the
reason (`kubectl describe pod` then shows why the scheduler cannot work). Liveness never depends
on the actuator: restarting the scheduler would not bring the actuator back.
/metrics serves the scheduler's own registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger("scheduler_svc")


class HttpEndpoint:
    """One aiohttp server on `host:port` (port 0: any free port; see `.port` after start)."""

    def __init__(self, app: web.Application, *, host: str, port: int) -> None:
        self._runner = web.AppRunner(app, access_log=None)
        self._host = host
        self._requested_port = port
        self.port = 0

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._requested_port)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only through the server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._requested_port

    async def close(self) -> None:
        await self._runner.cleanup()


class ActuatorProbe:
    """Whether the actuator is serving, checked in the background every `interval_seconds`:
    /readyz reads the last answer at once rather than waiting on another service."""

    def __init__(
        self,
        is_serving: Callable[[], Awaitable[bool]],
        *,
        address: str,
        interval_seconds: float = 5.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._is_serving = is_serving
        self._address = address
        self._interval_seconds = interval_seconds
        self._sleep = sleep
        self.reason: str | None = f"actuator at {address} not checked yet"

    async def check(self) -> None:
        """Ask once and keep the answer (the client's check never raises)."""
        serving = await self._is_serving()
        self.reason = None if serving else f"actuator at {self._address} is not serving"

    async def run(self) -> None:
        """Check until cancelled."""
        while True:
            await self.check()
            await self._sleep(self._interval_seconds)


class CrashWatch:
    """Notices the first long-lived task (a controller's loop, the watches) that ends with an
    exception: `reason` names it for /healthz and `crashed` wakes the service to exit.

    Controllers catch what one object or one call can throw; what escapes is a bug, and the
    process exits so Kubernetes restarts it with its own backoff (decision 0008)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.error: BaseException | None = None
        self.crashed = asyncio.Event()

    def watch(self, task: asyncio.Task[object]) -> None:
        task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[object]) -> None:
        if task.cancelled() or task.exception() is None or self.error is not None:
            return
        self.error = task.exception()
        self.reason = f"controller {task.get_name()} crashed: {self.error!r}"
        log.error("controller_crashed", controller=task.get_name(), exc_info=self.error)
        self.crashed.set()


def health_app(
    is_ready: Callable[[], str | None], is_alive: Callable[[], str | None] = lambda: None
) -> web.Application:
    """`is_ready` and `is_alive` return None when ready (alive), else the reason it is not."""

    async def healthz(_: web.Request) -> web.Response:
        reason = is_alive()
        if reason is not None:
            return web.Response(status=503, text=reason)
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        reason = is_ready()
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=reason)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(registry: CollectorRegistry) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app
