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
from functools import cache
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


class SchemaShape:
    """A CRD's structural schema node (openAPIV3Schema); children are built once."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.kind = _schema_kind(schema)
        self.list_type = str(schema.get("x-kubernetes-list-type", "atomic"))
        self.keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
        self._children: dict[str, Shape] = {}
        self._item: Shape | None = None

    def child(self, name: str) -> Shape:
        shape = self._children.get(name)
        if shape is None:
            properties = self.schema.get("properties") or {}
            extra = self.schema.get("additionalProperties")
            if name in properties:
                shape = SchemaShape(properties[name])
            elif isinstance(extra, dict):
                shape = SchemaShape(extra)
            else:
                shape = DEDUCED
            self._children[name] = shape
        return shape

    def item(self) -> Shape:
        if self._item is None:
            items = self.schema.get("items")
            self._item = SchemaShape(items) if isinstance(items, dict) else DEDUCED
        return self._item


def _schema_kind(s: Mapping[str, Any]) -> str:
    if s.get("type") == "array":
        return "list"
    if s.get("type") == "object" or "properties" in s or "additionalProperties" in s:
        if s.get("x-kubernetes-map-type") == "atomic":
            return "atomic"
        return "struct" if "properties" in s else "map"
    return "scalar"


class BuiltinShape:
    """A built-in kind's type, from the official client's models (`fields`): `type_name` is a
    model (`V1PodSpec`), `list[...]`, `dict(str, ...)` or a scalar; `field` names the field it
    sits in, which picks the merge key of a list (patchMergeKey, as `patches.MERGE_KEYS`).
    Built through `builtin_shape`, so each (type, field) is worked out once."""

    def __init__(self, type_name: str, field: str = "") -> None:
        self.type_name = type_name
        self.field = field
        self.keys: tuple[str, ...] = ()
        self.list_type = "atomic"
        if type_name.startswith("list["):
            self.kind = "list"
            inner = type_name[5:-1]
            if field in MERGE_KEYS and model_fields(inner):
                self.list_type, self.keys = "map", (MERGE_KEYS[field],)
            elif field in MERGE_PRIMITIVE_LISTS:
                self.list_type = "set"
        elif type_name.startswith("dict("):
            self.kind = "map"
        elif type_name in _ATOMIC_MODELS:
            self.kind = "atomic"
        else:
            self.kind = "struct" if model_fields(type_name) else "scalar"
        self._children: dict[str, Shape] = {}

    def child(self, name: str) -> Shape:
        shape = self._children.get(name)
        if shape is None:
            if self.type_name.startswith("dict("):
                shape = builtin_shape(self.type_name[len("dict(str, ") : -1], name)
            else:
                field_type = model_fields(self.type_name).get(name)
                shape = builtin_shape(field_type, name) if field_type else DEDUCED
            self._children[name] = shape
        return shape

    def item(self) -> Shape:
        return builtin_shape(self.type_name[5:-1], self.field)


@cache
def builtin_shape(type_name: str, field: str = "") -> BuiltinShape:
    return BuiltinShape(type_name, field)


# structs the Go types mark +structType=atomic: owned and replaced whole
_ATOMIC_MODELS: Final = frozenset({"V1LabelSelector"})
OBJECT_META: Final = builtin_shape("V1ObjectMeta")


def shape_of(rt: ResourceType) -> Shape:
    """How objects of `rt` merge: its CRD schema, its built-in model, or deduced."""
    if rt.schema is not None:
        return _schema_shape(rt.schema)
    return _builtin_kind_shape(rt.group, rt.version, rt.kind)


@cache
def _builtin_kind_shape(group: str, version: str, kind: str) -> Shape:
    model = model_name(group, version, kind)
    return builtin_shape(model) if model else DEDUCED


_SCHEMA_SHAPES: dict[int, SchemaShape] = {}


def _schema_shape(schema: Mapping[str, Any]) -> SchemaShape:
    # keyed by identity: the shape holds the schema, so the id is not reused while cached
    shape = _SCHEMA_SHAPES.get(id(schema))
    if shape is None:
        shape = _SCHEMA_SHAPES[id(schema)] = SchemaShape(schema)
    return shape


# ----------------------------------------------------------------- paths


def _key_element(item: Mapping[str, Any], keys: Iterable[str]) -> str:
    parts = []
    for key in sorted(keys):
        value = item[key]
        # a plain name or number is written directly: json.dumps costs microseconds per call
        # and every keyed item of every create (a pod's containers) needs one
        if value.__class__ is str and _is_plain(value):
            parts.append(f'"{key}":"{value}"')
        elif value.__class__ is int:
            parts.append(f'"{key}":{value}')
        else:
            return "k:" + json.dumps({k: item[k] for k in sorted(keys)}, separators=(",", ":"))
    return "k:{" + ",".join(parts) + "}"


def _is_plain(text: str) -> bool:
    """Whether json.dumps writes `text` as itself between quotes (printable ASCII, no quote
    and no backslash to escape)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


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
        elif shape.list_type == "set" and all(not isinstance(i, _CONTAINERS) for i in value):
            for item in value:
                out[(*path, _value_element(item))] = item
        else:
            out[path] = value
    else:
        out[path] = value


def fields_tree(obj: Mapping[str, Any], shape: Shape) -> JsonObject:
    """`to_fields_v1(field_set(obj, shape))` built in one pass: a create's entry owns all of
    the object, and creates are the hot path."""
    tree: JsonObject = {}
    for name, value in obj.items():
        if name in _IGNORED_TOP:
            continue
        if name == "metadata" and isinstance(value, dict):
            meta = {
                "f:" + meta_name: _subtree(meta_value, OBJECT_META.child(meta_name))
                for meta_name, meta_value in value.items()
                if meta_name not in _IGNORED_META
            }
            if meta:
                tree["f:metadata"] = meta
            continue
        tree["f:" + name] = _subtree(value, shape.child(name))
    return tree


_CONTAINERS: Final = (dict, list)  # a tuple: `dict | list` builds a union per evaluation
# one empty dict for every owned leaf of a create's tree: stored objects are never edited in
# place and readers get deep copies, and it spares the allocations on the create path
_LEAF: Final[JsonObject] = {}


def _subtree(value: Any, shape: Shape) -> JsonObject:
    kind = shape.kind
    if isinstance(value, dict) and value and kind in ("struct", "map"):
        node: JsonObject = {".": _LEAF} if kind == "map" else {}
        for name, child in value.items():
            # a scalar is an owned leaf whatever its shape: no call for most fields
            node["f:" + name] = (
                _subtree(child, shape.child(name)) if isinstance(child, _CONTAINERS) else _LEAF
            )
        return node
    if isinstance(value, list) and value and kind == "list":
        if shape.list_type == "map" and _keyed(value, shape.keys):
            item_shape = shape.item()
            node = {}
            for item in value:
                sub: JsonObject = {".": _LEAF}
                for name, child in item.items():
                    sub["f:" + name] = (
                        _subtree(child, item_shape.child(name))
                        if isinstance(child, _CONTAINERS)
                        else _LEAF
                    )
                node[_key_element(item, shape.keys)] = sub
            return node
        if shape.list_type == "set" and all(not isinstance(i, _CONTAINERS) for i in value):
            return {_value_element(i): _LEAF for i in value}
    return _LEAF


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
    """The nested fieldsV1 form of a set of paths, keys sorted as the apiserver writes them."""
    tree: JsonObject = {}
    for path in sorted(paths):
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
