"""The cluster mirror: replace-all on relist, per-change updates, indexes, snapshots."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_svc.kube.client import KubeApiClient, api_client_from_kubeconfig
from scheduler_svc.kube.events import ObjectEvent, Synced
from scheduler_svc.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, PODS, Resource
from scheduler_svc.kube.watch import ResourceWatch, WatchSettings
from scheduler_svc.state.cluster import Change, ClusterMirror, is_provisionable_pod
from tests.polling import until
from tests.scheduler_svc.kube.apiserver_double import ApiServerDouble


def pod(
    name: str, rv: str, node: str | None = None, phase: str = "Pending", namespace: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app"}]}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": spec,
        "status": {"phase": phase},
    }


def node(name: str, rv: str, provider_id: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {"providerID": provider_id},
    }


def nodeclaim(name: str, rv: str, provider_id: str | None = None) -> dict[str, Any]:
    status = {"providerID": provider_id} if provider_id else {}
    return {
        "kind": "NodeClaim",
        "metadata": {"name": name, "resourceVersion": rv},
        "status": status,
    }


def synced(resource: Resource, *objects: dict[str, Any], rv: str = "1") -> Synced:
    return Synced(resource, tuple(objects), rv)


def test_pod_indexes_follow_binding_and_deletion() -> None:
    """Pods move from the pending index to their node's index when bound, and leave both
    when deleted."""
    mirror = ClusterMirror([PODS])
    mirror.handle(synced(PODS, pod("a", "1"), pod("b", "2", node="n1")))
    assert [p["metadata"]["name"] for p in mirror.pending_pods()] == ["a"]
    assert [p["metadata"]["name"] for p in mirror.pods_on_node("n1")] == ["b"]

    mirror.handle(ObjectEvent(PODS, "MODIFIED", pod("a", "3", node="n1")))
    assert mirror.pending_pods() == ()
    assert sorted(p["metadata"]["name"] for p in mirror.pods_on_node("n1")) == ["a", "b"]

    mirror.handle(ObjectEvent(PODS, "DELETED", pod("b", "4", node="n1")))
    assert [p["metadata"]["name"] for p in mirror.pods_on_node("n1")] == ["a"]
    assert mirror.get(PODS, "default/b") is None


def test_finished_pods_are_not_pending() -> None:
    """An unbound pod whose phase is Succeeded or Failed is not counted as pending."""
    mirror = ClusterMirror([PODS])
    mirror.handle(
        synced(PODS, pod("done", "1", phase="Succeeded"), pod("failed", "2", phase="Failed"))
    )
    assert mirror.pending_pods() == ()


def test_nodes_and_nodeclaims_are_found_by_provider_id_and_name() -> None:
    """Nodes are indexed by spec.providerID, NodeClaims by name and status.providerID, and the
    index follows a NodeClaim getting its providerID."""
    mirror = ClusterMirror([NODES, NODE_CLAIMS])
    mirror.handle(synced(NODES, node("ip-1", "1", "aws:///us-east-1a/i-1")))
    mirror.handle(synced(NODE_CLAIMS, nodeclaim("default-abc", "2")))
    assert mirror.node_by_provider_id("aws:///us-east-1a/i-1") is not None
    assert mirror.node_by_provider_id("aws:///us-east-1a/i-2") is None
    assert mirror.nodeclaim("default-abc") is not None
    assert mirror.nodeclaim_by_provider_id("aws:///us-east-1a/i-1") is None

    mirror.handle(
        ObjectEvent(NODE_CLAIMS, "MODIFIED", nodeclaim("default-abc", "3", "aws:///us-east-1a/i-1"))
    )
    found = mirror.nodeclaim_by_provider_id("aws:///us-east-1a/i-1")
    assert found is not None
    assert found["metadata"]["name"] == "default-abc"


def test_a_relist_reports_deleted_added_and_modified_objects_to_listeners() -> None:
    """A Synced after a gap deletes objects it lacks, adds new ones, modifies only those whose
    resourceVersion changed, and tells listeners each change."""
    mirror = ClusterMirror([PODS])
    changes: list[Change] = []
    mirror.handle(synced(PODS, pod("kept", "1"), pod("gone", "2"), pod("changed", "3")))
    mirror.add_listener(changes.append)

    mirror.handle(
        synced(PODS, pod("kept", "1"), pod("changed", "5", node="n1"), pod("new", "6"), rv="6")
    )

    assert sorted((c.type, c.key) for c in changes) == [
        ("ADDED", "default/new"),
        ("DELETED", "default/gone"),
        ("MODIFIED", "default/changed"),
    ]
    assert sorted(mirror.objects(PODS)) == ["default/changed", "default/kept", "default/new"]
    assert sorted(p["metadata"]["name"] for p in mirror.pending_pods()) == ["kept", "new"]
    assert mirror.resource_version(PODS) == "6"


def test_an_invalid_object_and_a_failing_listener_do_not_stop_the_mirror() -> None:
    """An object without a name is skipped and a listener that raises does not keep the other
    listeners or later events from being handled."""
    mirror = ClusterMirror([PODS])
    seen: list[str] = []

    def broken(change: Change) -> None:
        raise RuntimeError("listener bug")

    mirror.add_listener(broken)
    mirror.add_listener(lambda change: seen.append(change.key))
    mirror.handle(synced(PODS, {"metadata": {"resourceVersion": "1"}}, pod("ok", "2")))
    mirror.handle(ObjectEvent(PODS, "ADDED", {"metadata": {"namespace": "x"}}))
    mirror.handle(ObjectEvent(PODS, "ADDED", pod("later", "3")))

    assert seen == ["default/ok", "default/later"]


def test_a_snapshot_is_frozen_at_its_generation() -> None:
    """A snapshot keeps the objects of its instant; later changes show in a new snapshot with
    a higher generation."""
    mirror = ClusterMirror([PODS, NODE_POOLS])
    mirror.handle(synced(PODS, pod("a", "1")))
    mirror.handle(synced(NODE_POOLS, {"metadata": {"name": "default", "resourceVersion": "2"}}))
    before = mirror.snapshot()
    mirror.handle(ObjectEvent(PODS, "ADDED", pod("b", "3")))
    after = mirror.snapshot()

    assert [p["metadata"]["name"] for p in before.pending_pods] == ["a"]
    assert sorted(p["metadata"]["name"] for p in after.pending_pods) == ["a", "b"]
    assert after.generation > before.generation
    assert [p["metadata"]["name"] for p in after.node_pools] == ["default"]
    assert after.resource_versions["pods"] == "3"


async def test_wait_synced_returns_once_every_resource_was_listed() -> None:
    """wait_synced blocks until each mirrored resource has delivered its first Synced."""
    mirror = ClusterMirror([PODS, NODES])
    waiter = asyncio.create_task(mirror.wait_synced())
    mirror.handle(synced(PODS))
    await asyncio.sleep(0)
    assert not waiter.done()
    assert mirror.is_synced(PODS)
    assert not mirror.is_synced()
    mirror.handle(synced(NODES))
    await asyncio.wait_for(waiter, timeout=1)
    assert mirror.is_synced()


async def test_the_mirror_stays_correct_across_a_cut_stream_and_a_410_relist(
    tmp_path: Path,
) -> None:
    """Fed by a real watch, the mirror matches the server after the stream is cut and the
    history compacted: pods deleted during the gap are gone, pods created appear."""
    async with ApiServerDouble(path="/api/v1/pods", kind="Pod") as server:
        server.create("stays")
        server.create("deleted-in-gap")
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
        mirror = ClusterMirror([PODS])

        async def no_wait(seconds: float) -> None:
            await asyncio.sleep(0)

        async with await api_client_from_kubeconfig(kubeconfig) as api:
            watch = ResourceWatch(
                api, PODS, mirror.handle, settings=WatchSettings(jitter_ratio=0), sleep=no_wait
            )
            task = asyncio.create_task(watch.run())
            await mirror.wait_synced()
            await until(lambda: len(server.watch_requests()) == 1)
            server.create("before-cut")
            await until(lambda: mirror.get(PODS, "default/before-cut") is not None)

            server.cut_streams()
            server.delete("deleted-in-gap")
            server.create("created-in-gap")
            server.compact()
            await until(lambda: watch.lists_completed == 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        assert sorted(mirror.objects(PODS)) == sorted(server.objects)
        assert sorted(mirror.objects(PODS)) == [
            "default/before-cut",
            "default/created-in-gap",
            "default/stays",
        ]


def unschedulable(p: dict[str, Any]) -> dict[str, Any]:
    p["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ]
    return p


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [
        ("unschedulable", lambda: unschedulable(pod("a", "1")), True),
        ("not yet tried by kube-scheduler", lambda: pod("a", "1"), False),
        ("bound", lambda: unschedulable(pod("a", "1", node="n1")), False),
        (
            "terminating",
            lambda: unschedulable(
                {
                    **pod("a", "1"),
                    "metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"},
                }
            ),
            False,
        ),
        (
            "a DaemonSet's",
            lambda: unschedulable(
                {
                    **pod("a", "1"),
                    "metadata": {
                        "name": "a",
                        "ownerReferences": [{"kind": "DaemonSet", "name": "d", "controller": True}],
                    },
                }
            ),
            False,
        ),
    ],
)
def test_only_unschedulable_unbound_live_non_daemonset_pods_are_provisionable(
    name: str, make: Any, expected: bool
) -> None:
    """A pod is provisionable only when kube-scheduler marked it Unschedulable and it is not
    bound, not terminating and not owned by a DaemonSet."""
    assert is_provisionable_pod(make()) is expected


def test_the_mirror_stores_trimmed_pods_unless_told_otherwise() -> None:
    """By default the mirror stores pods without container statuses (kube.slim); with no
    transforms it stores them whole."""
    full = pod("a", "1")
    full["status"]["containerStatuses"] = [{"name": "app", "ready": False}]
    trimmed, whole = ClusterMirror([PODS]), ClusterMirror([PODS], transforms={})
    for mirror in (trimmed, whole):
        mirror.handle(synced(PODS, full))

    stored_trimmed = trimmed.get(PODS, "default/a")
    stored_whole = whole.get(PODS, "default/a")
    assert stored_trimmed is not None
    assert stored_whole is not None
    assert "containerStatuses" not in stored_trimmed["status"]
    assert stored_whole["status"]["containerStatuses"] == [{"name": "app", "ready": False}]


def test_the_mirror_s_watches_slim_objects_before_the_mirror_stores_them() -> None:
    """Watches built by the mirror carry its transform (objects are trimmed as decoded), and
    what they deliver is stored as is, not trimmed twice."""
    calls: list[str] = []

    def trim(obj: dict[str, Any]) -> dict[str, Any]:
        calls.append(obj["metadata"]["name"])
        return obj

    mirror = ClusterMirror([PODS], transforms={PODS: trim})
    (watch,) = mirror.watches(KubeApiClient("http://127.0.0.1:1"))
    assert watch._transform is trim
    watch._deliver(Synced(PODS, ({"metadata": {"name": "a", "namespace": "d"}},), "1"))
    assert mirror.get(PODS, "d/a") is not None
    assert calls == []  # the watch transformed it already
    mirror.handle(ObjectEvent(PODS, "ADDED", {"metadata": {"name": "b", "namespace": "d"}}))
    assert calls == ["b"]  # events handed to handle() directly are trimmed by the mirror
