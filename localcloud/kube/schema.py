"""What the apiserver does with a custom resource's structural schema before storing it.

1. Prune: fields the `openAPIV3Schema` does not declare are dropped (unless the node says
   `x-kubernetes-preserve-unknown-fields: true`, or declares `additionalProperties`);
   `apiVersion`, `kind` and `metadata` at the root (and in `x-kubernetes-embedded-resource`
   nodes) are always kept.
2. Nulls: a `null` for a field that is not `nullable` is dropped, so its default applies.
3. Default: a missing property with a `default` gets a copy of it, recursively (defaults inside
   a defaulted object apply too), through objects, `additionalProperties` and list items.

`validate()` then checks the result as the apiserver does: types, enums, patterns, bounds
(jsonschema, with `nullable` and `x-kubernetes-int-or-string` translated), then every
`x-kubernetes-validations` CEL rule (cel-python) with `self` bound to the value at its node and,
on updates, `oldSelf` to the old value (transition rules are skipped on create, and when the old
value is absent). A rule cel-python cannot compile (a Kubernetes-only CEL library function) is
skipped rather than refusing every object; a rule that fails or errors refuses the object.
On updates, rules under a value equal to the old one are not evaluated: kube-apiserver's
validation ratcheting (CRDValidationRatcheting, on by default since 1.30) lets an unchanged
value stand, and it keeps a status write from re-running every spec rule (cel-python
interprets a rule in about a millisecond). Results are also cached per (rule, self, oldSelf):
rules are pure, and a thousand NodeClaims share the same requirements.
"""

from __future__ import annotations

import copy
import enum
import json
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Final

import celpy
import jsonschema
import structlog
from celpy.adapter import json_to_cel

log = structlog.get_logger("localcloud.kube.schema")

JsonObject = dict[str, Any]
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def apply_structural_schema(
    obj: JsonObject, schema: JsonObject | None, pruned: list[str] | None = None
) -> JsonObject:
    """Prune and default `obj` (a whole custom object) in place by `schema`; returns it.
    The paths of pruned unknown fields are appended to `pruned` when given."""
    if not schema:
        return obj
    _walk(obj, schema, "", pruned, keep=_ROOT_FIELDS)
    return obj


def _walk(
    value: Any, schema: JsonObject, path: str, pruned: list[str] | None, keep: tuple[str, ...] = ()
) -> Any:
    if isinstance(value, dict):
        _walk_object(value, schema, path, pruned, keep)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{index}]", pruned)
    return value


def _walk_object(
    value: JsonObject,
    schema: JsonObject,
    path: str,
    pruned: list[str] | None,
    keep: tuple[str, ...],
) -> None:
    properties: JsonObject = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if schema.get("x-kubernetes-embedded-resource"):
        keep = (*keep, *_ROOT_FIELDS)
    for key in list(value):
        if key in keep:
            continue
        child = f"{path}.{key}" if path else key
        sub = properties.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is None:
            if not preserve and (properties or additional is False or additional is None):
                del value[key]
                if pruned is not None:
                    pruned.append(child)
            continue
        if value[key] is None and not sub.get("nullable"):
            del value[key]
            continue
        _walk(value[key], sub, child, pruned)
    for key, sub in properties.items():
        if key not in value and "default" in sub:
            value[key] = _walk(copy.deepcopy(sub["default"]), sub, key, None)


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason the apiserver refuses a custom object: `spec.size`, `must be >= 1`."""

    path: str
    message: str
    reason: str = "FieldValueInvalid"  # as details.causes names it


def _json_schema(node: Any) -> Any:
    """OpenAPI v3 (structural) -> JSON Schema: nullable and int-or-string made explicit."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: JsonObject = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: _json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_json_schema(sub) for sub in value]
        elif key in ("default", "nullable", "example") or key.startswith("x-kubernetes-"):
            continue
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# root keywords whose errors are the sum of their parts: with only these at the root, each
# top-level field (spec, status) is checked on its own, and its errors are kept by value
_SPLITTABLE_ROOT: Final = frozenset({"type", "required", "properties", "description", "title"})
_CACHED_FIELDS_MAX: Final = 8192


