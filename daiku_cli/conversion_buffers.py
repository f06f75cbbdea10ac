"""`daiku convert` for SIG Autoscaling's CapacityBuffer (`autoscaling.x-k8s.io/v1alpha1`, what
Karpenter v1.14 reads): into daiku's `daiku.dev/v1alpha1` CapacityBuffer (decision 0017).

Carried: `replicas`, `percentage`, `limits`. The pod shape comes from the PodTemplate that
`podTemplateRef` names when that PodTemplate is in the same input (its containers' requests,
summed); otherwise a warning asks for `spec.requests`. daiku keeps room in one NodePool: the
NodePool is `default` unless the buffer's `daiku.dev/nodepool` annotation names another, with a
warning. `scalableRef` (room sized from a workload) has no daiku equivalent and is dropped with
a warning, as is a provisioning strategy other than active capacity.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from scheduler_svc.core.quantity import QuantityError, resource_units

UPSTREAM_API_VERSION = "autoscaling.x-k8s.io/v1alpha1"
DAIKU_API_VERSION = "daiku.dev/v1alpha1"
NODEPOOL_ANNOTATION = "daiku.dev/nodepool"
_ACTIVE = "buffer.x-k8s.io/active-capacity"

Warn = Callable[[str, str, str], None]


def capacity_buffer(
    document: Mapping[str, Any], ref: str, warn: Warn, pending: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """The daiku CapacityBuffer for an upstream one; `pending` gets (namespace, PodTemplate)
    by buffer name, for `fill_requests` once every document is read."""
    metadata = dict(document.get("metadata") or {})
    spec = dict(document.get("spec") or {})
    name = str(metadata.get("name"))
    annotations = dict(metadata.get("annotations") or {})
    pool = str(annotations.get(NODEPOOL_ANNOTATION) or "default")
    if NODEPOOL_ANNOTATION not in annotations:
        warn(ref, "spec", f"daiku keeps room in one NodePool: spec.nodePoolRef.name is {pool!r}")
    out: dict[str, Any] = {"nodePoolRef": {"name": pool}}
    for field in ("replicas", "percentage", "limits"):
        if field in spec:
            out[field] = copy.deepcopy(spec[field])
    strategy = spec.get("provisioningStrategy", _ACTIVE)
    if strategy != _ACTIVE:
        warn(ref, "spec.provisioningStrategy", f"{strategy!r}: daiku keeps active capacity only")
    if "scalableRef" in spec:
        warn(
            ref,
            "spec.scalableRef",
            "no daiku equivalent (room sized from a workload); dropped: set spec.requests and "
            "spec.replicas or spec.percentage",
        )
    template = (spec.get("podTemplateRef") or {}).get("name")
    if template:
        pending[name] = (str(metadata.get("namespace") or "default"), str(template))
    else:
        warn(ref, "spec.requests", "required by daiku: the requests of one pod of room")
    kept = {k: v for k, v in metadata.items() if k in ("name", "labels", "annotations")}
    return {
        "apiVersion": DAIKU_API_VERSION,
        "kind": "CapacityBuffer",
        "metadata": kept,
        "spec": out,
    }


def fill_requests(
    objects: list[dict[str, Any]], pending: dict[str, tuple[str, str]], warn: Warn
) -> None:
    """Give each converted buffer its PodTemplate's requests when the template is in `objects`
    (passed through unchanged); warn for the others."""
    templates = {
        (str(o["metadata"].get("namespace") or "default"), str(o["metadata"].get("name"))): o
        for o in objects
        if o.get("kind") == "PodTemplate" and isinstance(o.get("metadata"), dict)
    }
    for obj in objects:
        if obj.get("apiVersion") != DAIKU_API_VERSION or obj.get("kind") != "CapacityBuffer":
            continue
        name = str(obj["metadata"]["name"])
        if name not in pending:
            continue
        namespace, template_name = pending[name]
        ref = f"CapacityBuffer/{name}"
        template = templates.get((namespace, template_name))
        if template is None:
            warn(
                ref,
                "spec.podTemplateRef",
                f"PodTemplate {namespace}/{template_name} is not in the input; set spec.requests "
                "to the requests of one pod of room",
            )
            continue
        try:
            obj["spec"]["requests"] = _requests_of(template)
        except QuantityError as error:
            warn(ref, "spec.podTemplateRef", f"PodTemplate {template_name}: {error}")


def _requests_of(template: Mapping[str, Any]) -> dict[str, str]:
    containers = (((template.get("template") or {}).get("spec") or {}).get("containers")) or []
    totals: dict[str, int] = {}
    for container in containers:
        requests = (container.get("resources") or {}).get("requests") or {}
        for resource, quantity in requests.items():
            totals[resource] = totals.get(resource, 0) + resource_units(resource, quantity)
    return {r: f"{v}m" if r == "cpu" else str(v) for r, v in sorted(totals.items())}
