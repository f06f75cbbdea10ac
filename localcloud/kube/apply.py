"""Server-side apply and `managedFields`, as kube-apiserver's structured-merge-diff does them.

No maintained Python library implements structured-merge-diff (the Go module
sigs.k8s.io/structured-merge-diff is the only implementation), so this is a compact, pure one:

- a *field set* is a set of paths; a path element is `f:<field>`, `k:<json key>` (an item of
  an associative list, by its merge keys), `v:<json value>` (an item of a set). It is stored
  in `managedFields[].fieldsV1` in the real nested form (`{"f:spec": {"f:replicas": {}}}`,
  `"."` marking a node that is itself a member).
- a `Shape` says how a value is merged: `struct` (fields; the node is not itself owned),
  `map` (granular: labels, data; the node is owned too), `atomic` (owned and replaced
  whole), `list` with a list type `map` (keyed), `set` or `atomic`.
- `apply` merges an applied configuration into the live object, reports conflicts with
  other managers (409 unless forced, then ownership moves), and removes the fields the
  manager applied before and no longer applies when no other manager owns them.
- `record_update` keeps the entries of non-apply writes: the writer owns what it changed,
  others lose it, removed fields leave every set.

Shapes for built-in kinds come from `fields` (the official client's models); for custom
resources from the CRD's openAPIV3Schema (`x-kubernetes-list-type`, `-list-map-keys`,
`-map-type`); anything else is deduced as apiserver does (maps granular, lists atomic).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from localcloud.kube.fields import model_fields, model_name
from localcloud.kube.objects import JsonObject
from localcloud.kube.patches import MERGE_KEYS, MERGE_PRIMITIVE_LISTS
from localcloud.kube.resources import ResourceType

Path = tuple[str, ...]
FieldSet = dict[Path, Any]  # path -> the leaf value there (or NODE for an owned inner node)


class _Node:
    def __repr__(self) -> str:
        return "NODE"


NODE: Final = _Node()
_MISSING: Final = object()

# fields the apiserver never tracks (identity and server-written metadata)
_IGNORED_TOP: Final = frozenset({"apiVersion", "kind"})
_IGNORED_META: Final = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


class Shape(Protocol):
    @property
    def kind(self) -> str:
        """One of struct, map, atomic, list, scalar."""

    @property
    def list_type(self) -> str:
        """For lists: "map" (keyed by `keys`) | "set" | "atomic"."""

    @property
    def keys(self) -> tuple[str, ...]: ...

    def child(self, name: str) -> Shape: ...

    def item(self) -> Shape: ...


@dataclass(frozen=True)
class Deduced:
    """No schema: objects are granular maps, lists atomic (the apiserver's deduced type)."""

    kind: str = "map"
    list_type: str = "atomic"
    keys: tuple[str, ...] = ()

    def child(self, name: str) -> Shape:
        return DEDUCED

    def item(self) -> Shape:
        return DEDUCED


DEDUCED: Final = Deduced()


@dataclass(frozen=True)
class SchemaShape:
    """A CRD's structural schema node (openAPIV3Schema)."""

    schema: Mapping[str, Any]

    @property
    def kind(self) -> str:
        s = self.schema
        if s.get("type") == "array":
            return "list"
        if s.get("type") == "object" or "properties" in s or "additionalProperties" in s:
            if s.get("x-kubernetes-map-type") == "atomic":
                return "atomic"
            if s.get("x-kubernetes-preserve-unknown-fields") and "properties" not in s:
                return "map"
            return "struct" if "properties" in s else "map"
        return "scalar"

    @property
    def list_type(self) -> str:
        return str(self.schema.get("x-kubernetes-list-type", "atomic"))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.schema.get("x-kubernetes-list-map-keys") or ())

    def child(self, name: str) -> Shape:
        properties = self.schema.get("properties") or {}
        if name in properties:
            return SchemaShape(properties[name])
        extra = self.schema.get("additionalProperties")
        if isinstance(extra, dict):
            return SchemaShape(extra)
        return DEDUCED

    def item(self) -> Shape:
        items = self.schema.get("items")
        return SchemaShape(items) if isinstance(items, dict) else DEDUCED


