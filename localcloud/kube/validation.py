"""The apiserver's built-in validation: names, metadata, immutable fields, schema violations."""

from __future__ import annotations

import re
from typing import Final

from localcloud.kube import builtin_rules
from localcloud.kube.errors import Invalid
from localcloud.kube.objects import JsonObject
from localcloud.kube.resources import ResourceType
from localcloud.kube.schema import Violation

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def validate_name(rt: ResourceType, name: str) -> None:
    """Invalid unless `name` is a DNS-1123 subdomain."""
    if len(name) > 253 or not _NAME.match(name):
        raise Invalid(
            f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a '
            "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character",
            kind=rt.kind,
            name=name,
            group=rt.group,
        )


def validate_object(rt: ResourceType, obj: JsonObject, old: JsonObject | None = None) -> None:
    """The apiserver's metadata checks and built-in rules that every create and update
    (replacing `old`) passes."""
    name = obj["metadata"]["name"]
    for key, value in (obj["metadata"].get("labels") or {}).items():
        if not isinstance(value, str):
            raise Invalid(
                f'{rt.kind} "{name}" is invalid: metadata.labels[{key}]: label values '
                "must be strings",
                kind=rt.kind,
                name=name,
            )
    for index, owner in enumerate(obj["metadata"].get("ownerReferences") or []):
        for field in ("apiVersion", "kind", "name", "uid"):
            if not (isinstance(owner, dict) and owner.get(field)):
                raise Invalid(
                    f'{rt.kind} "{name}" is invalid: '
                    f"metadata.ownerReferences[{index}].{field}: Required value",
                    kind=rt.kind,
                    name=name,
                )
    if rt.key == "v1/pods" and not (obj.get("spec") or {}).get("containers"):
        raise Invalid(
            f'Pod "{name}" is invalid: spec.containers: Required value',
            kind="Pod",
            name=name,
        )
    raise_violations(rt, name, builtin_rules.violations(rt, obj, old))


# What a pod update may change in spec (k8s.io/kubernetes ValidatePodUpdate).
_POD_MUTABLE_CONTAINER_FIELDS: Final = ("image",)
_POD_MUTABLE_SPEC_FIELDS: Final = (
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "tolerations",
    "schedulingGates",
)


def _pod_spec_shape(spec: JsonObject) -> JsonObject:
    shape = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC_FIELDS}
    for field in ("containers", "initContainers"):
        if field in shape:
            shape[field] = [
                {k: v for k, v in c.items() if k not in _POD_MUTABLE_CONTAINER_FIELDS}
                for c in shape[field]
            ]
    return shape


def check_immutable(rt: ResourceType, new: JsonObject, old: JsonObject) -> None:
    """The apiserver's update validation for the fields daiku's objects hold fixed."""
    name = new["metadata"]["name"]
    if rt.key == "v1/pods":
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        # most pod updates leave spec alone: one comparison instead of two shapes
        if new_spec != old_spec and _pod_spec_shape(new_spec) != _pod_spec_shape(old_spec):
            raise Invalid(
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields '
                "other than `spec.containers[*].image`, `spec.initContainers[*].image`, "
                "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                "if it was previously negative)",
                kind="Pod",
                name=name,
            )
    elif rt.group == "apps" and rt.plural in ("deployments", "replicasets", "daemonsets"):
        old_selector = (old.get("spec") or {}).get("selector")
        if (new.get("spec") or {}).get("selector") != old_selector:
            raise Invalid(
                f'{rt.kind}.apps "{name}" is invalid: spec.selector: Invalid value: '
                "field is immutable",
                kind=rt.kind,
                name=name,
                group="apps",
            )


def name_hint(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def raise_violations(rt: ResourceType, name: str, violations: list[Violation]) -> None:
    """Invalid (422) listing every violation, worded like the apiserver's field errors."""
    if not violations:
        return
    details = ", ".join(f"{v.path}: {v.message}" for v in violations)
    qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    raise Invalid(
        f'{qualified} "{name}" is invalid: {details}',
        kind=rt.kind,
        name=name,
        group=rt.group,
        causes=[{"reason": v.reason, "message": v.message, "field": v.path} for v in violations],
    )


def spec_of(rt: ResourceType, obj: JsonObject) -> JsonObject:
    """What generation tracks: all but metadata, and but status when it is a subresource."""
    skipped = ("metadata", "status") if rt.has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skipped}
