"""kube-apiserver's validation rules for built-in kinds, answered 422 with details.causes.

Each rule returns `Violation`s worded as the apiserver's field errors (`Invalid value: ...`,
`Forbidden: ...`, `Required value`) with the reason it puts in `details.causes`:
- containers' resource requests and limits are quantities >= 0, requests <= limits (pods and
  the pod templates of Deployments, ReplicaSets, DaemonSets);
- a workload's selector is required, non-empty and matches its template's labels;
- ConfigMap and Secret keys are config keys; once `immutable: true`, their data and the flag
  stay as they are; a Secret's type is fixed;
- no finalizer may be added to an object being deleted;
- a Service's clusterIP does not change (`services`);
- an events.k8s.io/v1 Event names its time, type, reason, action and reporter
  (`event_v1_violations`, checked before it is stored as a core/v1 Event).
Secrets are normalised before (their defaulter in `resources`): `stringData` merged into
`data` (base64), `type` defaulted to Opaque, data that is not base64 refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Final

from localcloud.kube.objects import JsonObject
from localcloud.kube.resources import ResourceType
from localcloud.kube.schema import Violation
from localcloud.kube.selectors import label_selector_from_object
from localcloud.kube.services import SERVICE_KEY, cluster_ip_violations

INVALID: Final = "FieldValueInvalid"
REQUIRED: Final = "FieldValueRequired"
FORBIDDEN: Final = "FieldValueForbidden"

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_SUFFIXES: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_WORKLOADS: Final = ("apps/v1/deployments", "apps/v1/replicasets", "apps/v1/daemonsets")


def parse_quantity(text: Any) -> Decimal | None:
    """A resource.Quantity's value (`100m` -> 0.1, `1Gi`, `1e3`), or None when malformed."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return Decimal(str(text))
    return _parse_quantity_text(str(text))


@lru_cache(maxsize=4096)  # every pod write checks a handful of quantities, mostly the same
def _parse_quantity_text(text: str) -> Decimal | None:
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        value = Decimal(number)
        if suffix[:1] in ("e", "E"):
            return value * Decimal(10) ** int(suffix[1:])
    except (InvalidOperation, ValueError):
        return None
    multiplier = _SUFFIXES.get(suffix)
    return None if multiplier is None else value * multiplier


def violations(rt: ResourceType, obj: JsonObject, old: JsonObject | None) -> list[Violation]:
    """Every rule `obj` (replacing `old` on an update) breaks."""
    found = [] if old is None else list(_finalizers(obj, old))
    key = rt.key
    if key == "v1/pods":
        if old is None or obj.get("spec") != old.get("spec"):
            found.extend(_pod_spec(obj.get("spec") or {}, "spec"))
    elif key in _WORKLOADS:
        if old is None or obj.get("spec") != old.get("spec"):
            found.extend(_workload(obj))
    elif key in ("v1/configmaps", "v1/secrets"):
        found.extend(_config(rt, obj, old))
    elif key == SERVICE_KEY and old is not None:
        found.extend(cluster_ip_violations(obj, old))
    return found


def _finalizers(obj: JsonObject, old: JsonObject | None) -> Iterator[Violation]:
    if old is None or not old["metadata"].get("deletionTimestamp"):
        return
    before = set(old["metadata"].get("finalizers") or [])
    added = [f for f in obj["metadata"].get("finalizers") or [] if f not in before]
    if added:
        listed = ", ".join(json.dumps(f) for f in added)
        yield Violation(
            "metadata.finalizers",
            "Forbidden: no new finalizers can be added if the object is being deleted, found "
            f"new finalizers []string{{{listed}}}",
            FORBIDDEN,
        )


def _pod_spec(spec: JsonObject, path: str) -> Iterator[Violation]:
    for field in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field) or []):
            if not isinstance(container, dict):
                continue
            resources = container.get("resources")
            if resources and not _resources_sound(resources):
                yield from _resources(resources, f"{path}.{field}[{index}]")


def _resources_sound(resources: JsonObject) -> bool:
    """The fast path of every pod write: requests only (no limits to compare against), each a
    quantity seen before and found sound."""
    if resources.get("limits"):
        return False
    for raw in (resources.get("requests") or {}).values():
        if _SOUND_QUANTITIES.get(raw) is not True:
            value = parse_quantity(raw)
            if value is None or value < 0:
                return False
            if isinstance(raw, str) and len(_SOUND_QUANTITIES) < 4096:
                _SOUND_QUANTITIES[raw] = True
    return True


