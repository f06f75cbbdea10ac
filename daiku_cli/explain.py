"""`daiku explain node NAME`: why a node is, or is not, going away.

Lists the cluster once (the same resources the scheduler mirrors), builds the disruption
controller's snapshot and prints the core's `explain_node` verdict and the facts behind it:

    $ daiku explain node ip-10-0-1-2.ec2.internal
    ip-10-0-1-2.ec2.internal: going away: Empty: no pods for 45s (consolidateAfter 30s)
      NodePool default, t3a.large on-demand in us-east-1a, $0.0752/h
      ...

What a one-shot look cannot know: when pods last left a node (the controller watches that),
so "pods changed" counts from the newest pod still bound to it (or the node's creation); and
without the actuator's catalog, consolidation sees prices from the claims' own offerings but
no replacement types (a delete is judged, a cheaper replacement is not). Exit status
(`daiku_cli.exit_codes`): 0 either way; 3 when the cluster cannot be read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated

import structlog
import typer

from daiku_cli import exit_codes
from daiku_cli.main import DaikuCommand, DaikuGroup, app
from scheduler_svc.core.disruption import NodeExplanation, explain_node
from scheduler_svc.disruption.snapshot import build_snapshot
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.client import new_api_client
from scheduler_svc.kube.events import Synced
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import (
    NODE_CLAIMS,
    PODS,
    KubeObject,
    Resource,
    resource_version_of,
)
from scheduler_svc.kube.writer import parse_timestamp, utc_now
from scheduler_svc.provisioning.launch import ROOT_VOLUME_SIZE_ANNOTATION
from scheduler_svc.provisioning.nodeclaim_template import MIN_VALUES_RELAXED_ANNOTATION
from scheduler_svc.state.cluster import ClusterMirror, pod_node_name
from scheduler_svc.state.core_snapshot import CoreSnapshotter

explain_app = typer.Typer(help="Explain daiku's decisions.", no_args_is_help=True, cls=DaikuGroup)
app.add_typer(explain_app, name="explain")


async def _list(objects: KubeObjects, resource: Resource) -> tuple[tuple[KubeObject, ...], str]:
    # KubeObjects has no list call (the service lists through its watches); one GET is enough.
    answer = await objects.request("GET", resource.collection_path())
    items = answer.get("items") or []
    version = resource_version_of(answer) or "0"
    return tuple(i for i in items if isinstance(i, dict)), version


async def load_mirror(objects: KubeObjects) -> ClusterMirror:
    """Every mirrored resource listed once into a fresh mirror."""
    mirror = ClusterMirror()
    for resource in mirror.resources:
        items, version = await _list(objects, resource)
        mirror.handle(Synced(resource, items, version))
    return mirror


def last_pod_events(mirror: ClusterMirror) -> dict[str, datetime]:
    """Per node, the creation of the newest pod bound to it (a lower bound of its last pod
    event: departures are not visible in one look)."""
    newest: dict[str, datetime] = {}
    for pod in mirror.objects(PODS).values():
        node = pod_node_name(pod)
        born = parse_timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
        if node is None or born is None:
            continue
        if node not in newest or born > newest[node]:
            newest[node] = born
    return newest


async def explain(
    objects: KubeObjects, node_name: str, *, clock: Callable[[], datetime] = utc_now
) -> NodeExplanation:
    """The verdict for `node_name` on the cluster behind `objects` as of `clock()`."""
    mirror = await load_mirror(objects)
    snapshot = build_snapshot(
        mirror, CoreSnapshotter(mirror), last_pod_event_at=last_pod_events(mirror)
    )
    explanation = explain_node(snapshot, node_name, clock())
    launched = launch_details(mirror, node_name)
    if not launched:
        return explanation
    return dataclasses.replace(explanation, details=(*launched, *explanation.details))


def launch_details(mirror: ClusterMirror, node_name: str) -> list[str]:
    """How the node's NodeClaim was launched, where it departed from its classes: a root
    volume grown for its pods' ephemeral-storage, minValues relaxed (BestEffort)."""
    claim = next(
        (
            c
            for c in mirror.objects(NODE_CLAIMS).values()
            if (c.get("status") or {}).get("nodeName") == node_name
        ),
        None,
    )
    annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    lines = []
    volume = annotations.get(ROOT_VOLUME_SIZE_ANNOTATION)
    if volume:
        lines.append(f"root volume {volume}, grown for its pods' ephemeral-storage")
    if annotations.get(MIN_VALUES_RELAXED_ANNOTATION) == "true":
        relaxed = [
            f"{r.get('key')} {r.get('minValues')}"
            for r in ((claim or {}).get("spec") or {}).get("requirements") or []
            if isinstance(r, dict) and "minValues" in r
        ]
        lines.append(
            "launched with minValues relaxed (--min-values-policy BestEffort): "
            + (", ".join(relaxed) or "see its requirements")
        )
    return lines


def render(explanation: NodeExplanation) -> str:
    """The verdict on the first line, each detail indented below it."""
    lines = [f"{explanation.node}: {explanation.verdict}"]
    lines += [f"  {detail}" for detail in explanation.details]
    return "\n".join(lines)


async def _run(node_name: str, kubeconfig: Path | None) -> NodeExplanation:
    path = kubeconfig or Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    api = await new_api_client(kubeconfig=path, in_cluster=False, context=None)
    try:
        return await explain(KubeObjects(api), node_name)
    finally:
        await api.close()


@explain_app.command(name="node", cls=DaikuCommand)
def node(
    name: Annotated[str, typer.Argument(help="The Node's name.")],
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube)."),
    ] = None,
) -> None:
    """Say why a node is, or is not, going away (daiku's disruption verdict)."""
    # The verdict is stdout's; the library's logs go to stderr, warnings and up only.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    try:
        explanation = asyncio.run(_run(name, kubeconfig))
    except (KubeApiError, OSError, ValueError) as error:
        typer.echo(f"daiku explain node: cannot read the cluster: {error}", err=True)
        raise typer.Exit(exit_codes.FAILED) from error
    typer.echo(render(explanation))
