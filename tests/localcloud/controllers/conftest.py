"""Fixtures for the control-plane behaviours: an in-process store and object builders."""

from __future__ import annotations

from typing import Any

from localcloud.kube.store import Store

JsonObject = dict[str, Any]


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[JsonObject] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    zone: str = "us-east-1a",
) -> JsonObject:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    spec: JsonObject = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> JsonObject:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **spec,
        },
    }


def pod_scheduled(obj: JsonObject) -> JsonObject | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


async def unschedulable_message(store: Store, name: str, namespace: str = "default") -> str | None:
    condition = pod_scheduled(await store.get("pods", name, namespace))
    if condition and condition.get("status") == "False":
        assert condition.get("reason") == "Unschedulable"
        return str(condition.get("message"))
    return None


async def node_of(store: Store, name: str, namespace: str = "default") -> str | None:
    found = (await store.get("pods", name, namespace)).get("spec", {}).get("nodeName")
    return str(found) if found else None
