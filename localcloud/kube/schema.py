"""What the apiserver does with a custom resource's structural schema before storing it.

1. Prune: fields the `openAPIV3Schema` does not declare are dropped (unless the node says
   `x-kubernetes-preserve-unknown-fields: true`, or declares `additionalProperties`);
   `apiVersion`, `kind` and `metadata` at the root (and in `x-kubernetes-embedded-resource`
   nodes) are always kept.
2. Nulls: a `null` for a field that is not `nullable` is dropped, so its default applies.
3. Default: a missing property with a `default` gets a copy of it, recursively (defaults inside
   a defaulted object apply too), through objects, `additionalProperties` and list items.

Type, enum, pattern and CEL (`x-kubernetes-validations`) checks are not done here.
"""

from __future__ import annotations

import copy
from typing import Any

JsonObject = dict[str, Any]
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def apply_structural_schema(obj: JsonObject, schema: JsonObject | None) -> JsonObject:
    """Prune and default `obj` (a whole custom object) in place by `schema`; returns it."""
    if not schema:
        return obj
    _walk(obj, schema, keep=_ROOT_FIELDS)
    return obj


def _walk(value: Any, schema: JsonObject, keep: tuple[str, ...] = ()) -> Any:
    if isinstance(value, dict):
        _walk_object(value, schema, keep)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _walk(item, schema["items"])
    return value


def _walk_object(value: JsonObject, schema: JsonObject, keep: tuple[str, ...]) -> None:
    properties: JsonObject = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if schema.get("x-kubernetes-embedded-resource"):
        keep = (*keep, *_ROOT_FIELDS)
    for key in list(value):
        if key in keep:
            continue
        sub = properties.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is None:
            if not preserve and (properties or additional is False or additional is None):
                del value[key]
            continue
        if value[key] is None and not sub.get("nullable"):
            del value[key]
            continue
        _walk(value[key], sub)
    for key, sub in properties.items():
        if key not in value and "default" in sub:
            value[key] = _walk(copy.deepcopy(sub["default"]), sub)
