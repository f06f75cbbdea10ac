"""Trim mirrored objects to what the scheduler reads (client-go's informer transforms).

The mirror holds every pod of the cluster. A running pod's JSON carries much the scheduler never
reads (images, commands, env, probes, volume mounts, container statuses, IPs), and as Python
dicts it costs ~16 KiB; trimmed, under half of that (10,000 kubelet-reported pods: 161 -> 78 MB
by tracemalloc), which is what keeps 10,000 pods within the service's memory budget.

What stays, for every consumer of the mirror (provisioning, lifecycle, disruption):
- metadata, whole (labels, annotations, ownerReferences, finalizers, deletionTimestamp …);
- of pod specs: everything but the containers' and init containers' non-scheduling fields
  (each keeps name, resources, ports, restartPolicy) and volumes other than persistentVolumeClaim
  and ephemeral ones (the only ones that constrain placement);
- of pod status: phase, the PodScheduled/Ready/DisruptionTarget conditions, nominatedNodeName,
  startTime, qosClass, reason, message;
- of nodes: everything but status.images (a long list of image names on real nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler_svc.kube.resources import NODES, PODS, KubeObject, Resource

_CONTAINER_FIELDS = ("name", "resources", "ports", "restartPolicy")
_POD_STATUS_FIELDS = (
    "phase",
    "conditions",
    "nominatedNodeName",
    "startTime",
    "qosClass",
    "reason",
    "message",
)


# PodScheduled (Unschedulable: provisionable), Ready (disruption, lifecycle), DisruptionTarget
# (being evicted or preempted).
_POD_CONDITIONS = frozenset({"PodScheduled", "Ready", "DisruptionTarget"})


def _slim_containers(containers: Any) -> Any:
    if not isinstance(containers, list):
        return containers
    return [
        {k: c[k] for k in _CONTAINER_FIELDS if k in c} if isinstance(c, dict) else c
        for c in containers
    ]


def slim_pod(pod: KubeObject) -> KubeObject:
    """The pod without the fields no scheduler component reads (a new dict; `pod` unchanged)."""
    slim = dict(pod)
    spec = pod.get("spec")
    if isinstance(spec, dict):
        spec = dict(spec)
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = _slim_containers(spec[key])
        spec.pop("ephemeralContainers", None)
        volumes = spec.get("volumes")
        if isinstance(volumes, list):
            kept = [
                v
                for v in volumes
                if isinstance(v, dict) and ("persistentVolumeClaim" in v or "ephemeral" in v)
            ]
            if kept:
                spec["volumes"] = kept
            else:
                spec.pop("volumes")
        slim["spec"] = spec
    status = pod.get("status")
    if isinstance(status, dict):
        slim_status = {k: status[k] for k in _POD_STATUS_FIELDS if k in status}
        conditions = slim_status.get("conditions")
        if isinstance(conditions, list):
            slim_status["conditions"] = [
                c for c in conditions if not isinstance(c, dict) or c.get("type") in _POD_CONDITIONS
            ]
        slim["status"] = slim_status
    return slim


def slim_node(node: KubeObject) -> KubeObject:
    """The node without status.images (a new dict; `node` unchanged)."""
    status = node.get("status")
    if not isinstance(status, dict) or "images" not in status:
        return node
    return {**node, "status": {k: v for k, v in status.items() if k != "images"}}


SLIMMERS: dict[Resource, Callable[[KubeObject], KubeObject]] = {PODS: slim_pod, NODES: slim_node}
