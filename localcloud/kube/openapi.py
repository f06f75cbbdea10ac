"""OpenAPI v2 and v3 documents with real schemas, for `kubectl explain` and client validation.

Built-in kinds' schemas are not written here: kubernetes-validate (PyPI) ships the
Kubernetes OpenAPI definitions as JSON Schema (`_definitions.json`, one `$defs` entry per
type, with the `x-kubernetes-*` extensions and `x-kubernetes-group-version-kind`). They are
turned back into OpenAPI: `$ref`s re-pointed (`#/components/schemas/...` in v3,
`#/definitions/...` in v2; a `$ref` with siblings wrapped in `allOf`, as kube-openapi writes
it), `["string", "null"]` types reduced to one, IntOrString/Quantity `oneOf`s to strings.
A custom resource's schema is its CRD version's openAPIV3Schema with `apiVersion`, `kind`
and `metadata` (ObjectMeta) filled in, as the apiextensions apiserver publishes it.

kubernetes-validate is a development dependency: where it is absent, built-in kinds get no
schema (CRDs still do) and kubectl falls back to its compiled-in types.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, Final

from localcloud.kube.objects import JsonObject
from localcloud.kube.resources import ResourceType

_V2_REF: Final = "#/definitions/"
_V3_REF: Final = "#/components/schemas/"
_SOURCE_REF: Final = "#/$defs/"
_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@cache
def _source_definitions() -> dict[str, Any]:
    """kubernetes-validate's newest bundled `$defs` ({} when it is not installed)."""
    spec = importlib.util.find_spec("kubernetes_validate")  # optional: a dev dependency
    if spec is None or spec.origin is None:
        return {}
    root = Path(spec.origin).parent / "kubernetes-json-schema"
    versions = sorted(
        (p for p in root.glob("v*-local") if (p / "_definitions.json").is_file()),
        key=lambda p: tuple(int(n) for n in p.name[1:].split("-")[0].split(".")),
    )
    if not versions:
        return {}
    definitions: dict[str, Any] = json.loads((versions[-1] / "_definitions.json").read_text())[
        "$defs"
    ]
    return definitions


def _convert(node: Any, ref_prefix: str) -> Any:
    """A JSON Schema node of kubernetes-validate as OpenAPI."""
    if isinstance(node, list):
        return [_convert(item, ref_prefix) for item in node]
    if not isinstance(node, dict):
        return node
    if "oneOf" in node and all(isinstance(o, dict) and "type" in o for o in node["oneOf"]):
        types = {_single_type(o["type"]) for o in node["oneOf"]}
        out: JsonObject = {k: v for k, v in node.items() if k != "oneOf"}
        out["type"] = "string"
        if "integer" in types:
            out["format"] = "int-or-string"
        return out
    out = {}
    for key, value in node.items():
        if key == "$ref":
            out[key] = ref_prefix + str(value).removeprefix(_SOURCE_REF)
        elif key == "type":
            out[key] = _single_type(value)
        elif key in ("properties", "definitions"):
            out[key] = {name: _convert(child, ref_prefix) for name, child in value.items()}
        else:
            out[key] = _convert(value, ref_prefix)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}]
    return out


@cache
def _converted(name: str, ref_prefix: str) -> Any:
    return _convert(_source_definitions()[name], ref_prefix)


def _single_type(value: Any) -> Any:
    if isinstance(value, list):
        named = [t for t in value if t != "null"]
        return named[0] if named else "object"
    return value


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.removeprefix(_SOURCE_REF)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _closure(names: Iterable[str]) -> list[str]:
    """`names` and every definition they reach."""
    definitions = _source_definitions()
    seen: set[str] = set()
    pending = [n for n in names if n in definitions]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(r for r in _refs(definitions[name]) if r in definitions and r not in seen)
    return sorted(seen)


@cache
def _builtin_index() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name, from `x-kubernetes-group-version-kind`."""
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in _source_definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            index.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return index


def definition_name(rt: ResourceType) -> str:
    """The schema name of `rt`'s kind: the Kubernetes one, or the reversed-group form
    apiextensions uses for custom resources (`dev.daiku.v1.NodePool`)."""
    builtin = _builtin_index().get((rt.group, rt.version, rt.kind))
    if builtin and rt.schema is None:
        return builtin
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _custom_schema(rt: ResourceType, ref_prefix: str) -> JsonObject:
    schema: JsonObject = json.loads(json.dumps(rt.schema or {"type": "object"}))
    schema.setdefault("type", "object")
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an "
        "object.",
    }
    properties["kind"] = {
        "type": "string",
        "description": "Kind is a string value representing the REST resource this object "
        "represents.",
    }
    properties["metadata"] = {
        "allOf": [{"$ref": ref_prefix + _OBJECT_META}],
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = [
        {"group": rt.group, "kind": rt.kind, "version": rt.version}
    ]
    return schema


def schemas(types: Iterable[ResourceType], ref_prefix: str = _V3_REF) -> JsonObject:
    """Every schema the kinds of `types` need, keyed by definition name."""
    types = list(types)
    builtin = [definition_name(t) for t in types if t.schema is None]
    needed = list(builtin)
    if any(t.schema is not None for t in types):
        needed.append(_OBJECT_META)
    out: JsonObject = {name: _converted(name, ref_prefix) for name in _closure(needed)}
    for rt in types:
        if rt.schema is not None:
            out[definition_name(rt)] = _custom_schema(rt, ref_prefix)
    return out


def openapi_v2(types: Iterable[ResourceType], info: JsonObject) -> JsonObject:
    """The whole Swagger 2.0 document: definitions for every served kind."""
    return {"swagger": "2.0", "info": info, "paths": {}, "definitions": schemas(types, _V2_REF)}
