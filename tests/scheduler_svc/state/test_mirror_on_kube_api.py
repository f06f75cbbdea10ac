"""The cluster mirror fed by real watches on localcloud's Kubernetes API server, over HTTP.

A TCP proxy sits between the watches and the API server so a test can cut every connection,
as a load balancer or a network blip does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.server import KubeApiServer
from scheduler_svc.kube.client import KubeApiClient, api_client_from_kubeconfig
from scheduler_svc.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, PODS
from scheduler_svc.kube.watch import ResourceWatch, WatchSettings, run_watches
from scheduler_svc.state.cluster import ClusterMirror
from tests.polling import until

CRDS = Path(__file__).parents[3] / "deploy" / "crds"
EXAMPLES = Path(__file__).parents[3] / "deploy" / "examples"


@dataclass
class CuttableProxy:
    """Forwards TCP from a loopback port to `upstream_port`; `cut()` drops every connection."""

    upstream_port: int
    port: int = 0
    connections: list[asyncio.StreamWriter] = field(default_factory=list)
    accepted: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def cut(self) -> None:
        for writer in self.connections:
            writer.transport.abort()
        self.connections.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.connections += [writer, up_writer]
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.transport.abort()


@dataclass
class Cluster:
    kube: KubeApiServer
    proxy: CuttableProxy
    api: KubeApiClient
    mirror: ClusterMirror
    watches: list[ResourceWatch]

    def watch_of(self, resource: Any) -> ResourceWatch:
        return next(w for w in self.watches if w.resource == resource)

    async def create_pod(self, name: str, node: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
        if node:
            spec["nodeName"] = node
        body = {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
        return await self.kube.store.create("pods", body, "default")

    async def delete_pod(self, name: str) -> None:
        await self.kube.store.delete("pods", name, "default", grace_period_seconds=0)


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with KubeApiServer(bookmark_interval_seconds=0.1) as kube:
        for crd in sorted(CRDS.glob("*.yaml")):
            await kube.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        async with CuttableProxy(kube.port) as proxy:
            config = kube.kubeconfig()
            config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{proxy.port}"  # type: ignore[index]
            path = tmp_path / "kubeconfig"
            path.write_text(yaml.safe_dump(config))
            mirror = ClusterMirror()
            async with await api_client_from_kubeconfig(path) as api:
                watches = mirror.watches(
                    api, settings=WatchSettings(jitter_ratio=0.0), sleep=_no_wait
                )
                task = asyncio.create_task(run_watches(watches))
                try:
                    await asyncio.wait_for(mirror.wait_synced(), timeout=10)
                    yield Cluster(kube, proxy, api, mirror, watches)
                finally:
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task


async def test_every_mirrored_resource_lists_and_follows_changes(cluster: Cluster) -> None:
    """All mirrored resources (CRDs included) sync, and creates, updates and deletes of pods,
    nodes, NodePools and NodeClaims show in the mirror and its indexes."""
    store = cluster.kube.store
    mirror = cluster.mirror
    await store.create(
        "nodepools", yaml.safe_load((EXAMPLES / "nodepool-default.yaml").read_text())
    )
    await store.create(
        "nodes",
        {"metadata": {"name": "ip-10-0-0-1"}, "spec": {"providerID": "aws:///us-east-1a/i-1"}},
    )
    await cluster.create_pod("pending")
    await cluster.create_pod("bound", node="ip-10-0-0-1")
    await until(lambda: len(mirror.objects(PODS)) == 2)
    await until(lambda: mirror.node_by_provider_id("aws:///us-east-1a/i-1") is not None)
    await until(lambda: mirror.get(NODE_POOLS, "default") is not None)
    assert [p["metadata"]["name"] for p in mirror.pending_pods()] == ["pending"]
    assert [p["metadata"]["name"] for p in mirror.pods_on_node("ip-10-0-0-1")] == ["bound"]

    await store.bind("default", "pending", "ip-10-0-0-1")
    await cluster.delete_pod("bound")
    await until(lambda: mirror.get(PODS, "default/bound") is None)
    await until(lambda: mirror.pending_pods() == ())
    assert [p["metadata"]["name"] for p in mirror.pods_on_node("ip-10-0-0-1")] == ["pending"]
    assert mirror.is_synced(NODE_CLAIMS)


async def test_a_cut_connection_resumes_the_watch_without_missing_a_change(
    cluster: Cluster,
) -> None:
    """After every connection is cut, each watch resumes from its resourceVersion: pods created
    and deleted during the gap show in the mirror, and nothing is relisted."""
    await cluster.create_pod("before")
    await until(lambda: cluster.mirror.get(PODS, "default/before") is not None)
    pods_watch = cluster.watch_of(PODS)
    watches_before = pods_watch.watches_started

    cluster.proxy.cut()
    await cluster.create_pod("during-gap")
    await cluster.delete_pod("before")
    await until(lambda: pods_watch.watches_started > watches_before)
    await until(lambda: cluster.mirror.get(PODS, "default/before") is None)
    await until(lambda: cluster.mirror.get(PODS, "default/during-gap") is not None)

    assert all(w.lists_completed == 1 for w in cluster.watches)


async def test_a_410_after_compaction_relists_and_drops_pods_deleted_in_the_gap(
    cluster: Cluster,
) -> None:
    """When the history of the gap is compacted away, the watch gets 410, relists, and the
    mirror drops the pod deleted meanwhile and gains the pod created."""
    await cluster.create_pod("stays")
    await cluster.create_pod("deleted-in-gap")
    await until(lambda: len(cluster.mirror.objects(PODS)) == 2)
    pods_watch = cluster.watch_of(PODS)
    # The store's writes do not yield to the loop, so the watch cannot reconnect between the
    # cut and the compaction: the deletion happens in a history that is then compacted away.
    cluster.proxy.cut()
    await cluster.delete_pod("deleted-in-gap")
    await cluster.create_pod("created-in-gap")
    cluster.kube.store.compact()

    await until(lambda: pods_watch.lists_completed == 2)
    await until(lambda: cluster.mirror.get(PODS, "default/deleted-in-gap") is None)
    assert sorted(cluster.mirror.objects(PODS)) == ["default/created-in-gap", "default/stays"]


async def test_bookmarks_carry_the_resource_version_past_other_resources_writes(
    cluster: Cluster,
) -> None:
    """Bookmarks advance a quiet watch's resourceVersion to writes made on other resources,
    without delivering any object."""
    nodeclaims_watch = cluster.watch_of(NODE_CLAIMS)
    changes_before = cluster.mirror.generation
    node = await cluster.kube.store.create("nodes", {"metadata": {"name": "ip-10-0-0-9"}})
    node_version = int(node["metadata"]["resourceVersion"])
    await until(lambda: cluster.mirror.get(NODES, "ip-10-0-0-9") is not None)

    await until(lambda: int(nodeclaims_watch.resource_version or 0) >= node_version)
    assert cluster.mirror.objects(NODE_CLAIMS) == {}
    assert cluster.mirror.generation == changes_before + 1  # only the node changed


async def test_watches_work_over_tls_with_the_kubeconfigs_ca_and_token(tmp_path: Path) -> None:
    """With a kubeconfig carrying the API server's CA and a bearer token, the watch lists and
    follows pods over HTTPS."""
    async with KubeApiServer(tls=True) as kube:
        path = kube.write_kubeconfig(tmp_path / "kubeconfig")
        mirror = ClusterMirror([PODS])
        async with await api_client_from_kubeconfig(path) as api:
            task = asyncio.create_task(ResourceWatch(api, PODS, mirror.handle).run())
            try:
                await asyncio.wait_for(mirror.wait_synced(), timeout=10)
                body = {
                    "metadata": {"name": "secure", "namespace": "default"},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                }
                await kube.store.create("pods", body, "default")
                await until(lambda: mirror.get(PODS, "default/secure") is not None)
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