_SOUND_QUANTITIES: dict[Any, bool] = {}


def _resources(resources: JsonObject, path: str) -> Iterator[Violation]:
    parsed: dict[str, dict[str, Decimal]] = {}
    for kind in ("requests", "limits"):
        parsed[kind] = {}
        for name, raw in (resources.get(kind) or {}).items():
            where = f"{path}.resources.{kind}[{name}]"
            value = parse_quantity(raw)
            if value is None:
                yield Violation(
                    where,
                    f'Invalid value: "{raw}": quantities must match the regular expression '
                    f"'{_QUANTITY.pattern}'",
                )
            elif value < 0:
                yield Violation(
                    where, f'Invalid value: "{raw}": must be greater than or equal to 0'
                )
            else:
                parsed[kind][name] = value
    for name, request in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and request > limit:
            raw_limit = resources["limits"][name]
            yield Violation(
                f"{path}.resources.requests",
                f'Invalid value: "{resources["requests"][name]}": must be less than or equal to '
                f"{name} limit of {raw_limit}",
            )


def _workload(obj: JsonObject) -> Iterator[Violation]:
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    selector = spec.get("selector")
    if not selector:
        yield Violation("spec.selector", "Required value", REQUIRED)
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        yield Violation(
            "spec.selector", "Invalid value: {}: empty selector is invalid for deployment"
        )
    else:
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not label_selector_from_object(selector).matches(labels):
            shown = ",".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
            yield Violation(
                "spec.template.metadata.labels",
                f"Invalid value: map[string]string{{{shown}}}: `selector` does not match "
                "template `labels`",
            )
    yield from _pod_spec(template.get("spec") or {}, "spec.template.spec")


def _config(rt: ResourceType, obj: JsonObject, old: JsonObject | None) -> Iterator[Violation]:
    for field in ("data", "binaryData"):
        for key in obj.get(field) or {}:
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                yield Violation(
                    f"{field}[{key}]",
                    f'Invalid value: "{key}": a valid config key must consist of alphanumeric '
                    "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                    "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                )
    if old is None:
        return
    if rt.key == "v1/secrets" and obj.get("type") != old.get("type"):
        yield Violation("type", f'Invalid value: "{obj.get("type")}": field is immutable')
    if old.get("immutable") is True:
        if obj.get("immutable") is not True:
            yield Violation(
                "immutable", "Forbidden: field is immutable when `immutable` is set", FORBIDDEN
            )
        for field in ("data", "binaryData"):
            if (obj.get(field) or {}) != (old.get(field) or {}):
                yield Violation(
                    field, "Forbidden: field is immutable when `immutable` is set", FORBIDDEN
                )


_EVENT_TYPES: Final = ("Normal", "Warning")
_EVENT_FIELD_MAX: Final = 128
_EVENT_NOTE_MAX: Final = 1024


def event_v1_violations(event: JsonObject) -> list[Violation]:
    """What events.k8s.io/v1's ValidateEventCreate refuses (the core/v1 API is more lenient)."""
    found: list[Violation] = []
    if not event.get("eventTime"):
        found.append(Violation("eventTime", "Required value", REQUIRED))
    if event.get("type") not in _EVENT_TYPES:
        found.append(
            Violation(
                "type",
                f'Unsupported value: "{event.get("type", "")}": supported values: '
                '"Normal", "Warning"',
                "FieldValueNotSupported",
            )
        )
    for field in ("reportingController", "reportingInstance", "action", "reason"):
        value = event.get(field)
        if not value:
            found.append(Violation(field, "Required value", REQUIRED))
        elif len(str(value)) > _EVENT_FIELD_MAX:
            found.append(
                Violation(
                    field,
                    f"Too long: may not be more than {_EVENT_FIELD_MAX} bytes",
                    "FieldValueTooLong",
                )
            )
    if len(str(event.get("note") or "")) > _EVENT_NOTE_MAX:
        found.append(
            Violation(
                "note",
                f"Too long: may not be more than {_EVENT_NOTE_MAX} bytes",
                "FieldValueTooLong",
            )
        )
    return found
