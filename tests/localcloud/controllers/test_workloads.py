"""Deployments, ReplicaSets, DaemonSets and node lifecycle, with the scheduler, in process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcloud.kube.controllers import ControlPlane, ControlPlaneSettings
from localcloud.kube.controllers.workloads import POD_TEMPLATE_HASH, pod_template_hash
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import node, pod
from tests.polling import until

SETTINGS = ControlPlaneSettings(kubelets=False, retry_debounce_seconds=0.01)


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    store = Store()
    async with ControlPlane(store, settings=SETTINGS):
        yield store


def deployment(name: str, replicas: int, *, cpu: str = "500m", image: str = "nginx") -> Any:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": image, "resources": {"requests": {"cpu": cpu}}}
                    ]
                },
            },
        },
    }


def daemonset(name: str, **template_spec: Any) -> Any:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "agent",
                            "image": "agent",
                            "resources": {"requests": {"cpu": "10m"}},
                        }
                    ],
                    **template_spec,
                },
            },
        },
    }


async def pods_of(store: Store, app: str) -> list[dict[str, Any]]:
    return (await store.list("pods", "default", label_selector=f"app={app}")).items


async def mark_running(store: Store) -> None:
    """Stand in for kubelets: every bound pod becomes Running and Ready."""
    for item in (await store.list("pods", "default")).items:
        if item["spec"].get("nodeName") and item["status"].get("phase") == "Pending":
            item["status"]["phase"] = "Running"
            item["status"]["conditions"] = [
                *item["status"].get("conditions", []),
                {"type": "Ready", "status": "True"},
            ]
            await store.update("pods", item, "default", subresource="status")


async def test_deployment_scales_and_pods_get_bound(store: Store) -> None:
    """A Deployment gets a hashed ReplicaSet and its pods, bound to nodes; scaling it up adds
    pods and scaling down removes the unscheduled ones first."""
    await store.create("nodes", node("n1", cpu="2"))
    await store.create("deployments", deployment("web", 2), "default")

    async def bound(count: int) -> list[dict[str, Any]] | None:
        items = await pods_of(store, "web")
        placed = [p for p in items if p["spec"].get("nodeName")]
        return items if len(items) == count and len(placed) == min(count, 4) else None

    items = await until(lambda: bound(2))
    stored = await store.get("deployments", "web", "default")
    template_hash = pod_template_hash(stored["spec"]["template"])
    replicasets = (await store.list("replicasets", "default")).items
    assert [rs["metadata"]["name"] for rs in replicasets] == [f"web-{template_hash}"]
    assert all(p["metadata"]["labels"][POD_TEMPLATE_HASH] == template_hash for p in items)
    assert all(p["metadata"]["name"].startswith(f"web-{template_hash}-") for p in items)

    await store.set_scale("deployments", "web", 6, "default")  # n1 fits 4 pods of 500m
    items = await until(lambda: bound(6))
    placed_before = {p["metadata"]["name"] for p in items if p["spec"].get("nodeName")}
    await store.set_scale("deployments", "web", 4, "default")
    items = await until(lambda: bound(4))
    assert {p["metadata"]["name"] for p in items} == placed_before

    async def status_settled() -> dict[str, Any] | None:
        found = await store.get("deployments", "web", "default")
        status = found.get("status") or {}
        return status if status.get("replicas") == 4 else None

    status = await until(status_settled)
    assert status["updatedReplicas"] == 4


async def test_deployment_status_counts_ready_pods(store: Store) -> None:
    """Once its pods run and are Ready, the Deployment reports them ready and available."""
    await store.create("nodes", node("n1"))
    await store.create("deployments", deployment("api", 3), "default")

    async def all_bound() -> bool:
        items = await pods_of(store, "api")
        return len(items) == 3 and all(p["spec"].get("nodeName") for p in items)

    await until(all_bound)
    await mark_running(store)

    async def available() -> dict[str, Any] | None:
        status = (await store.get("deployments", "api", "default")).get("status") or {}
        return status if status.get("availableReplicas") == 3 else None

    status = await until(available)
    assert status["readyReplicas"] == 3
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Available": "True", "Progressing": "True"}


async def stand_in_kubelet(store: Store) -> None:
    """Until cancelled: bound pods become Running and Ready, deleted pods finish stopping."""
    while True:
        for item in (await store.list("pods", "default")).items:
            if item["metadata"].get("deletionTimestamp"):
                await store.delete(
                    "pods", item["metadata"]["name"], "default", grace_period_seconds=0
                )
            elif item["spec"].get("nodeName") and item["status"].get("phase") == "Pending":
                item["status"]["phase"] = "Running"
                item["status"]["conditions"] = [
                    *item["status"].get("conditions", []),
                    {"type": "Ready", "status": "True"},
                ]
                await store.update("pods", item, "default", subresource="status")
        await asyncio.sleep(0.02)


async def test_template_change_rolls_within_surge_and_unavailability(store: Store) -> None:
    """Changing the pod template rolls 4 replicas to a new ReplicaSet (revision 2) with at most
    maxSurge=1 extra pod and at most maxUnavailable=1 pod missing, and empties the old one."""
    await store.create("nodes", node("n1", cpu="16"))
    await store.create("deployments", deployment("app", 4), "default")
    kubelet = asyncio.create_task(stand_in_kubelet(store))
    try:
        await until(lambda: _running(store, "app", 4))
        current = await store.get("deployments", "app", "default")
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
        await store.update("deployments", current, "default")
        most, fewest_ready = 0, 4

        async def rolled() -> bool:
            nonlocal most, fewest_ready
            items = [
                p for p in await pods_of(store, "app") if not p["metadata"].get("deletionTimestamp")
            ]
            most = max(most, len(items))
            ready = [p for p in items if p["status"].get("phase") == "Running"]
            fewest_ready = min(fewest_ready, len(ready))
            images = {p["spec"]["containers"][0]["image"] for p in ready}
            return images == {"nginx:2"} and len(ready) == 4 and len(items) == 4

        await until(rolled, interval_seconds=0.005)
    finally:
        kubelet.cancel()
        with pytest.raises(asyncio.CancelledError):
            await kubelet
    assert most <= 5
    assert fewest_ready >= 3
    replicasets = {
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs["spec"]["replicas"]
        for rs in (await store.list("replicasets", "default")).items
    }
    assert replicasets == {"1": 0, "2": 4}


async def _running(store: Store, app: str, count: int) -> bool:
    items = await pods_of(store, app)
    return len(items) == count and all(p["status"].get("phase") == "Running" for p in items)


async def _count(store: Store, app: str, count: int) -> bool:
    return len(await pods_of(store, app)) == count


async def test_daemonset_runs_one_pod_per_eligible_node(store: Store) -> None:
    """A DaemonSet gets one pod bound to each node whose taints it tolerates, follows nodes as
    they come, and its pod goes with its node."""
    await store.create("nodes", node("n1"))
    await store.create("nodes", node("n2"))
    await store.create(
        "nodes", node("gpu", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    )
    await store.create("daemonsets", daemonset("agent"), "default")

    async def placement(expected: set[str]) -> bool:
        items = await pods_of(store, "agent")
        nodes = [p["spec"].get("nodeName") for p in items]
        return len(nodes) == len(expected) and set(nodes) == expected

    await until(lambda: placement({"n1", "n2"}))
    await store.create("nodes", node("n3"))
    await until(lambda: placement({"n1", "n2", "n3"}))
    await store.delete("nodes", "n2")
    await until(lambda: placement({"n1", "n3"}))

    async def desired() -> bool:
        status = (await store.get("daemonsets", "agent", "default")).get("status") or {}
        return (
            status.get("desiredNumberScheduled") == 2 and status.get("currentNumberScheduled") == 2
        )

    await until(desired)


async def test_daemonset_tolerating_everything_covers_tainted_nodes(store: Store) -> None:
    """A DaemonSet tolerating every taint runs on tainted and cordoned nodes too."""
    await store.create(
        "nodes", node("gpu", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    )
    await store.create("nodes", node("cordoned", unschedulable=True))
    await store.create(
        "daemonsets", daemonset("cni", tolerations=[{"operator": "Exists"}]), "default"
    )

    async def placed() -> bool:
        items = await pods_of(store, "cni")
        return {p["spec"].get("nodeName") for p in items} == {"gpu", "cordoned"}

    await until(placed)


async def test_pods_of_a_deleted_node_are_deleted(store: Store) -> None:
    """Deleting a node removes the pods bound to it; their ReplicaSet makes new ones."""
    await store.create("nodes", node("n1"))
    await store.create("deployments", deployment("svc", 2), "default")

    async def on(node_name: str) -> set[str] | None:
        items = await pods_of(store, "svc")
        if len(items) == 2 and all(p["spec"].get("nodeName") == node_name for p in items):
            return {p["metadata"]["uid"] for p in items}
        return None

    first = await until(lambda: on("n1"))
    await store.create("nodes", node("n2"))
    await store.delete("nodes", "n1")
    second = await until(lambda: on("n2"))
    assert not first & second


async def test_not_ready_node_evicts_pods_by_their_tolerations(store: Store) -> None:
    """When a node becomes unreachable, a pod tolerating it for 0 s is evicted at once, while a
    pod tolerating it forever and one with the default 300 s stay."""
    await store.create("nodes", node("n1"))
    unreachable = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    quick = pod("quick", nodeName="n1", tolerations=[{**unreachable, "tolerationSeconds": 0}])
    await store.create("pods", quick, "default")
    await store.create("pods", pod("stays", nodeName="n1", tolerations=[unreachable]), "default")
    await store.create("pods", pod("patient", nodeName="n1"), "default")
    current = await store.get("nodes", "n1")
    current["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    await store.update("nodes", current, subresource="status")

    async def evicted() -> bool:
        found = await store.get("pods", "quick", "default")
        return bool(found["metadata"].get("deletionTimestamp"))

    await until(evicted)
    for name in ("stays", "patient"):
        assert not (await store.get("pods", name, "default"))["metadata"].get("deletionTimestamp")


async def test_recreate_removes_old_pods_before_new_ones_start(store: Store) -> None:
    """With strategy Recreate, no new pod exists while an old one is still active."""
    await store.create("nodes", node("n1", cpu="16"))
    recreate = deployment("db", 2)
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    await store.create("deployments", recreate, "default")
    kubelet = asyncio.create_task(stand_in_kubelet(store))
    overlapped = False
    try:
        await until(lambda: _running(store, "db", 2))
        current = await store.get("deployments", "db", "default")
        current["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
        await store.update("deployments", current, "default")

        async def recreated() -> bool:
            nonlocal overlapped
            items = [
                p for p in await pods_of(store, "db") if not p["metadata"].get("deletionTimestamp")
            ]
            images = {p["spec"]["containers"][0]["image"] for p in items}
            overlapped = overlapped or images == {"nginx", "nginx:2"}
            return images == {"nginx:2"} and len(items) == 2

        await until(recreated, interval_seconds=0.005)
    finally:
        kubelet.cancel()
        with pytest.raises(asyncio.CancelledError):
            await kubelet
    assert not overlapped
