"""`daiku viewer`: a live terminal view of the cluster's nodes, in the spirit of eks-node-viewer.

Nodes grouped by NodePool with cpu and memory bars (requested against allocatable), instance
type, capacity type, zone, age and price, the cluster's $/hour, pods waiting for a node with
their reason, and NodeClaims in flight. Pods, Nodes and NodeClaims are mirrored by the
scheduler's own list-then-watch loop (`ResourceWatch`), so the screen changes when the cluster
does, with no polling of the API server; a redraw every few seconds only ages the AGE column.
Prices come from the bundled catalog, as `daiku plan`'s do.

Textual draws the screen (`q` quits); `--once` prints one screen with rich and exits, for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, ClassVar

import structlog
import typer
from rich.console import Console
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from daiku_cli import exit_codes
from daiku_cli.main import DaikuCommand, app
from daiku_cli.viewer_model import ClusterView, PriceBook, cluster_view
from daiku_cli.viewer_render import render_view
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.client import KubeApiClient, new_api_client
from scheduler_svc.kube.resources import NODE_CLAIMS, NODES, PODS, Resource
from scheduler_svc.kube.watch import ResourceWatch, run_watches
from scheduler_svc.kube.writer import utc_now
from scheduler_svc.state.cluster import ClusterMirror

VIEWED: tuple[Resource, ...] = (PODS, NODES, NODE_CLAIMS)
# Changes arriving together (a burst of pod events) are drawn once, this long after the first.
REDRAW_DELAY_SECONDS = 0.1
AGE_TICK_SECONDS = 5.0
# --once gives up when the cluster cannot be listed in this long (the watch retries forever).
ONCE_TIMEOUT_SECONDS = 30.0


def bundled_prices() -> PriceBook:
    """(instance type, zone, capacity type) -> USD per hour from the bundled catalog."""
    from daiku_cli.catalog import bundled_catalog_document  # slow: only when viewing

    return {
        (item["name"], offering["zone"], offering["capacityType"]): float(offering["price"])
        for item in bundled_catalog_document()["instanceTypes"]
        for offering in item["offerings"]
    }


class ClusterFeed:
    """Pods, Nodes and NodeClaims kept current by one watch each (whole objects: no trimming)."""

    def __init__(self, api: KubeApiClient) -> None:
        self.mirror = ClusterMirror(VIEWED, transforms={})
        self._watches = [ResourceWatch(api, resource, self.mirror.handle) for resource in VIEWED]

    async def run(self) -> None:
        await run_watches(self._watches)

    def view(self, prices: PriceBook, now: datetime) -> ClusterView:
        return cluster_view(
            pods=self.mirror.objects(PODS).values(),
            nodes=self.mirror.objects(NODES).values(),
            claims=self.mirror.objects(NODE_CLAIMS).values(),
            prices=prices,
            now=now,
        )


class ViewerApp(App[None]):
    """The screen: one Static holding `render_view`'s renderable, redrawn on every change."""

    TITLE = "daiku viewer"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "quit")]

    def __init__(
        self, feed: ClusterFeed, prices: PriceBook, clock: Callable[[], datetime] = utc_now
    ) -> None:
        super().__init__()
        self.feed = feed
        self.prices = prices
        self.clock = clock
        self.view: ClusterView | None = None
        self.redraws = 0
        self._redraw_pending = False

    def compose(self) -> ComposeResult:
        yield Static("listing the cluster…", id="view")
        yield Footer()

    def on_mount(self) -> None:
        self.feed.mirror.add_listener(lambda _change: self._changed())
        self.run_worker(self.feed.run(), exclusive=True, exit_on_error=False)
        self.set_interval(AGE_TICK_SECONDS, self.redraw)

    def _changed(self) -> None:
        if not self._redraw_pending:
            self._redraw_pending = True
            self.set_timer(REDRAW_DELAY_SECONDS, self.redraw)

    def redraw(self) -> None:
        self._redraw_pending = False
        # NodeClaims join when listed; a cluster without daiku's CRDs still shows its nodes.
        if not (self.feed.mirror.is_synced(PODS) and self.feed.mirror.is_synced(NODES)):
            return
        self.view = self.feed.view(self.prices, self.clock())
        self.query_one("#view", Static).update(render_view(self.view))
        self.redraws += 1


async def _print_once(api: KubeApiClient, prices: PriceBook, console: Console) -> None:
    feed = ClusterFeed(api)
    watching = asyncio.create_task(feed.run())
    try:
        await asyncio.wait_for(feed.mirror.wait_synced(), ONCE_TIMEOUT_SECONDS)
    except TimeoutError as error:
        raise OSError(
            f"no complete list of pods, nodes and NodeClaims in {ONCE_TIMEOUT_SECONDS:.0f} s"
        ) from error
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    console.print(render_view(feed.view(prices, utc_now())))


async def _run(kubeconfig: Path, once: bool) -> None:
    prices = bundled_prices()
    api = await new_api_client(kubeconfig=kubeconfig, in_cluster=False, context=None)
    try:
        if once:
            await _print_once(api, prices, Console())
        else:
            await ViewerApp(ClusterFeed(api), prices).run_async()
    finally:
        await api.close()


@app.command(name="viewer", cls=DaikuCommand)
def viewer(
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube)."),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="print one screen and exit (no terminal UI)")
    ] = False,
) -> None:
    """Watch the cluster's nodes: by NodePool, with cpu/memory bars, prices and pending pods."""
    # The screen is the terminal's; the watch loop's logs go to stderr, warnings and up only.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    path = kubeconfig or Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    try:
        asyncio.run(_run(path, once))
    except (KubeApiError, OSError, ValueError) as error:
        typer.echo(f"daiku viewer: cannot read the cluster: {error}", err=True)
        raise typer.Exit(exit_codes.FAILED) from error
