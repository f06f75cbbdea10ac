"""Writes and reads of Kubernetes objects against localcloud's API server over HTTP."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.server import KubeApiServer
from scheduler_svc.errors import (
    KubeAlreadyExistsError,
    KubeConflictError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeTooManyRequestsError,
)
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import EVENTS, NODE_CLAIMS, POD_DISRUPTION_BUDGETS, PODS
from tests.polling import until

ROOT = Path(__file__).parents[3]
NODECLAIM = yaml.safe_load((ROOT / "deploy/examples/nodeclaim.yaml").read_text())
NOW = dt.datetime(2026, 11, 25, 21, 0, tzinfo=dt.UTC)


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, KubeObjects]]:
    async with KubeApiServer() as server:
        for crd in sorted((ROOT / "deploy/crds").glob("*.yaml")):
            await server.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        async with await api_client_from_kubeconfig(path) as api:
            yield server, KubeObjects(api, clock=lambda: NOW)


def nodeclaim(name: str = "default-abc12") -> dict[str, Any]:
    claim = copy.deepcopy(NODECLAIM)
    claim["metadata"]["name"] = name
    del claim["status"]
    return {k: v for k, v in claim.items() if k not in ("apiVersion", "kind")}


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }


async def test_a_nodeclaim_is_created_read_and_its_status_patched(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """A NodeClaim is created (apiVersion/kind filled in), read back, and its status set
    through the status subresource; creating it twice raises KubeAlreadyExistsError."""
    _, objects = kube
    created = await objects.create(NODE_CLAIMS, nodeclaim())
    assert created["apiVersion"] == "daiku.dev/v1"
    assert created["metadata"]["resourceVersion"]

    status = {
        "status": {
            "providerID": "aws:///us-east-1a/i-1",
            "conditions": [
                {
                    "type": "Launched",
                    "status": "True",
                    "reason": "Launched",
                    "lastTransitionTime": "2026-11-25T21:00:00Z",
                }
            ],
        }
    }
    await objects.patch(NODE_CLAIMS, "default-abc12", status, subresource="status")
    read = await objects.get(NODE_CLAIMS, "default-abc12")
    assert read["status"]["providerID"] == "aws:///us-east-1a/i-1"
    assert read["spec"]["resources"]["requests"]["cpu"] == "1500m"

    with pytest.raises(KubeAlreadyExistsError):
        await objects.create(NODE_CLAIMS, nodeclaim())


async def test_a_stale_replace_conflicts_and_a_missing_object_is_not_found(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """Replacing with an outdated resourceVersion raises KubeConflictError; reading, patching
    or deleting a missing object raises KubeNotFoundError."""
    _, objects = kube
    created = await objects.create(NODE_CLAIMS, nodeclaim())
    await objects.patch(NODE_CLAIMS, "default-abc12", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(KubeConflictError):
        await objects.replace(NODE_CLAIMS, created)
    with pytest.raises(KubeNotFoundError):
        await objects.get(NODE_CLAIMS, "nope")
    with pytest.raises(KubeNotFoundError):
        await objects.patch(PODS, "nope", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    with pytest.raises(KubeNotFoundError):
        await objects.delete(NODE_CLAIMS, "nope")


async def test_an_invalid_object_is_rejected_with_422(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """A NodeClaim missing its required nodeClassRef raises KubeInvalidError."""
    _, objects = kube
    broken = nodeclaim()
    del broken["spec"]["nodeClassRef"]
    with pytest.raises(KubeInvalidError, match="nodeClassRef"):
        await objects.create(NODE_CLAIMS, broken)


async def test_delete_honours_finalizers_and_uid_preconditions(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """Deleting a claim with a finalizer only marks it; a JSON patch removing the finalizer
    lets it go; a delete with another uid conflicts."""
    _, objects = kube
    claim = nodeclaim()
    claim["metadata"]["finalizers"] = ["daiku.dev/termination"]
    created = await objects.create(NODE_CLAIMS, claim)

    with pytest.raises(KubeConflictError):
        await objects.delete(NODE_CLAIMS, "default-abc12", uid="not-its-uid")
    marked = await objects.delete(NODE_CLAIMS, "default-abc12", uid=created["metadata"]["uid"])
    assert marked["metadata"]["deletionTimestamp"]

    await objects.patch(
        NODE_CLAIMS,
        "default-abc12",
        [
            {"op": "test", "path": "/metadata/finalizers", "value": ["daiku.dev/termination"]},
            {"op": "remove", "path": "/metadata/finalizers"},
        ],
        patch_type="json",
    )
    with pytest.raises(KubeNotFoundError):
        await objects.get(NODE_CLAIMS, "default-abc12")


async def test_an_eviction_blocked_by_a_pdb_is_too_many_requests(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """Evicting the only pod a minAvailable=1 PodDisruptionBudget protects raises
    KubeTooManyRequestsError; an unprotected pod is evicted."""
    server, objects = kube
    await objects.create(PODS, pod("guarded", {"app": "db"}))
    await objects.create(PODS, pod("free"))
    running = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }
    for name in ("guarded", "free"):
        await server.store.bind("default", name, "node-1")
        await objects.patch(PODS, name, running, namespace="default", subresource="status")
    pdb = {
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    }
    await objects.create(POD_DISRUPTION_BUDGETS, pdb)

    def current_healthy() -> Any:
        stored = server.store.get_nowait("poddisruptionbudgets", "db", "default") or {}
        return (stored.get("status") or {}).get("currentHealthy")

    await until(lambda: current_healthy() == 1)  # the disruption controller's view caught up

    with pytest.raises(KubeTooManyRequestsError):
        await objects.evict("default", "guarded")
    await objects.evict("default", "free")
    free = await server.store.get("pods", "free", "default")
    assert free["metadata"].get("deletionTimestamp")


async def test_events_are_recorded_about_namespaced_and_cluster_objects(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """An Event about a pod lands in its namespace, one about a NodeClaim in default; both
    name the object, reason, message, type and our component."""
    server, objects = kube
    target = await objects.create(PODS, pod("web"))
    claim = await objects.create(NODE_CLAIMS, nodeclaim())
    await objects.record_event(
        target, reason="Nominated", message="Pod should schedule on default-abc12"
    )
    await objects.record_event(
        claim, reason="FailedLaunch", message="no capacity", event_type="Warning"
    )

    events = (await server.store.list("events", "default")).items
    by_reason = {e["reason"]: e for e in events}
    assert by_reason["Nominated"]["involvedObject"]["name"] == "web"
    assert by_reason["Nominated"]["involvedObject"]["kind"] == "Pod"
    assert by_reason["FailedLaunch"]["involvedObject"]["kind"] == "NodeClaim"
    assert by_reason["FailedLaunch"]["type"] == "Warning"
    assert by_reason["Nominated"]["source"]["component"] == "daiku-scheduler"
    assert by_reason["Nominated"]["firstTimestamp"] == "2026-11-25T21:00:00Z"
    assert EVENTS.collection_path("default") == "/api/v1/namespaces/default/events"


async def test_the_same_event_told_twice_is_one_event(
    kube: tuple[KubeApiServer, KubeObjects],
) -> None:
    """A second record of the same (object, reason, message, type), as a restarted scheduler
    sends it, creates nothing and returns None; another message is another Event."""
    server, objects = kube
    target = await objects.create(PODS, pod("web"))
    first = await objects.record_event(target, reason="Nominated", message="on claim a")
    again = await objects.record_event(target, reason="Nominated", message="on claim a")
    other = await objects.record_event(target, reason="Nominated", message="on claim b")

    assert first is not None
    assert again is None
    assert other is not None
    events = (await server.store.list("events", "default")).items
    assert sorted(e["message"] for e in events) == ["on claim a", "on claim b"]
    assert first["metadata"]["name"].startswith("web.")
