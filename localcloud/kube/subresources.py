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
    """pods/binding and deployments'/replicasets' scale, written through the store."""

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
        return _scale_of(store._get(rt, name, namespace))

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
        body = {
            **current,
            "metadata": {**current["metadata"], "resourceVersion": resource_version or ""},
            "spec": {**current.get("spec", {}), "replicas": replicas},
        }
        return _scale_of(store._update(rt, body, namespace, None, fresh=True))


def _scale_of(obj: JsonObject) -> JsonObject:
    meta = obj["metadata"]
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
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 0))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": label_selector_to_string((obj.get("spec") or {}).get("selector")),
        },
    }
