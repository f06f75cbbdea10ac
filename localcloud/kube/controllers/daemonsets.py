"""`DaemonSetController`: one pod per node that should run the DaemonSet's pod.

A node should run it when the template's nodeSelector and required node affinity match the
node and every NoSchedule/NoExecute taint is tolerated, counting the tolerations the
DaemonSet controller adds to its pods (not-ready and unreachable NoExecute; disk-, memory-,
pid-pressure and unschedulable NoSchedule; network-unavailable with hostNetwork). Its pods are
pinned to their node by required node affinity on `metadata.name` (as kube does since 1.12,
so the default scheduler binds them), labelled `pod-template-generation`, and owned by the
DaemonSet. Pods on nodes that should not run them, duplicates and pods of an older template
generation are deleted (a template change replaces every pod at once: maxUnavailable pacing is
not modelled). Status carries the desired/current/misscheduled/ready/available/updated counts.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import Informer, ObjectKey, resource_types
from localcloud.kube.controllers.pod_fit import (
    first_untolerated_taint,
    matches_node_selection,
    node_taints,
)
from localcloud.kube.controllers.reconciler import Reconciler, owner_reference
from localcloud.kube.controllers.workloads import (
    OwnedIndex,
    OwnerKeys,
    is_pod_active,
    is_pod_ready,
)
from localcloud.kube.errors import ApiError, NotFound
from localcloud.kube.store import DELETED, Store, copy_json

JsonObject = dict[str, Any]
TEMPLATE_GENERATION_LABEL: Final = "pod-template-generation"
_DEFAULT_TOLERATIONS: Final = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
_HOST_NETWORK_TOLERATION: Final = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}

log = structlog.get_logger("localcloud.kube.controllers.daemonsets")


def _now() -> datetime:
    return datetime.now(UTC)


def daemon_pod_spec(template_spec: JsonObject, node_name: str) -> JsonObject:
    """The template's pod spec pinned to `node_name`, with the DaemonSet tolerations added."""
    spec: JsonObject = copy_json(template_spec)
    tolerations = list(spec.get("tolerations") or [])
    wanted = list(_DEFAULT_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(_HOST_NETWORK_TOLERATION)
    for toleration in wanted:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"]
            for t in tolerations
        ):
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }
    return spec


def pinned_node(pod: JsonObject) -> str | None:
    """The node a DaemonSet pod is for: its nodeName, else its metadata.name affinity."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = field.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return None


def should_run(template_spec: JsonObject, node: JsonObject) -> bool:
    """Whether a DaemonSet with this pod template belongs on `node`."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    probe = {"spec": {k: v for k, v in template_spec.items() if k != "affinity"}}
    probe["spec"]["affinity"] = {
        k: v for k, v in (template_spec.get("affinity") or {}).items() if k == "nodeAffinity"
    }
    if not matches_node_selection(probe, labels, name):
        return False
    tolerations = daemon_pod_spec(template_spec, name)["tolerations"]
    return first_untolerated_taint(node_taints(node), tolerations) is None