@dataclass(frozen=True)
class BuiltinShape:
    """A built-in kind's type, from the official client's models (`fields`): `type_name` is a
    model (`V1PodSpec`), `list[...]`, `dict(str, ...)` or a scalar; `field` names the field it
    sits in, which picks the merge key of a list (patchMergeKey, as `patches.MERGE_KEYS`)."""

    type_name: str
    field: str = ""

    @property
    def kind(self) -> str:
        t = self.type_name
        if t.startswith("list["):
            return "list"
        if t.startswith("dict("):
            return "map"
        if t in _ATOMIC_MODELS:
            return "atomic"
        return "struct" if model_fields(t) else "scalar"

    @property
    def list_type(self) -> str:
        inner = self.type_name[5:-1]
        if self.field in MERGE_KEYS and model_fields(inner):
            return "map"
        if self.field in MERGE_PRIMITIVE_LISTS:
            return "set"
        return "atomic"

    @property
    def keys(self) -> tuple[str, ...]:
        key = MERGE_KEYS.get(self.field)
        return (key,) if key else ()

    def child(self, name: str) -> Shape:
        if self.type_name.startswith("dict("):
            return BuiltinShape(self.type_name[len("dict(str, ") : -1], name)
        field_type = model_fields(self.type_name).get(name)
        return BuiltinShape(field_type, name) if field_type else DEDUCED

    def item(self) -> Shape:
        return BuiltinShape(self.type_name[5:-1], self.field)


# structs the Go types mark +structType=atomic: owned and replaced whole
_ATOMIC_MODELS: Final = frozenset({"V1LabelSelector"})
OBJECT_META: Final = BuiltinShape("V1ObjectMeta")


def shape_of(rt: ResourceType) -> Shape:
    """How objects of `rt` merge: its CRD schema, its built-in model, or deduced."""
    if rt.schema is not None:
        return SchemaShape(rt.schema)
    model = model_name(rt.group, rt.version, rt.kind)
    return BuiltinShape(model) if model else DEDUCED


# ----------------------------------------------------------------- paths


def _key_element(item: Mapping[str, Any], keys: Iterable[str]) -> str:
    return "k:" + json.dumps({k: item[k] for k in sorted(keys)}, separators=(",", ":"))


def _value_element(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"))


def _keyed(items: list[Any], keys: tuple[str, ...]) -> bool:
    return bool(keys) and all(isinstance(i, dict) and all(k in i for k in keys) for i in items)


def field_set(obj: Mapping[str, Any], shape: Shape) -> FieldSet:
    """Every owned path of `obj` with its value (NODE for owned inner nodes)."""
    out: FieldSet = {}
    for name, value in obj.items():
        if name in _IGNORED_TOP:
            continue
        if name == "metadata" and isinstance(value, dict):
            for meta_name, meta_value in value.items():
                if meta_name not in _IGNORED_META:
                    path = ("f:metadata", "f:" + meta_name)
                    _walk(meta_value, OBJECT_META.child(meta_name), path, out)
            continue
        _walk(value, shape.child(name), ("f:" + name,), out)
    return out


def _walk(value: Any, shape: Shape, path: Path, out: FieldSet) -> None:
    if isinstance(value, dict) and value and shape.kind in ("struct", "map"):
        if shape.kind == "map":
            out[path] = NODE
        for name, child in value.items():
            _walk(child, shape.child(name), (*path, "f:" + name), out)
    elif isinstance(value, list) and value and shape.kind == "list":
        if shape.list_type == "map" and _keyed(value, shape.keys):
            for item in value:
                item_path = (*path, _key_element(item, shape.keys))
                out[item_path] = NODE
                item_shape = shape.item()
                for name, child in item.items():
                    _walk(child, item_shape.child(name), (*item_path, "f:" + name), out)
        elif shape.list_type == "set" and all(not isinstance(i, dict | list) for i in value):
            for item in value:
                out[(*path, _value_element(item))] = item
        else:
            out[path] = value
    else:
        out[path] = value


def path_string(path: Path) -> str:
    """The path as structured-merge-diff prints it: `.spec.containers[name="app"].image`."""
    parts = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            parts.append("." + rest)
        elif kind == "k":
            keys = json.loads(rest)
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
        elif kind == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)


# ----------------------------------------------------------------- fieldsV1


def to_fields_v1(paths: Iterable[Path]) -> JsonObject:
    """The nested fieldsV1 form of a set of paths."""
    tree: JsonObject = {}
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        node["."] = {}
    _strip_leaf_marks(tree)
    return tree


def _strip_leaf_marks(node: JsonObject) -> None:
    for child in node.values():
        if child:
            if list(child) == ["."]:
                del child["."]
            else:
                _strip_leaf_marks(child)


def from_fields_v1(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for element, child in tree.items():
        if element == ".":
            continue
        path = (*prefix, element)
        if not child or "." in child:
            paths.add(path)
        if child:
            paths |= from_fields_v1(child, path)
    return paths
