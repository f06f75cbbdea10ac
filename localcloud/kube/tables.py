"""Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints the cells it
gets back; columns with priority 1 appear only with `-o wide`. The columns follow kube-apiserver's
printers for the built-ins, and a CRD's `additionalPrinterColumns` (Kubernetes JSONPath, with
filters and escaped dots: `localcloud.kube.jsonpath`) for custom resources.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from localcloud.kube import jsonpath
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import label_selector_to_string

JsonObject = dict[str, Any]
Row = list[Any]
Printer = Callable[[JsonObject, datetime], Row]


def human_duration(seconds: float) -> str:  # noqa: PLR0911 - one return per unit band
    """k8s.io/apimachinery's HumanDuration: 45s, 5m3s, 3h4m, 2d5h, 400d."""
    seconds = max(0, int(seconds))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days < 365 * 8 else f"{days // 365}y"


def age(obj: JsonObject, now: datetime) -> str:
    return since(str(obj.get("metadata", {}).get("creationTimestamp") or ""), now)


def since(timestamp: str, now: datetime) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    return human_duration((now - moment).total_seconds())


def _col(name: str, priority: int = 0, type_: str = "string", fmt: str = "") -> JsonObject:
    return {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}


def _pod_row(pod: JsonObject, now: datetime) -> Row:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container_status in statuses:
        waiting = (container_status.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _node_row(node: JsonObject, now: datetime) -> Row:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    state = (
        "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    )
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node.get("metadata", {}).get("labels") or {}
    roles = sorted(
        k.removeprefix("node-role.kubernetes.io/")
        for k in labels
        if k.startswith("node-role.kubernetes.io/")
    )
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        age(node, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _template_wide(spec: JsonObject) -> Row:
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        label_selector_to_string(spec.get("selector")) or "<none>",
    ]


def _deployment_row(deployment: JsonObject, now: datetime) -> Row:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return [
        deployment["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        age(deployment, now),
        *_template_wide(spec),
    ]


def _replicaset_row(replicaset: JsonObject, now: datetime) -> Row:
    spec, status = replicaset.get("spec") or {}, replicaset.get("status") or {}
    return [
        replicaset["metadata"]["name"],
        spec.get("replicas", 0),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        age(replicaset, now),
        *_template_wide(spec),
    ]


def _daemonset_row(daemonset: JsonObject, now: datetime) -> Row:
    spec, status = daemonset.get("spec") or {}, daemonset.get("status") or {}
    selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return [
        daemonset["metadata"]["name"],
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
        age(daemonset, now),
        *_template_wide(spec),
    ]


def _namespace_row(namespace: JsonObject, now: datetime) -> Row:
    return [
        namespace["metadata"]["name"],
        (namespace.get("status") or {}).get("phase", "Active"),
        age(namespace, now),
    ]


def _pdb_row(pdb: JsonObject, now: datetime) -> Row:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    return [
        pdb["metadata"]["name"],
        str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
        str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
        status.get("disruptionsAllowed", 0),
        age(pdb, now),
    ]


def _service_port(port: JsonObject) -> str:
    node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
    return f"{port.get('port')}{node_port}/{port.get('protocol')}"


def _service_row(service: JsonObject, now: datetime) -> Row:
    spec = service.get("spec") or {}
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = [i.get("ip") or i.get("hostname") for i in ingress] or spec.get("externalIPs")
    pending = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    ports = ",".join(_service_port(port) for port in spec.get("ports") or [])
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        service["metadata"]["name"],
        spec.get("type", ""),
        spec.get("clusterIP") or "<none>",
        ",".join(external) if external else (spec.get("externalName") or pending),
        ports or "<none>",
        age(service, now),
        selector or "<none>",
    ]


def _event_row(event: JsonObject, now: datetime) -> Row:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or ""
    last = last or event.get("metadata", {}).get("creationTimestamp", "")
    return [
        since(str(last), now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        event.get("message") or event.get("note") or "",
    ]


def _lease_row(lease: JsonObject, now: datetime) -> Row:
    return [
        lease["metadata"]["name"],
        (lease.get("spec") or {}).get("holderIdentity") or "",
        age(lease, now),
    ]


def _pvc_row(claim: JsonObject, now: datetime) -> Row:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    return [
        claim["metadata"]["name"],
        status.get("phase", ""),
        spec.get("volumeName", ""),
        (status.get("capacity") or {}).get("storage", ""),
        ",".join(status.get("accessModes") or []),
        spec.get("storageClassName") or "<unset>",
        age(claim, now),
    ]


def _pv_row(volume: JsonObject, now: datetime) -> Row:
    spec, status = volume.get("spec") or {}, volume.get("status") or {}
    claim = spec.get("claimRef") or {}
    return [
        volume["metadata"]["name"],
        (spec.get("capacity") or {}).get("storage", ""),
        ",".join(spec.get("accessModes") or []),
        spec.get("persistentVolumeReclaimPolicy", ""),
        status.get("phase", ""),
        f"{claim.get('namespace')}/{claim.get('name')}" if claim else "",
        spec.get("storageClassName", ""),
        age(volume, now),
    ]


def _crd_row(crd: JsonObject, now: datetime) -> Row:
    return [crd["metadata"]["name"], crd["metadata"].get("creationTimestamp", "")]


_WIDE = ("Containers", "Images", "Selector")
PRINTERS: dict[str, tuple[list[JsonObject], Printer]] = {
    "v1/pods": (
        [
            _col("Name", fmt="name"),
            _col("Ready"),
            _col("Status"),
            _col("Restarts", type_="string"),
            _col("Age"),
            _col("IP", 1),
            _col("Node", 1),
            _col("Nominated Node", 1),
            _col("Readiness Gates", 1),
        ],
        _pod_row,
    ),
    "v1/nodes": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Roles"),
            _col("Age"),
            _col("Version"),
            _col("Internal-IP", 1),
            _col("External-IP", 1),
            _col("OS-Image", 1),
            _col("Kernel-Version", 1),
            _col("Container-Runtime", 1),
        ],
        _node_row,
    ),
    "apps/v1/deployments": (
        [
            _col("Name", fmt="name"),
            _col("Ready"),
            _col("Up-to-date", type_="integer"),
            _col("Available", type_="integer"),
            _col("Age"),
            *(_col(n, 1) for n in _WIDE),
        ],
        _deployment_row,
    ),
    "apps/v1/replicasets": (
        [
            _col("Name", fmt="name"),
            _col("Desired", type_="integer"),
            _col("Current", type_="integer"),
            _col("Ready", type_="integer"),
            _col("Age"),
            *(_col(n, 1) for n in _WIDE),
        ],
        _replicaset_row,
    ),
    "apps/v1/daemonsets": (
        [
            _col("Name", fmt="name"),
            _col("Desired", type_="integer"),
            _col("Current", type_="integer"),
            _col("Ready", type_="integer"),
            _col("Up-to-date", type_="integer"),
            _col("Available", type_="integer"),
            _col("Node Selector"),
            _col("Age"),
            *(_col(n, 1) for n in _WIDE),
        ],
        _daemonset_row,
    ),
    "v1/namespaces": ([_col("Name", fmt="name"), _col("Status"), _col("Age")], _namespace_row),
    "v1/services": (
        [
            _col("Name", fmt="name"),
            _col("Type"),
            _col("Cluster-IP"),
            _col("External-IP"),
            _col("Port(s)"),
            _col("Age"),
            _col("Selector", priority=1),
        ],
        _service_row,
    ),
    "policy/v1/poddisruptionbudgets": (
        [
            _col("Name", fmt="name"),
            _col("Min Available"),
            _col("Max Unavailable"),
            _col("Allowed Disruptions", type_="integer"),
            _col("Age"),
        ],
        _pdb_row,
    ),
    "v1/events": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    "events.k8s.io/v1/events": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_row,
    ),
    "coordination.k8s.io/v1/leases": (
        [_col("Name", fmt="name"), _col("Holder"), _col("Age")],
        _lease_row,
    ),
    "v1/persistentvolumeclaims": (
        [
            _col("Name", fmt="name"),
            _col("Status"),
            _col("Volume"),
            _col("Capacity"),
            _col("Access Modes"),
            _col("StorageClass"),
            _col("Age"),
        ],
        _pvc_row,
    ),
    "v1/persistentvolumes": (
        [
            _col("Name", fmt="name"),
            _col("Capacity"),
            _col("Access Modes"),
            _col("Reclaim Policy"),
            _col("Status"),
            _col("Claim"),
            _col("StorageClass"),
            _col("Age"),
        ],
        _pv_row,
    ),
    "apiextensions.k8s.io/v1/customresourcedefinitions": (
        [_col("Name", fmt="name"), _col("Created At", type_="date")],
        _crd_row,
    ),
}


