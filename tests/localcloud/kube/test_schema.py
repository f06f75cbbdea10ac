"""Structural-schema pruning and defaulting of custom objects."""

from __future__ import annotations

from localcloud.kube.schema import JsonObject, apply_structural_schema, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 3},
                "mode": {"type": "string", "nullable": True},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "policy": {
                    "type": "object",
                    "default": {},
                    "properties": {"kind": {"type": "string", "default": "Fast"}},
                },
            },
        }
    },
}


async def test_prunes_unknown_fields_and_keeps_root_metadata() -> None:
    """Undeclared fields go; apiVersion, kind, metadata, additionalProperties and preserved
    subtrees stay."""
    obj: JsonObject = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "a"},
        "spec": {"bogus": 1, "labels": {"a": "b"}, "free": {"anything": {"goes": 1}}},
        "extra": True,
    }
    apply_structural_schema(obj, SCHEMA)
    assert obj["metadata"] == {"name": "a"}
    assert "extra" not in obj
    assert "bogus" not in obj["spec"]
    assert obj["spec"]["labels"] == {"a": "b"}
    assert obj["spec"]["free"] == {"anything": {"goes": 1}}


async def test_defaults_apply_recursively_and_to_list_items_and_nulls() -> None:
    """Missing or null non-nullable fields get defaults, inside defaults and list items too;
    a nullable null stays."""
    obj: JsonObject = {
        "spec": {"size": None, "mode": None, "items": [{"name": "a"}, {"name": "b", "weight": 5}]}
    }
    apply_structural_schema(obj, SCHEMA)
    assert obj["spec"]["size"] == 3
    assert obj["spec"]["mode"] is None
    assert [i["weight"] for i in obj["spec"]["items"]] == [1, 5]
    assert obj["spec"]["policy"] == {"kind": "Fast"}


RULED = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.zone == oldSelf.zone", "message": "zone is immutable"},
            ],
            "properties": {
                "min": {"type": "integer", "minimum": 0},
                "max": {"type": "integer"},
                "zone": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": True},
            },
        }
    },
}


async def test_types_enums_and_bounds_are_checked() -> None:
    """A value of the wrong type, outside an enum or below a minimum is a violation at its path."""
    obj = {"spec": {"min": -1, "max": "ten", "zone": "c", "port": "http"}}
    paths = sorted(v.path for v in validate(obj, RULED))
    assert paths == ["spec.max", "spec.min", "spec.zone"]


async def test_cel_rules_and_transition_rules() -> None:
    """CEL rules see `self`; transition rules see `oldSelf` on updates only."""
    good = {"spec": {"min": 1, "max": 2, "zone": "a", "port": 80}}
    assert validate(good, RULED) == []
    swapped = {"spec": {"min": 3, "max": 2, "zone": "a"}}
    assert [v.message for v in validate(swapped, RULED)] == ["min must not exceed max"]
    moved = {"spec": {"min": 1, "max": 2, "zone": "b"}}
    assert validate(moved, RULED) == []
    assert [v.message for v in validate(moved, RULED, old=good)] == ["zone is immutable"]
