"""`/healthz`, `/readyz` and `/metrics` over HTTP (aiohttp), on the ports the settings name.

/healthz answers 200 while the event loop runs (a wedged loop answers nothing, and the probe
fails). /readyz answers 200 once the mirror is synced (leader or standby: a standby is ready to
take over), 503 before, with the reason. /metrics serves the scheduler's own registry.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


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


def health_app(is_ready: Callable[[], str | None]) -> web.Application:
    """`is_ready` returns None when ready, else the reason it is not."""

    async def healthz(_: web.Request) -> web.Response:
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