class DaemonSetController(Reconciler):
    """Keeps one pod per eligible node for each DaemonSet; see the module docstring."""

    name = "daemonset"

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = _now) -> None:
        super().__init__()
        self.store = store
        self._rt = resource_types(store)
        self.clock = clock
        self.pods_index = OwnedIndex()
        self._owners = OwnerKeys(self, self.pods_index)
        self.daemonsets = Informer(store, "daemonsets", self._owners.on_owner)
        self.nodes = Informer(store, "nodes", self._on_node)
        self.pods = Informer(store, "pods", self._owners.on_owned)

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        if previous is not None and kind != DELETED and _node_view(previous) == _node_view(node):
            return  # a heartbeat: nothing a DaemonSet looks at changed
        for key in self._owners.owner_keys():
            self.enqueue(key)

    async def run(self) -> None:
        await self.run_with(self.daemonsets, self.nodes, self.pods)

    async def reconcile(self, key: ObjectKey) -> None:
        ds = self.daemonsets.cache.get(key)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return
        template = (ds.get("spec") or {}).get("template") or {}
        template_spec = template.get("spec") or {}
        generation = str(ds["metadata"].get("generation", 1))
        nodes = {n["metadata"]["name"]: n for n in self.nodes.cache.values()}
        eligible = {name for name, node in nodes.items() if should_run(template_spec, node)}
        by_node: dict[str, list[JsonObject]] = {}
        doomed: list[JsonObject] = []
        for pod in self.pods_index.owned(ds["metadata"]["uid"]):
            if not is_pod_active(pod):
                continue
            node_name = pinned_node(pod)
            if node_name is None or node_name not in eligible:
                doomed.append(pod)
                continue
            by_node.setdefault(node_name, []).append(pod)
        for node_name, pods in by_node.items():
            pods.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
            current = [
                p
                for p in pods
                if (p["metadata"].get("labels") or {}).get(TEMPLATE_GENERATION_LABEL) == generation
            ]
            keep = current[:1]
            doomed += [p for p in pods if p not in keep]
            by_node[node_name] = keep
        for pod in doomed:
            await self._delete(pod)
        for node_name in sorted(eligible):
            if not by_node.get(node_name):
                await self._create(ds, template, node_name, generation)
        await self._write_status(ds, eligible)

    async def _create(
        self, ds: JsonObject, template: JsonObject, node_name: str, generation: str
    ) -> None:
        meta = ds["metadata"]
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            TEMPLATE_GENERATION_LABEL: generation,
        }
        pod = {
            "metadata": {
                **copy_json(template.get("metadata") or {}),
                "generateName": f"{meta['name']}-",
                "labels": labels,
                "ownerReferences": [owner_reference(ds)],
            },
            "spec": daemon_pod_spec(template.get("spec") or {}, node_name),
        }
        pod["metadata"].pop("name", None)
        try:
            created = await self.store.create(self._rt["pods"], pod, meta["namespace"])
        except ApiError as error:
            log.warning("daemon_pod_create_failed", daemonset=meta["name"], error=str(error))
            return
        self.pods_index.observe("ADDED", created)

    async def _delete(self, pod: JsonObject) -> None:
        meta = pod["metadata"]
        try:
            gone = await self.store.delete(
                self._rt["pods"],
                meta["name"],
                meta["namespace"],
                preconditions={"uid": meta["uid"]},
            )
        except NotFound:
            return
        except ApiError as error:
            log.warning("daemon_pod_delete_failed", pod=meta["name"], error=str(error))
            return
        self.pods_index.observe(
            "MODIFIED" if gone["metadata"].get("deletionTimestamp") else DELETED, gone
        )

    async def _write_status(self, ds: JsonObject, eligible: set[str]) -> None:
        generation = str(ds["metadata"].get("generation", 1))
        scheduled = [p for p in self.pods_index.owned(ds["metadata"]["uid"]) if is_pod_active(p)]
        on_nodes = {pinned_node(p) for p in scheduled if (p.get("spec") or {}).get("nodeName")}
        ready = [p for p in scheduled if is_pod_ready(p)]
        status = {
            "desiredNumberScheduled": len(eligible),
            "currentNumberScheduled": len({n for n in on_nodes if n in eligible}),
            "numberMisscheduled": len({n for n in on_nodes if n not in eligible}),
            "numberReady": len(ready),
            "numberAvailable": len(ready),
            "numberUnavailable": max(0, len(eligible) - len(ready)),
            "updatedNumberScheduled": sum(
                1
                for p in scheduled
                if (p["metadata"].get("labels") or {}).get(TEMPLATE_GENERATION_LABEL) == generation
                and (p.get("spec") or {}).get("nodeName")
            ),
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        if status["numberUnavailable"] == 0:
            del status["numberUnavailable"]
        current = ds.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()) and set(current) <= set(status):
            return
        meta = ds["metadata"]
        try:
            await self.store.update(
                self._rt["daemonsets"],
                {**ds, "status": status},
                meta["namespace"],
                subresource="status",
            )
        except ApiError as error:
            log.debug("status_update_skipped", daemonset=meta["name"], error=str(error))


def _node_view(node: JsonObject) -> Any:
    """What decides whether a node should run a DaemonSet's pod."""
    return (
        node["metadata"].get("labels"),
        (node.get("spec") or {}).get("taints"),
    )
