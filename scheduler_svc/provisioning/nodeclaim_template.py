"""A solver plan as a NodeClaim object (daiku.dev/v1, Karpenter v1's fields), and back.

The claim carries everything a relaunch needs, so a scheduler that restarts mid-launch can
launch it again from the object alone: its requirements (instance type, zone and capacity type
`In` the plan's offerings), resources.requests, the NodePool's taints and startup taints, labels
(`daiku.dev/nodepool`, `karpenter.sh/nodepool` and the template's), the termination finalizer,
and the ordered offerings in the `daiku.dev/offerings` annotation (the requirements are sets; the
actuator needs the order).
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_svc.core.disruption import NODEPOOL_HASH_ANNOTATION, nodepool_hash
from scheduler_svc.core.model import (
    RESOURCE_EPHEMERAL_STORAGE,
    NodeClaimPlan,
    OfferingOption,
    Resources,
)
from scheduler_svc.core.quantity import resource_units
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_KARPENTER_NODEPOOL,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from scheduler_svc.kube.convert import node_class_name_of
from scheduler_svc.kube.convert_disruption import OFFERINGS_ANNOTATION
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import TERMINATION_FINALIZER, UNREGISTERED_TAINT_KEY

# The actuator refuses a launch with more offerings (INVALID_ARGUMENT); the plan lists them most
# preferred first, so the first ones are those worth keeping.
MAX_OFFERINGS = 500
_NAME_ALPHABET = string.ascii_lowercase + string.digits
_MI = 1024**2
_GI = 1024**3
_OFFERING_KEYS = (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE)
# Karpenter's karpenter.sh/nodeclaim-min-values-relaxed in daiku's group: "true" on a claim
# opened with a NodePool's minValues lowered (--min-values-policy BestEffort).
MIN_VALUES_RELAXED_ANNOTATION = "daiku.dev/nodeclaim-min-values-relaxed"
UNREGISTERED_TAINT: dict[str, str] = {"key": UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}


def format_quantity(resource: str, amount: int) -> str:
    """A base-unit amount as a Kubernetes quantity (`cpu` in millis)."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and amount % _GI == 0:
        return f"{amount // _GI}Gi"
    if amount and amount % _MI == 0:
        return f"{amount // _MI}Mi"
    return str(amount)


def resource_list(resources: Resources) -> dict[str, str]:
    """Resources as a Kubernetes ResourceList."""
    return {k: format_quantity(k, v) for k, v in resources.as_mapping().items()}


def new_nodeclaim_name(nodepool: str) -> str:
    """`<nodepool>-<5 random characters>`, as Karpenter names claims."""
    return f"{nodepool}-{''.join(secrets.choice(_NAME_ALPHABET) for _ in range(5))}"


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def nodeclaim_from_plan(plan: NodeClaimPlan, nodepool: KubeObject, *, name: str) -> KubeObject:
    """The NodeClaim object for `plan`, from its NodePool's template (at most MAX_OFFERINGS
    offerings, the most preferred)."""
    offerings = plan.offerings[:MAX_OFFERINGS]
    pool_name = str((nodepool.get("metadata") or {}).get("name", plan.nodepool))
    template = (nodepool.get("spec") or {}).get("template") or {}
    template_metadata = template.get("metadata") or {}
    template_spec = template.get("spec") or {}
    requirements: list[dict[str, Any]] = []
    relaxed = {r.key: r.relaxed for r in plan.min_values_relaxed}
    for requirement in plan.requirements:
        if requirement.key in _OFFERING_KEYS:
            continue
        entry: dict[str, Any] = {"key": requirement.key, "operator": str(requirement.operator)}
        if requirement.values:
            entry["values"] = list(requirement.values)
        if requirement.min_values is not None:
            entry["minValues"] = requirement.min_values
        if requirement.key in relaxed:
            # As Karpenter records it: the claim carries the minValues it was launched with.
            entry["minValues"] = relaxed[requirement.key]
        requirements.append(entry)
    for key, values in (
        (LABEL_INSTANCE_TYPE, _unique([o.instance_type for o in offerings])),
        (LABEL_ZONE, _unique([o.zone for o in offerings])),
        (LABEL_CAPACITY_TYPE, _unique([o.capacity_type for o in offerings])),
    ):
        requirements.append({"key": key, "operator": "In", "values": values})
    labels = {
        **{k: str(v) for k, v in (template_metadata.get("labels") or {}).items()},
        LABEL_NODEPOOL: pool_name,
        LABEL_KARPENTER_NODEPOOL: pool_name,
    }
    annotations = {
        **{k: str(v) for k, v in (template_metadata.get("annotations") or {}).items()},
        OFFERINGS_ANNOTATION: json.dumps(
            [_offering_entry(o) for o in offerings], separators=(",", ":")
        ),
        # What the NodePool was at launch: drift is a different hash (scheduler_svc.disruption).
        NODEPOOL_HASH_ANNOTATION: nodepool_hash(nodepool.get("spec") or {}),
    }
    if plan.min_values_relaxed:
        annotations[MIN_VALUES_RELAXED_ANNOTATION] = "true"
    spec: dict[str, Any] = {
        "nodeClassRef": dict(template_spec.get("nodeClassRef") or {}),
        "requirements": requirements,
        "resources": {"requests": resource_list(plan.requests)},
    }
    for field in ("taints", "startupTaints", "expireAfter", "terminationGracePeriod"):
        if template_spec.get(field):
            spec[field] = template_spec[field]
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [TERMINATION_FINALIZER],
        },
        "spec": spec,
    }


