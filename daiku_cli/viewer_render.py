"""`daiku viewer`'s screen drawn from a `ClusterView` with rich (pure: renderables, no terminal).

The same renderable is what the Textual app shows and what `daiku viewer --once` prints.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from daiku_cli.viewer_model import HOURS_PER_MONTH, ClusterView, NodeLine

BAR_WIDTH = 12
GIB = 1 << 30
_MAX_LISTED = 10


def render_view(view: ClusterView) -> RenderableType:
    parts: list[RenderableType] = [_headline(view)]
    parts += [_pool_table(pool, lines) for pool, lines in view.pools]
    if view.pending:
        parts.append(_pending_table(view))
    if view.in_flight:
        parts.append(_in_flight_table(view))
    return Group(*parts)


def usage_bar(requested: int, allocatable: int) -> Text:
    """``█████░░░░░░░  41%``; over 100 % (overcommitted) is drawn full and red."""
    share = requested / allocatable if allocatable > 0 else 0.0
    filled = min(BAR_WIDTH, round(share * BAR_WIDTH))
    style = "red" if share > 1 else "yellow" if share > 0.85 else "green"
    bar = Text()
    bar.append("█" * filled, style=style)
    bar.append("░" * (BAR_WIDTH - filled), style="dim")
    bar.append(f" {share:4.0%}")
    return bar


def format_age(seconds: float | None) -> str:
    """Ages as kubectl prints them: 45s, 12m, 5h, 3d."""
    if seconds is None:
        return "?"
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size * (2 if unit == "m" else 1):
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _headline(view: ClusterView) -> Text:
    cost = view.hourly_cost
    return Text.assemble(
        (f"{view.nodes} nodes", "bold"),
        f"  ${cost:.4f}/hour  ${cost * HOURS_PER_MONTH:,.2f}/month",
        "  |  ",
        (f"{len(view.pending)} pending pods", "bold red" if view.pending else ""),
        "  |  ",
        f"{len(view.in_flight)} NodeClaims in flight",
    )


def _pool_table(pool: str, lines: tuple[NodeLine, ...]) -> Table:
    cost = sum(line.price_per_hour or 0.0 for line in lines if not line.deleting)
    table = Table(
        title=f"NodePool {pool}: {len(lines)} nodes, ${cost:.4f}/hour",
        title_justify="left",
        expand=True,
    )
    for column in ("node", "type", "capacity", "zone", "age", "$/hour", "cpu", "memory", "pods"):
        table.add_column(column, no_wrap=True)
    for line in lines:
        table.add_row(
            Text(line.name, style="strike" if line.deleting else ""),
            line.instance_type,
            line.capacity_type,
            line.zone,
            format_age(line.age_seconds),
            "?" if line.price_per_hour is None else f"{line.price_per_hour:.4f}",
            usage_bar(line.cpu_requested_millis, line.cpu_allocatable_millis),
            usage_bar(line.memory_requested_bytes, line.memory_allocatable_bytes),
            str(line.pods) + ("" if line.ready else " NotReady"),
        )
    return table


def _pending_table(view: ClusterView) -> Table:
    table = Table(title=f"{len(view.pending)} pending pods", title_justify="left", expand=True)
    table.add_column("pod", no_wrap=True)
    table.add_column("why it waits")
    for pod in view.pending[:_MAX_LISTED]:
        table.add_row(pod.key, pod.reason)
    if len(view.pending) > _MAX_LISTED:
        table.add_row(f"… {len(view.pending) - _MAX_LISTED} more", "")
    return table


def _in_flight_table(view: ClusterView) -> Table:
    table = Table(
        title=f"{len(view.in_flight)} NodeClaims in flight", title_justify="left", expand=True
    )
    for column in ("nodeclaim", "nodepool", "type", "stage"):
        table.add_column(column, no_wrap=True)
    for claim in view.in_flight[:_MAX_LISTED]:
        table.add_row(claim.name, claim.nodepool, claim.instance_type or "?", claim.stage)
    return table