def _cell(column_type: str, value: Any, now: datetime) -> Any:  # noqa: PLR0911 - one per type
    """A printer-column cell as the apiextensions apiserver renders it (null when the value
    does not fit the column's type; kubectl shows `<none>`)."""
    if value is None:
        return None
    if column_type == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, separators=(",", ":")) if isinstance(value, dict | list) else value
    if column_type == "date":
        return since(value, now) if isinstance(value, str) else None
    if column_type == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if column_type == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    return value


def _custom_columns(rt: ResourceType) -> tuple[list[JsonObject], Printer]:
    specs = list(rt.printer_columns)
    columns = [_col("Name", fmt="name")]
    for spec in specs:
        column_type = spec.get("type", "string")
        columns.append(
            _col(
                str(spec.get("name", "")),
                int(spec.get("priority", 0)),
                "string" if column_type == "date" else str(column_type),
            )
        )
    has_age = any(
        str(s.get("jsonPath", "")).strip() == ".metadata.creationTimestamp" for s in specs
    )
    if not has_age:
        columns.append(_col("Age"))

    def row(obj: JsonObject, now: datetime) -> Row:
        cells: Row = [obj["metadata"]["name"]]
        for spec in specs:
            value = jsonpath.first(obj, str(spec.get("jsonPath", "")))
            cells.append(_cell(str(spec.get("type", "string")), value, now))
        if not has_age:
            cells.append(age(obj, now))
        return cells

    return columns, row


def _printer(rt: ResourceType) -> tuple[list[JsonObject], Printer]:
    if rt.key in PRINTERS:
        return PRINTERS[rt.key]
    return _custom_columns(rt)


def _row_object(obj: JsonObject, include_object: str) -> JsonObject | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType,
    objects: Iterable[JsonObject],
    now: datetime,
    *,
    resource_version: str = "",
    include_object: str = "PartialObjectMetadata",
    with_columns: bool = True,
) -> JsonObject:
    """A Table of `objects` (rows carry PartialObjectMetadata unless `include_object` says)."""
    columns, printer = _printer(rt)
    rows = []
    for obj in objects:
        row: JsonObject = {"cells": printer(obj, now)}
        row_object = _row_object(obj, include_object)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    table: JsonObject = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version} if resource_version else {},
        "rows": rows,
    }
    if with_columns:
        table["columnDefinitions"] = columns
    return table
