"""Unknown fields in built-in objects, as the apiserver's decoder finds them.

The real apiserver decodes a built-in object into its Go type: a field the type does not
declare is dropped, and reported by the request's `fieldValidation` (Strict: 400; Warn, the
default: a `Warning` header per field; Ignore: silently). The declared fields come from the
official client's models (`kubernetes_asyncio.client.models`, generated from the same OpenAPI
document as the Go types), so no schema is written by hand. Importing those ~900 modules takes
seconds, so `builtin_fields.json` holds the part reachable from the served kinds, written by
`python -m localcloud.kube.fields` (a test checks it matches the installed client). Custom
resources are pruned by their structural schema instead (`schema.apply_structural_schema`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Final

from localcloud.kube.errors import BadRequest
from localcloud.kube.objects import JsonObject, copy_json
from localcloud.kube.resources import ResourceType

# type strings of the generated models that hold any value (IntOrString, RawExtension, ...)
_LEAF_TYPES: Final = frozenset({"str", "int", "bool", "float", "object", "datetime", "date"})

# json field name -> the model's type string for it
_Fields = dict[str, str]


FIELD_VALIDATION_MODES: Final = ("Ignore", "Warn", "Strict")


class FieldValidation:
    """The `fieldValidation` of the write being served, and the warnings it produced.

    Outside `requested` (in-process callers) built-in objects are stored as given; inside it,
    unknown fields are dropped and reported as the mode says. CRD pruning reports through
    `report` too."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.warnings: list[str] = []

    def requested(self, mode: str) -> _Requested:
        """Apply `mode` to the writes inside the `with` block; it gives the warnings they
        produce."""
        if mode not in FIELD_VALIDATION_MODES:
            raise BadRequest(
                f'invalid fieldValidation "{mode}": must be one of Ignore, Warn, Strict'
            )
        return _Requested(self, mode)

    def check_builtin(self, rt: ResourceType, obj: JsonObject) -> JsonObject:
        """`obj` without the fields its built-in kind does not declare (a copy when any)."""
        if self.mode is None:
            return obj
        model = _model_name(rt.group, rt.version, rt.kind)
        if model is not None and not _needs_rewrite(obj, model):
            return obj  # the common case: one walk, no paths built, nothing copied
        unknown: list[str] = []
        if model is not None:
            _prune(obj, model, "", unknown, delete=False)
            if _times_to_normalise(obj, model, ""):
                obj = copy_json(obj)
                _normalise_times(obj, model, "")
        if not unknown:
            return obj
        self.report(rt, unknown)
        obj = copy_json(obj)
        _prune(obj, model or "", "", [], delete=True)
        return obj

    def report(self, rt: ResourceType, unknown: list[str]) -> None:
        """Strict: BadRequest naming every unknown field; Warn: one warning each."""
        if not unknown or self.mode in (None, "Ignore"):
            return
        fields = ", ".join(f'unknown field "{path}"' for path in unknown)
        if self.mode == "Strict":
            raise BadRequest(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {fields}"
            )
        self.warnings.extend(f'unknown field "{path}"' for path in unknown)


class _Requested:
    """`FieldValidation.requested`'s block: a class, not a generator, as every HTTP write
    enters one (a generator-based context manager costs a few microseconds more)."""

    __slots__ = ("_mode", "_owner", "_previous")

    def __init__(self, owner: FieldValidation, mode: str) -> None:
        self._owner, self._mode = owner, mode
        self._previous: tuple[str | None, list[str]] = (None, [])

    def __enter__(self) -> list[str]:
        owner = self._owner
        self._previous = owner.mode, owner.warnings
        owner.mode, owner.warnings = self._mode, []
        return owner.warnings

    def __exit__(self, *_: object) -> None:
        self._owner.mode, self._owner.warnings = self._previous


def _needs_rewrite(value: Any, type_name: str) -> bool:
    """Whether `value` has a field its type does not declare or a time not written as the
    apiserver writes it (BadRequest for a time that is no time): what `_prune` and
    `_times_to_normalise` would find, without building a path per field."""
    items: Iterable[Any]
    if type_name.startswith("list["):
        items = value if isinstance(value, list) else ()
    elif type_name.startswith("dict("):
        items = value.values() if isinstance(value, dict) else ()
    else:
        return isinstance(value, dict) and _model_needs_rewrite(value, type_name)
    item_type = _item_type(type_name)
    if item_type in _LEAF_TYPES:
        return False
    return any(_needs_rewrite(item, item_type) for item in items)


def _model_needs_rewrite(value: JsonObject, type_name: str) -> bool:
    fields = _fields(type_name)
    for key, item in value.items():
        declared = fields.get(key)
        if declared is None:
            return True
        if declared == "datetime":
            if isinstance(item, str) and _normalised_time(item, key) != item:
                return True
        elif declared not in _LEAF_TYPES and item is not None and _needs_rewrite(item, declared):
            return True
    return False


@cache
def _item_type(type_name: str) -> str:
    """The type of the items of `list[T]` or the values of `dict(str, T)`."""
    if type_name.startswith("list["):
        return type_name[5:-1]
    return type_name[type_name.index(",") + 1 : -1].strip()


