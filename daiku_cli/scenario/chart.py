"""A picture of a `daiku up` run: its JSON report drawn as one self-contained HTML page.

Three panels share the time axis: pods (pending, running), nodes by capacity type, and the
cluster's $/h. Launches and disruptions are marked on every panel, with the event's message on
hover. The charting library is Plotly (from PyPI); its JavaScript is written into the page, so
the page opens offline and fetches nothing from a CDN.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PENDING_SERIES = "pending pods"
RUNNING_SERIES = "running pods"
COST_SERIES = "USD per hour"
LAUNCH_SERIES = "launches"
DISRUPTION_SERIES = "disruptions"

# Event reasons drawn as launch marks (a NodeClaim launched on EC2) and as disruption marks
# (the scheduler's `Disrupting` and `Interrupted` Events, and a claim seen terminating).
LAUNCH_REASONS = frozenset({"Launched"})
DISRUPTION_REASONS = frozenset({"Disrupting", "Interrupted", "Terminating"})


def nodes_series_name(capacity_type: str) -> str:
    return f"{capacity_type} nodes"


def render_html(report: Mapping[str, Any]) -> str:
    """The report's timeline as a self-contained HTML page."""
    # Plotly is imported here: only the commands that draw pay for it.
    from plotly.subplots import make_subplots

    timeline: Sequence[Mapping[str, Any]] = report.get("timeline") or []
    times = [sample["time"] for sample in timeline]
    figure = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=("pods", "nodes by capacity type", "cost (USD per hour)"),
    )
    _add_pod_series(figure, timeline, times)
    _add_node_series(figure, timeline, times)
    figure.add_scatter(
        x=times,
        y=[sample["hourlyCost"] for sample in timeline],
        name=COST_SERIES,
        line_shape="hv",
        row=3,
        col=1,
    )
    _add_event_marks(figure, report.get("events") or [])
    figure.update_layout(
        title=_title(report),
        height=820,
        hovermode="x unified",
        template="plotly_white",
    )
    html: str = figure.to_html(include_plotlyjs=True, full_html=True, div_id="daiku-run")
    return html


def _add_pod_series(figure: Any, timeline: Sequence[Mapping[str, Any]], times: list[str]) -> None:
    for name, key in ((PENDING_SERIES, "pendingPods"), (RUNNING_SERIES, "runningPods")):
        figure.add_scatter(
            x=times, y=[s[key] for s in timeline], name=name, line_shape="hv", row=1, col=1
        )


def _add_node_series(figure: Any, timeline: Sequence[Mapping[str, Any]], times: list[str]) -> None:
    capacity_types = sorted({kind for sample in timeline for kind in sample.get("nodes", {})})
    for kind in capacity_types:
        figure.add_scatter(
            x=times,
            y=[sample.get("nodes", {}).get(kind, 0) for sample in timeline],
            name=nodes_series_name(kind),
            line_shape="hv",
            stackgroup="nodes",
            row=2,
            col=1,
        )


def _add_event_marks(figure: Any, events: Sequence[Mapping[str, Any]]) -> None:
    for name, reasons, symbol in (
        (LAUNCH_SERIES, LAUNCH_REASONS, "triangle-up"),
        (DISRUPTION_SERIES, DISRUPTION_REASONS, "x"),
    ):
        marked = _first_of_each(e for e in events if e.get("reason") in reasons and e.get("time"))
        if not marked:
            continue
        figure.add_scatter(
            x=[e["time"] for e in marked],
            y=[0] * len(marked),
            mode="markers",
            marker={"symbol": symbol, "size": 11},
            name=name,
            text=[
                f"{e.get('object', '')}: {e.get('reason', '')} {e.get('message', '')}"
                for e in marked
            ],
            hoverinfo="text",
            row=2,
            col=1,
        )


def _first_of_each(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    # `daiku up` and the scheduler both report a launch; one mark per object and reason.
    seen: set[tuple[str, str]] = set()
    kept = []
    for event in events:
        key = (str(event.get("object")), str(event.get("reason")))
        if key not in seen:
            seen.add(key)
            kept.append(event)
    return kept


def _title(report: Mapping[str, Any]) -> str:
    cost = float(report.get("totalHourlyCost") or 0.0)
    settled = "settled" if report.get("settled") else "not settled"
    claims = len(report.get("nodeClaims") or [])
    return f"daiku up: {claims} NodeClaim(s), ${cost:.4f}/h at the end, {settled}"
