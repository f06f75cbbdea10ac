"""Subresources of pods and workloads: pods/binding and the autoscaling/v1 Scale view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from localcloud.kube.errors import Conflict, Invalid, NotFound
from localcloud.kube.objects import JsonObject, copy_json, format_timestamp
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import label_selector_to_string
from localcloud.kube.watch import MODIFIED

if TYPE_CHECKING:
    from localcloud.kube.store import Store


class Subresources:
    """pods/binding and the scale of deployments, replicasets and custom resources with a
    scale subresource (at their CRD's specReplicasPath/statusReplicasPath), through the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def bind(self, namespace: str, pod_name: str, node_name: str) -> JsonObject:
        """Bind a pending pod to a node (what the pods/binding subresource does)."""
        store = self._store
        rt = store.resource("pods")
        pod = store._get(rt, pod_name, namespace)
        if pod.get("spec", {}).get("nodeName"):
            raise Conflict(
                f'Operation cannot be fulfilled on pods/binding "{pod_name}": pod {pod_name} is '
                f'already assigned to node "{pod["spec"]["nodeName"]}"',
                kind="pods/binding",
                name=pod_name,
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise Conflict(f'pod "{pod_name}" is being deleted, cannot be assigned to a host')
        status = copy_json(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": format_timestamp(store._clock()),
            }
        )
        status["conditions"] = conditions
        new = {
            **pod,
            "metadata": dict(pod["metadata"]),
            "spec": {**pod["spec"], "nodeName": node_name},
            "status": status,
        }
        return store._served(rt, store._commit(rt, MODIFIED, new, pod), copy=True)

    def scale(
        self, resource: str | ResourceType, name: str, namespace: str | None = None
    ) -> JsonObject:
        """The autoscaling/v1 Scale of a deployment or replicaset."""
        store = self._store
        rt = store.resource(resource)
        if not rt.has_scale:
            raise NotFound(f"{rt.group_resource} has no scale subresource")
        return _scale_of(rt, store._get(rt, name, namespace))

    def set_scale(
        self,
        resource: str | ResourceType,
        name: str,
        replicas: int,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        store = self._store
        rt = store.resource(resource)
        if not rt.has_scale:
            raise NotFound(f"{rt.group_resource} has no scale subresource")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise Invalid(
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas}: must be greater than or equal to 0"
            )
        current = store._get(rt, name, namespace)
        body = _with_path(
            {
                **current,
                "metadata": {**current["metadata"], "resourceVersion": resource_version or ""},
            },
            rt.scale_spec_path,
            replicas,
        )
        return _scale_of(rt, store._update(rt, body, namespace, None, fresh=True))


def _path(path: str) -> list[str]:
    """``.spec.replicas`` -> ["spec", "replicas"] (the simple JSON paths scale paths are)."""
    return [part for part in path.split(".") if part]


def _read_path(obj: JsonObject, path: str) -> object:
    value: object = obj
    for part in _path(path):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _with_path(obj: JsonObject, path: str, value: object) -> JsonObject:
    """A copy of ``obj`` (copied along ``path`` only) with ``value`` at ``path``."""
    parts = _path(path)
    out = dict(obj)
    node = out
    for part in parts[:-1]:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, dict) else {}
        node = node[part]
    node[parts[-1]] = value
    return out


def _replicas(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _scale_of(rt: ResourceType, obj: JsonObject) -> JsonObject:
    meta = obj["metadata"]
    if rt.scale_selector_path is not None:
        selector = _read_path(obj, rt.scale_selector_path)
        selector_text = selector if isinstance(selector, str) else ""
    else:
        selector_text = label_selector_to_string((obj.get("spec") or {}).get("selector"))
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": _replicas(_read_path(obj, rt.scale_spec_path))},
        "status": {
            "replicas": _replicas(_read_path(obj, rt.scale_status_path)),
            "selector": selector_text,
        },
    }
