"""Validate custom objects against daiku's CRDs the way an API server would.

What an API server does on create, and what this module reproduces:
1. apply the structural schema's defaults (objects and list items, recursively);
2. reject unknown fields (kubectl's default `--validate=strict`): every schema object node with
   `properties` and without `additionalProperties`/`x-kubernetes-preserve-unknown-fields` is
   closed;
3. check types, enums, patterns, bounds with JSON Schema (jsonschema, Draft 2020-12; the
   `x-kubernetes-*` keywords are ignored by it, int-or-string is expressed as `anyOf`);
4. evaluate every `x-kubernetes-validations` CEL rule with cel-python, `self` bound to the
   value at that node. Transition rules (those using `oldSelf`) need an old object and are
   skipped, as the API server skips them on create.

Not reproduced: CEL cost estimation and the Kubernetes-only CEL libraries (`find`,
`quantity`, ...); the CRDs use only standard CEL (`matches`, `startsWith`, `all`, `exists`) so
that every rule is evaluated here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy.adapter import json_to_cel

CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"
CRD_FILES = {
    "NodePool": "daiku.dev_nodepools.yaml",
    "NodeClaim": "daiku.dev_nodeclaims.yaml",
    "EC2NodeClass": "daiku.dev_ec2nodeclasses.yaml",
    "NodeOverlay": "daiku.dev_nodeoverlays.yaml",
    "CapacityBuffer": "daiku.dev_capacitybuffers.yaml",
}
# The served version of each kind (v1 unless it is still alpha, as Karpenter's NodeOverlay is).
CRD_VERSIONS = {"NodeOverlay": "v1alpha1", "CapacityBuffer": "v1alpha1"}


@dataclass(frozen=True)
class SchemaViolation:
    """One reason the API server would refuse the object."""

    path: str
    message: str


def load_crd(kind: str) -> dict[str, Any]:
    """The CRD document for `kind` (NodePool, NodeClaim, EC2NodeClass or NodeOverlay)."""
    crd: dict[str, Any] = yaml.safe_load((CRD_DIR / CRD_FILES[kind]).read_text())
    return crd


@cache
def _openapi_schema(kind: str) -> dict[str, Any]:
    wanted = CRD_VERSIONS.get(kind, "v1")
    (version,) = [v for v in load_crd(kind)["spec"]["versions"] if v["name"] == wanted]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of the schema where objects with declared properties reject unknown fields."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties"):
            out[key] = {name: _closed(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _closed(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_closed(sub) for sub in value]
        elif key == "default":
            continue  # defaults are applied, not checked, by validation
        else:
            out[key] = value
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Return `value` with the schema's defaults filled in, as the API server stores it."""
    if isinstance(value, dict):
        result = dict(value)
        for name, sub in schema.get("properties", {}).items():
            if name not in result and "default" in sub:
                result[name] = copy.deepcopy(sub["default"])
            if name in result:
                result[name] = apply_defaults(sub, result[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in list(result.items()):
                if name not in schema.get("properties", {}):
                    result[name] = apply_defaults(extra, item)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def _cel_nodes(schema: dict[str, Any], value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """(path, rule, value) for every CEL rule that applies to a present value."""
    for validation in schema.get("x-kubernetes-validations", []):
        yield path, validation["rule"], value
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, sub_value in value.items():
            if name in properties:
                yield from _cel_nodes(properties[name], sub_value, f"{path}.{name}")
            elif isinstance(extra, dict):
                yield from _cel_nodes(extra, sub_value, f"{path}[{name!r}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _cel_nodes(schema["items"], item, f"{path}[{index}]")


@cache
def _cel_program(rule: str) -> celpy.Runner:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def cel_rules(kind: str) -> list[str]:
    """Every CEL rule in the CRD's schema, in document order."""
    rules: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(v["rule"] for v in node.get("x-kubernetes-validations", []))
            for sub in node.values():
                walk(sub)
        elif isinstance(node, list):
            for sub in node:
                walk(sub)

    walk(_openapi_schema(kind))
    return rules


def compile_cel_rule(rule: str) -> None:
    """Raise celpy.CELParseError when `rule` is not valid CEL."""
    _cel_program(rule)


def violations(obj: dict[str, Any]) -> list[SchemaViolation]:
    """Every reason the API server would refuse `obj` on create (empty when it is accepted)."""
    schema = _openapi_schema(obj["kind"])
    defaulted = apply_defaults(schema, obj)
    found = [
        SchemaViolation(
            path="." + ".".join(str(p) for p in error.absolute_path), message=error.message
        )
        for error in jsonschema.Draft202012Validator(
            _closed(schema), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        ).iter_errors(defaulted)
    ]
    if found:
        return found  # CEL rules assume a structurally valid object, as the API server's do
    for path, rule, value in _cel_nodes(schema, defaulted, ""):
        if "oldSelf" in rule:
            continue
        result = _cel_program(rule).evaluate({"self": json_to_cel(value)})
        # An evaluation error rejects the object, as it does in the API server.
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            found.append(SchemaViolation(path=path or ".", message=f"failed rule: {rule}"))
    return found
