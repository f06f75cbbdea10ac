"""Text for `daiku up`'s live view and summary (pure: strings from snapshots and events).

The live view is one status line per change (pending pods, NodeClaims by state, nodes, hourly
cost) plus one line per event (a NodeClaim launched, a node ready, ...), which reads the same on
a terminal and in a CI log. The summary is a table of the nodes and the cost.
"""

from __future__ import annotations

from collections.abc import Iterable

from daiku_cli.scenario.observe import CLAIM_CONDITIONS, ClusterSnapshot
from daiku_cli.scenario.report import RunEvent

CLAIM_STATE_ORDER = ("Pending", *CLAIM_CONDITIONS, "Terminating")


def status_line(snapshot: ClusterSnapshot) -> str:
    """e.g. `pods 20: 15 pending, 5 running | nodeclaims 2: 1 Launched, 1 Ready | nodes 1
    (1 ready) | $0.0416/h`."""
    pods = snapshot.pods
    pending = len(snapshot.pending_pods)
    starting = sum(1 for p in pods if p.starting)
    pod_parts = [f"{pending} pending"]
    if starting:
        pod_parts.append(f"{starting} starting")
    pod_parts.append(f"{snapshot.running_pods} running")
    by_state = snapshot.claims_by_state()
    claim_parts = [f"{by_state[s]} {s}" for s in CLAIM_STATE_ORDER if by_state.get(s)]
    claims = f"nodeclaims {len(snapshot.claims)}" + (
        ": " + ", ".join(claim_parts) if claim_parts else ""
    )
    ready = sum(1 for n in snapshot.nodes if n.ready)
    return (
        f"pods {len(pods)}: {', '.join(pod_parts)} | {claims} | "
        f"nodes {len(snapshot.nodes)} ({ready} ready) | ${snapshot.hourly_cost:.4f}/h"
    )


def event_line(event: RunEvent) -> str:
    message = f"  {event.message}" if event.message else ""
    return f"  {event.kind} {event.object}: {event.reason}{message}"


def node_table(snapshot: ClusterSnapshot) -> list[str]:
    """The nodes with instance type, zone, capacity type, status, pods and price."""
    price_by_node = {c.node_name: c.price_per_hour for c in snapshot.claims if c.node_name}
    pods_by_node: dict[str, int] = {}
    for pod in snapshot.pods:
        if pod.node:
            pods_by_node[pod.node] = pods_by_node.get(pod.node, 0) + 1
    header = ("NODE", "INSTANCE TYPE", "ZONE", "CAPACITY", "STATUS", "PODS", "$/HOUR")
    rows: list[tuple[str, ...]] = [header]
    for node in snapshot.nodes:
        price = price_by_node.get(node.name)
        rows.append(
            (
                node.name,
                node.instance_type or "-",
                node.zone or "-",
                node.capacity_type or "-",
                "Ready" if node.ready else "NotReady",
                str(pods_by_node.get(node.name, 0)),
                f"{price:.4f}" if price is not None else "-",
            )
        )
    return _columns(rows)


def _columns(rows: Iterable[tuple[str, ...]]) -> list[str]:
    rows = list(rows)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def summary(snapshot: ClusterSnapshot, elapsed_seconds: float, launched_claims: int) -> list[str]:
    """The closing summary: nodes, cost, what is still in motion."""
    lines = [
        f"Summary after {elapsed_seconds:.1f} s: {len(snapshot.pods)} pods "
        f"({snapshot.running_pods} running, {len(snapshot.pending_pods)} pending) on "
        f"{len(snapshot.nodes)} nodes; {launched_claims} NodeClaims launched in this run.",
    ]
    if snapshot.nodes:
        lines.extend(node_table(snapshot))
    lines.append(f"Hourly cost of what runs now: ${snapshot.hourly_cost:.4f}")
    reasons = snapshot.unsettled_reasons()
    lines.append("Settled." if not reasons else "Not settled: " + "; ".join(reasons))
    return lines