def _offering_entry(o: OfferingOption) -> list[Any]:
    """[type, zone, capacity type, price], and a reserved one's reservation id and type."""
    entry: list[Any] = [o.instance_type, o.zone, o.capacity_type, o.price_per_hour]
    if o.capacity_reservation_id:
        entry += [o.capacity_reservation_id, o.capacity_reservation_type]
    return entry


def _offering_of(entry: Any) -> OfferingOption:
    t, z, c, p, *reservation = entry
    if reservation and len(reservation) != 2:
        raise ValueError(f"an offering has 4 or 6 fields, got {entry!r}")
    rid, rtype = reservation or ("", "")
    return OfferingOption(str(t), str(z), str(c), float(p), str(rid), str(rtype))


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """What the actuator needs to launch one claim, read back from the claim object."""

    nodeclaim_name: str
    nodepool_name: str
    node_class_name: str
    offerings: tuple[OfferingOption, ...]
    labels: Mapping[str, str]
    taints: tuple[dict[str, str], ...]
    startup_taints: tuple[dict[str, str], ...]
    # spec.resources.requests' ephemeral-storage (pods and DaemonSets): what a growing root
    # volume must hold (core.root_volume).
    ephemeral_storage_bytes: int = 0


def launch_request_of(claim: KubeObject) -> LaunchRequest:
    """The launch parameters a claim carries; ValueError naming the field when unusable."""
    metadata = claim.get("metadata") or {}
    spec = claim.get("spec") or {}
    name = str(metadata.get("name", ""))
    labels = {k: str(v) for k, v in (metadata.get("labels") or {}).items()}
    raw = (metadata.get("annotations") or {}).get(OFFERINGS_ANNOTATION)
    offerings: list[OfferingOption] = []
    if raw:
        try:
            offerings = [_offering_of(entry) for entry in json.loads(raw)]
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"NodeClaim {name}: metadata.annotations[{OFFERINGS_ANNOTATION}]: {error}"
            ) from error
    else:
        # A claim written by someone else: the cross product of its requirements, in order.
        values = {
            r.get("key"): list(r.get("values") or [])
            for r in spec.get("requirements") or []
            if isinstance(r, dict) and r.get("operator") == "In"
        }
        offerings = [
            OfferingOption(t, z, c, 0.0)
            for t in values.get(LABEL_INSTANCE_TYPE, [])
            for z in values.get(LABEL_ZONE, [])
            for c in values.get(LABEL_CAPACITY_TYPE, [])
        ]
    if not offerings:
        raise ValueError(f"NodeClaim {name}: spec.requirements: no offering to launch")
    offerings = offerings[:MAX_OFFERINGS]
    node_class_name = node_class_name_of(claim) or ""
    if not node_class_name:
        raise ValueError(f"NodeClaim {name}: spec.nodeClassRef.name: missing")

    def taints(field: str) -> tuple[dict[str, str], ...]:
        return tuple(
            {k: str(v) for k, v in t.items() if k in ("key", "value", "effect")}
            for t in spec.get(field) or []
            if isinstance(t, dict)
        )

    requested = ((spec.get("resources") or {}).get("requests") or {}).get(
        RESOURCE_EPHEMERAL_STORAGE
    )
    try:
        ephemeral = resource_units(RESOURCE_EPHEMERAL_STORAGE, requested) if requested else 0
    except ValueError as error:
        raise ValueError(
            f"NodeClaim {name}: spec.resources.requests[ephemeral-storage]: {error}"
        ) from error

    return LaunchRequest(
        nodeclaim_name=name,
        nodepool_name=labels.get(LABEL_NODEPOOL) or labels.get(LABEL_KARPENTER_NODEPOOL, ""),
        node_class_name=node_class_name,
        offerings=tuple(offerings),
        labels=labels,
        taints=taints("taints"),
        startup_taints=taints("startupTaints"),
        ephemeral_storage_bytes=ephemeral,
    )
