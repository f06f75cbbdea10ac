"""Trim mirrored objects to what the scheduler reads (client-go's informer transforms).

The mirror holds every pod of the cluster. A running pod's JSON carries much the scheduler never
reads (images, commands, env, probes, volume mounts, container statuses, IPs), and as Python
dicts it costs ~16 KiB; trimmed, under half of that (10,000 kubelet-reported pods: 161 -> 78 MB
by tracemalloc), which is what keeps 10,000 pods within the service's memory budget.

What stays, for every consumer of the mirror (provisioning, lifecycle, disruption):
- metadata (labels, annotations, ownerReferences, finalizers, deletionTimestamp …);
- of pod specs: everything but the containers' and init containers' non-scheduling fields
  (each keeps name, resources, ports, restartPolicy) and volumes other than persistentVolumeClaim
  and ephemeral ones (the only ones that constrain placement);
- of pod status: phase, the PodScheduled/Ready/DisruptionTarget conditions, nominatedNodeName,
  startTime, qosClass, reason, message;
- of nodes: everything but status.images (a long list of image names on real nodes),
  nodeInfo, addresses, daemonEndpoints and the volume lists;
- of pod specs, also not: the defaults the API server fills in that nothing here reads (DNS,
  service account, security context, scheduler name, …); of pod metadata, not generateName;
  of conditions, not lastProbeTime (always null).

Every kept object is then rebuilt by `compact`: dict keys and short strings are interned, so
the ~60 keys and the repeated values ("default", "True", "PodScheduled", label values …) of
10,000 pods are one string each instead of 10,000 copies (json.loads shares nothing across
documents). Measured with `bench.mirror_memory` (tracemalloc, localcloud-shaped pods, 60% of
them Running): 7.3 KiB a pod slimmed before compaction, 3.1 KiB after.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scheduler_svc.kube.resources import (
    NAMESPACES,
    NODE_CLAIMS,
    NODES,
    PODS,
    KubeObject,
    Resource,
)

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


# Pod spec fields the API server defaults or users set that no scheduler component reads (a
# denylist: a field added to Kubernetes later is kept until someone decides otherwise).
_UNREAD_POD_SPEC_FIELDS = frozenset(
    {
        "dnsPolicy",
        "dnsConfig",
        "schedulerName",
        "securityContext",
        "enableServiceLinks",
        "preemptionPolicy",
        "serviceAccountName",
        "serviceAccount",
        "automountServiceAccountToken",
        "hostname",
        "subdomain",
        "imagePullSecrets",
        "readinessGates",
        "hostAliases",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "ephemeralContainers",
    }
)
_UNREAD_NODE_STATUS_FIELDS = frozenset(
    {
        "images",
        "nodeInfo",
        "addresses",
        "daemonEndpoints",
        "volumesInUse",
        "volumesAttached",
        "config",
    }
)
# Strings longer than this are rarely shared (messages, JSON annotations): not interned.
_INTERN_MAX_CHARS = 64


# Values unique to one object version: interning them would only grow the interpreter's
# table of interned strings (3.7 MB at 10k pods with them in).
_UNIQUE_VALUE_KEYS = frozenset({"uid", "resourceVersion"})


def compact(value: Any) -> Any:
    """`value` rebuilt with interned dict keys and interned short strings (a new structure;
    `value` unchanged). Lists stay lists, so readers see the same types."""
    if isinstance(value, dict):
        return {
            (sys.intern(k) if type(k) is str else k): (v if k in _UNIQUE_VALUE_KEYS else compact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [compact(v) for v in value]
    if type(value) is str and len(value) <= _INTERN_MAX_CHARS:
        return sys.intern(value)
    return value


def _without_probe_time(conditions: Any) -> Any:
    if not isinstance(conditions, list):
        return conditions
    return [
        {k: v for k, v in c.items() if k != "lastProbeTime"} if isinstance(c, dict) else c
        for c in conditions
    ]


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
    """The pod without the fields no scheduler component reads, compacted (a new dict; `pod`
    unchanged)."""
    slim = dict(pod)
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and "generateName" in metadata:
        slim["metadata"] = {k: v for k, v in metadata.items() if k != "generateName"}
    spec = pod.get("spec")
    if isinstance(spec, dict):
        spec = {k: v for k, v in spec.items() if k not in _UNREAD_POD_SPEC_FIELDS}
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = _slim_containers(spec[key])
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
            slim_status["conditions"] = _without_probe_time(
                [
                    c
                    for c in conditions
                    if not isinstance(c, dict) or c.get("type") in _POD_CONDITIONS
                ]
            )
        slim["status"] = slim_status
    result: KubeObject = compact(slim)
    return result


def slim_node(node: KubeObject) -> KubeObject:
    """The node without the status fields nobody reads (images, nodeInfo, addresses …),
    compacted (a new dict; `node` unchanged)."""
    status = node.get("status")
    if isinstance(status, dict):
        kept = {k: v for k, v in status.items() if k not in _UNREAD_NODE_STATUS_FIELDS}
        node = {**node, "status": kept}
    result: KubeObject = compact(node)
    return result


def compact_object(obj: KubeObject) -> KubeObject:
    """Any other mirrored object: whole, compacted."""
    result: KubeObject = compact(obj)
    return result


def slim_namespace(namespace: KubeObject) -> KubeObject:
    """A Namespace as the scheduler reads it: name, labels (a namespaceSelector's input) and
    what the mirror needs to replace it (resourceVersion)."""
    metadata = namespace.get("metadata")
    if not isinstance(metadata, dict):
        return namespace
    kept = {k: v for k, v in metadata.items() if k in ("name", "labels", "resourceVersion")}
    result: KubeObject = compact({"metadata": kept})
    return result


SLIMMERS: dict[Resource, Callable[[KubeObject], KubeObject]] = {
    PODS: slim_pod,
    NODES: slim_node,
    NODE_CLAIMS: compact_object,
    NAMESPACES: slim_namespace,
}