def _prune(value: Any, type_name: str, path: str, unknown: list[str], *, delete: bool) -> None:
    if type_name in _LEAF_TYPES or value is None:
        return
    if type_name.startswith("list["):
        if isinstance(value, list):
            item_type = type_name[5:-1]
            for index, item in enumerate(value):
                _prune(item, item_type, f"{path}[{index}]", unknown, delete=delete)
        return
    if type_name.startswith("dict("):
        if isinstance(value, dict):
            value_type = type_name[type_name.index(",") + 1 : -1].strip()
            for key, item in value.items():
                _prune(item, value_type, f"{path}[{key}]", unknown, delete=delete)
        return
    if not isinstance(value, dict):
        return
    fields = _fields(type_name)
    for key in list(value):
        declared = fields.get(key)
        child_path = f"{path}.{key}" if path else key
        if declared is None:
            unknown.append(child_path)
            if delete:
                del value[key]
        else:
            _prune(value[key], declared, child_path, unknown, delete=delete)


# metav1.MicroTime fields (microseconds kept); every other time is a metav1.Time (seconds).
_MICRO_TIME_FIELDS: Final = frozenset({"eventTime", "renewTime", "acquireTime", "lastObservedTime"})


def _times_to_normalise(value: Any, type_name: str, key: str) -> bool:
    """True when a time in `value` is not written the way the apiserver writes it back."""
    found: list[bool] = []
    _walk_times(
        value,
        type_name,
        key,
        lambda text, field: found.append(_normalised_time(text, field) != text),
    )
    return any(found)


def _normalise_times(value: Any, type_name: str, key: str) -> None:
    """Every time in `value` rewritten as RFC 3339 in UTC (`Z`), as the apiserver encodes a
    metav1.Time (whole seconds) or MicroTime (microseconds); in place."""
    _walk_times(value, type_name, key, None)


def _walk_times(
    value: Any, type_name: str, key: str, check: Callable[[str, str], None] | None
) -> None:
    if isinstance(value, dict) and not type_name.startswith(("list[", "dict(")):
        fields = _fields(type_name)
        for child, item in value.items():
            declared = fields.get(child)
            if declared == "datetime" and isinstance(item, str):
                if check is not None:
                    check(item, child)
                else:
                    value[child] = _normalised_time(item, child)
            elif declared is not None:
                _walk_times(item, declared, child, check)
    elif isinstance(value, list) and type_name.startswith("list["):
        for item in value:
            _walk_times(item, type_name[5:-1], key, check)
    elif isinstance(value, dict) and type_name.startswith("dict("):
        inner = type_name[type_name.index(",") + 1 : -1].strip()
        for item in value.values():
            _walk_times(item, inner, key, check)


@lru_cache(maxsize=4096)  # objects written together share their times
def _normalised_time(text: str, field: str) -> str:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:  # RFC 3339 requires the offset
        raise BadRequest(
            f'{field}: parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse'
        )
    moment = moment.astimezone(UTC)
    if field in _MICRO_TIME_FIELDS:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


_TABLE_PATH: Final = Path(__file__).with_name("builtin_fields.json")


@cache
def _table() -> dict[str, Any]:
    """{"kinds": {"apps/v1/Deployment": "V1Deployment"}, "types": {model: {field: type}}}"""
    table: dict[str, Any] = json.loads(_TABLE_PATH.read_text())
    return table


def _fields(type_name: str) -> _Fields:
    fields: _Fields = _table()["types"].get(type_name, {})
    return fields


model_fields = _fields


@cache
def _model_name(group: str, version: str, kind: str) -> str | None:
    api_version = f"{group}/{version}" if group else version
    name: str | None = _table()["kinds"].get(f"{api_version}/{kind}")
    return name


def generate_table(kinds: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The field table for `kinds` ((group, version, kind)) from the installed client's models:
    each kind's model (`V1Pod`, or group-prefixed where names collide: `CoreV1Event`,
    `EventsV1Event`) and every model reachable from it."""
    from kubernetes_asyncio.client import models

    def model_for(group: str, version: str, kind: str) -> str | None:
        prefix = (group.split(".", maxsplit=1)[0] or "core").capitalize()
        version_part = version[:1].upper() + version[1:]
        for name in (f"{prefix}{version_part}{kind}", f"{version_part}{kind}"):
            if hasattr(getattr(models, name, None), "openapi_types"):
                return name
        return None

    kind_models: dict[str, str] = {}
    types: dict[str, _Fields] = {}
    pending: list[str] = []
    for group, version, kind in kinds:
        name = model_for(group, version, kind)
        if name is not None:
            kind_models[f"{group}/{version}/{kind}" if group else f"{version}/{kind}"] = name
            pending.append(name)
    while pending:
        name = pending.pop()
        if name in types:
            continue
        model = getattr(models, name)
        types[name] = {model.attribute_map[a]: t for a, t in sorted(model.openapi_types.items())}
        for type_string in types[name].values():
            inner = _innermost(type_string)
            if inner not in _LEAF_TYPES and inner not in types:
                pending.append(inner)
    return {"kinds": dict(sorted(kind_models.items())), "types": dict(sorted(types.items()))}


def _innermost(type_string: str) -> str:
    while True:
        if type_string.startswith("list["):
            type_string = type_string[5:-1]
        elif type_string.startswith("dict("):
            type_string = type_string[type_string.index(",") + 1 : -1].strip()
        else:
            return type_string


def served_kinds() -> list[tuple[str, str, str]]:
    from localcloud.kube.resources import BUILTIN_RESOURCES

    return [(rt.group, rt.version, rt.kind) for rt in BUILTIN_RESOURCES]


if __name__ == "__main__":
    _TABLE_PATH.write_text(json.dumps(generate_table(served_kinds()), indent=0) + "\n")


model_name = _model_name
