"""An Empty decision against localcloud's API server over HTTP: the controller taints the node
disrupted:NoSchedule, reads its pods from the API server (not the mirror the pass decided on)
and deletes the NodeClaim only if no pod that would move is bound there; a taint a stopped pass
left on a node no decision acts on is removed by the next pass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.server import KubeApiServer
from scheduler_svc.core.disruption import DisruptionDecision, DisruptionReason
from scheduler_svc.disruption.controller import DisruptionController
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY, KubeWriter
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import ClusterMirror
from tests.scheduler_svc.kube.test_objects import nodeclaim
from tests.scheduler_svc.state.test_core_snapshot import fill

ROOT = Path(__file__).parents[3]
NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
NODE, CLAIM = "ip-10-0-0-1.ec2.internal", "default-abc12"
EMPTY = DisruptionDecision(
    reason=DisruptionReason.EMPTY,
    nodes=(NODE,),
    nodeclaims=(CLAIM,),
    replacements=(),
    message="Empty: no pods for 0s (consolidateAfter 0s)",
    decided_at=NOW,
    old_price_per_hour=0.0832,
    new_price_per_hour=0.0,
)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, KubeWriter]]:
    """An API server holding the NodeClaim and its Node, and a writer talking to it."""
    async with KubeApiServer() as server:
        for crd in sorted((ROOT / "deploy/crds").glob("*.yaml")):
            await server.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        await server.store.create("nodeclaims", nodeclaim(CLAIM))
        await server.store.create("nodes", node())
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        async with await api_client_from_kubeconfig(path) as api:
            yield server, KubeWriter(KubeObjects(api, clock=lambda: NOW), clock=lambda: NOW)


def node(taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": NODE}, "spec": {"taints": taints or []}}


def bound_pod(name: str, owner_kind: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner_kind is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": "o",
                "uid": "u",
                "controller": True,
            }
        ]
    return {
        "metadata": metadata,
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "pause"}]},
    }


def controller(writer: KubeWriter, mirror: ClusterMirror | None = None) -> DisruptionController:
    return DisruptionController(
        mirror=mirror or ClusterMirror(),
        writer=writer,
        metrics=SchedulerMetrics(),
        clock=lambda: NOW,
    )


async def taint_keys(server: KubeApiServer) -> list[str]:
    stored = await server.store.get("nodes", NODE)
    return [t["key"] for t in stored["spec"].get("taints") or []]


async def claim_is_deleted(server: KubeApiServer) -> bool:
    listed = (await server.store.list("nodeclaims")).items
    return all(c["metadata"].get("deletionTimestamp") for c in listed)


async def test_a_pod_bound_after_the_pass_read_the_mirror_stops_the_empty_decision(
    cluster: tuple[KubeApiServer, KubeWriter],
) -> None:
    """The pass saw the node empty; the default-scheduler bound a bare pod to it before the
    watch delivered the bind. The decision is not carried out: the NodeClaim stays (the drain
    would have evicted the pod, and a bare pod is lost) and the taint it put on goes again."""
    server, writer = cluster
    await server.store.create("pods", bound_pod("smoke-4"), "default")

    acted = await controller(writer)._execute(EMPTY)

    assert acted is False
    assert not await claim_is_deleted(server)
    assert DISRUPTED_TAINT_KEY not in await taint_keys(server)


async def test_a_node_still_empty_is_tainted_and_its_nodeclaim_deleted(
    cluster: tuple[KubeApiServer, KubeWriter],
) -> None:
    """A DaemonSet pod and a finished pod do not keep a node from being empty (they would not
    move): the node is tainted before its NodeClaim is deleted, and a taint someone else put
    there stays."""
    server, writer = cluster
    await server.store.patch(
        "nodes", NODE, {"spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}}
    )
    await server.store.create("pods", bound_pod("logs-x1", owner_kind="DaemonSet"), "default")
    await server.store.create("pods", bound_pod("job-1"), "default")
    finished = {"status": {"phase": "Succeeded"}}
    await server.store.patch(
        "pods", "job-1", finished, "merge", namespace="default", subresource="status"
    )

    acted = await controller(writer)._execute(EMPTY)

    assert acted is True
    assert await claim_is_deleted(server)
    assert sorted(await taint_keys(server)) == sorted([DISRUPTED_TAINT_KEY, "team"])


async def test_a_taint_left_by_a_stopped_pass_is_removed_by_the_next_one(
    cluster: tuple[KubeApiServer, KubeWriter],
) -> None:
    """A node tainted disrupted whose NodeClaim is not being deleted and that no decision acts
    on (a pass stopped between its taint and its delete) gets its taint removed, so it takes
    pods again; a node whose NodeClaim is being deleted keeps it."""
    server, writer = cluster
    tainted = node([{"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}])
    await server.store.patch("nodes", NODE, {"spec": tainted["spec"]})
    claim = await server.store.get("nodeclaims", CLAIM)
    claim["status"] = {"nodeName": NODE}
    deleting = {**claim, "metadata": {**claim["metadata"], "deletionTimestamp": NOW.isoformat()}}

    being_deleted = ClusterMirror()
    fill(being_deleted, nodes=[tainted], nodeclaims=[deleting])
    await controller(writer, being_deleted).taints.clear_stale(())
    assert await taint_keys(server) == [DISRUPTED_TAINT_KEY]

    left_behind = ClusterMirror()
    fill(left_behind, nodes=[tainted], nodeclaims=[claim])
    await controller(writer, left_behind).taints.clear_stale(())
    assert await taint_keys(server) == []