class _SchemaCheck:
    """jsonschema over a whole custom object, each top-level field's errors remembered by
    its value: a thousand NodeClaims with the same requirements are checked once, and a
    status write does not check the unchanged spec again. The errors, their order and their
    paths are those of one validator over the whole object."""

    def __init__(self, schema: JsonObject) -> None:
        body: JsonObject = _json_schema(schema)
        # metadata is checked by the apiserver's ObjectMeta rules, not by the CRD's schema
        body.get("properties", {}).pop("metadata", None)
        self._whole = jsonschema.Draft202012Validator(body)
        self._steps: list[jsonschema.protocols.Validator | dict[str, Any]] | None = None
        if set(body) <= _SPLITTABLE_ROOT:
            # keyword by keyword in the schema's order, as iter_errors goes
            self._steps = [
                {name: jsonschema.Draft202012Validator(sub) for name, sub in value.items()}
                if keyword == "properties"
                else jsonschema.Draft202012Validator({keyword: value})
                for keyword, value in body.items()
                if keyword not in ("description", "title")
            ]
        self._fields: dict[tuple[str, bytes], tuple[Violation, ...]] = {}

    def violations(self, obj: JsonObject) -> list[Violation]:
        if self._steps is None or not isinstance(obj, dict):
            return [
                Violation(_path(e.absolute_path), e.message) for e in self._whole.iter_errors(obj)
            ]
        found: list[Violation] = []
        for step in self._steps:
            if isinstance(step, dict):
                for name, validator in step.items():
                    if name in obj:
                        found.extend(self._field_violations(name, validator, obj[name]))
            else:
                found.extend(
                    Violation(_path(e.absolute_path), e.message) for e in step.iter_errors(obj)
                )
        return found

    def _field_violations(
        self, name: str, validator: jsonschema.protocols.Validator, value: Any
    ) -> tuple[Violation, ...]:
        # pickle, not JSON: its bytes tell 1 from True and NaN from null, so equal bytes are
        # an equal value; a value pickle refuses is checked every time
        try:
            key = (name, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError):
            key = None
        if key is not None and (known := self._fields.get(key)) is not None:
            return known
        violations = tuple(
            Violation(_path((name, *e.absolute_path)), e.message)
            for e in validator.iter_errors(value)
        )
        if key is not None:
            if len(self._fields) >= _CACHED_FIELDS_MAX:
                self._fields.clear()
            self._fields[key] = violations
        return violations


@cache
def _program(rule: str) -> celpy.Runner | None:
    environment = celpy.Environment()
    try:
        return environment.program(environment.compile(rule))
    except Exception as error:  # cel-python raises several unrelated types
        log.warning("cel_rule_skipped", rule=rule, error=str(error))
        return None


def _rules(
    schema: JsonObject, value: Any, old: Any, path: str
) -> Iterator[tuple[str, JsonObject, Any, Any]]:
    """(path, validation, value, old value or None) for every CEL rule over a present value
    that changed (ratcheting: an unchanged subtree of an update is not checked again)."""
    if old is not None and value == old:
        return
    for validation in schema.get("x-kubernetes-validations") or []:
        yield path, validation, value, old
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for name, sub_value in value.items():
            sub = properties.get(name) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from _rules(sub, sub_value, old_map.get(name), f"{path}.{name}".lstrip("."))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            # list items have no stable identity without list-type=map: no oldSelf for them
            yield from _rules(schema["items"], item, None, f"{path}[{index}]")


def validate(
    obj: JsonObject, schema: JsonObject | None, old: JsonObject | None = None
) -> list[Violation]:
    """Every reason the apiserver would refuse `obj` (already pruned and defaulted)."""
    if not schema:
        return []
    found = _cached_check(id(schema), schema).violations(obj)
    if found:
        return found  # CEL rules assume a structurally valid object
    for path, validation, value, old_value in _rules(schema, obj, old, ""):
        rule = str(validation.get("rule", ""))
        transition = "oldSelf" in rule
        if transition and old_value is None:
            continue
        outcome = _outcome(
            rule,
            json.dumps(value, sort_keys=True),
            json.dumps(old_value, sort_keys=True) if transition else None,
        )
        if outcome is _Outcome.HOLDS:
            continue
        if outcome is _Outcome.FAILS:
            message = validation.get("message") or f"Invalid value: failed rule: {rule}"
            found.append(Violation(path or "<root>", str(message)))
        else:  # an evaluation error refuses the object, as in k8s
            found.append(Violation(path or "<root>", f"failed rule {rule!r}: {outcome}"))
    return found


class _Outcome(enum.Enum):
    HOLDS = "holds"
    FAILS = "fails"


@lru_cache(maxsize=8192)
def _outcome(rule: str, value_json: str, old_json: str | None) -> _Outcome | str:
    """Whether `rule` holds for self (and oldSelf), given as JSON text so the result can be
    cached; an evaluation error is returned as its message. A rule that cannot compile holds."""
    program = _program(rule)
    if program is None:
        return _Outcome.HOLDS
    activation = {"self": json_to_cel(json.loads(value_json))}
    if old_json is not None:
        activation["oldSelf"] = json_to_cel(json.loads(old_json))
    try:
        result = program.evaluate(activation)
    except Exception as error:  # cel-python raises several unrelated types
        return str(error)
    if isinstance(result, celpy.celtypes.BoolType) and bool(result):
        return _Outcome.HOLDS
    return _Outcome.FAILS


_CHECKS: dict[int, tuple[JsonObject, _SchemaCheck]] = {}


def _cached_check(key: int, schema: JsonObject) -> _SchemaCheck:
    cached = _CHECKS.get(key)
    if cached is None or cached[0] is not schema:
        cached = _CHECKS[key] = (schema, _SchemaCheck(schema))
    return cached[1]


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".") or "<root>"
