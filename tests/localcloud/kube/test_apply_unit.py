"""The pure structured-merge-diff core: field sets, fieldsV1, merge, removal, Update entries."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.kube.apply import (
    DEDUCED,
    SchemaShape,
    builtin_shape,
    field_set,
    from_fields_v1,
    path_string,
    to_fields_v1,
)
from localcloud.kube.errors import Conflict
from localcloud.kube.managed_fields import Writer, apply, default_manager, record_update

POD = builtin_shape("V1Pod")
ONE = Writer("one", "v1", time="2026-01-01T00:00:00Z")
TWO = Writer("two", "v1", time="2026-01-01T00:00:01Z")


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_fields_v1_round_trips_and_paths_print_as_structured_merge_diff() -> None:
    obj = pod(containers=[{"name": "a", "image": "x"}])
    obj["metadata"]["finalizers"] = ["f/1"]
    paths = set(field_set(obj, POD))
    tree = to_fields_v1(paths)
    assert tree == {
        "f:metadata": {"f:finalizers": {'v:"f/1"': {}}},
        "f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}}},
    }
    assert from_fields_v1(tree) == paths
    assert path_string(("f:spec", "f:containers", 'k:{"name":"a"}', "f:image")) == (
        '.spec.containers[name="a"].image'
    )
    assert path_string(("f:metadata", "f:finalizers", 'v:"f/1"')) == '.metadata.finalizers[="f/1"]'


def test_tolerations_are_atomic_and_label_selectors_too() -> None:
    obj = pod(tolerations=[{"key": "k"}])
    assert field_set(obj, POD)[("f:spec", "f:tolerations")] == [{"key": "k"}]
    deployment = builtin_shape("V1Deployment")
    spec = {"spec": {"selector": {"matchLabels": {"a": "b"}}}}
    assert set(field_set(spec, deployment)) == {("f:spec", "f:selector")}


def test_crd_schema_list_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["key", "op"],
                        "items": {"type": "object", "properties": {"key": {}, "op": {}}},
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set"},
                    "plain": {"type": "array"},
                },
            }
        },
    }
    obj = {"spec": {"items": [{"key": "a", "op": "In"}], "tags": ["x"], "plain": [1]}}
    assert set(field_set(obj, SchemaShape(schema))) == {
        ("f:spec", "f:items", 'k:{"key":"a","op":"In"}'),
        ("f:spec", "f:items", 'k:{"key":"a","op":"In"}', "f:key"),
        ("f:spec", "f:items", 'k:{"key":"a","op":"In"}', "f:op"),
        ("f:spec", "f:tags", 'v:"x"'),
        ("f:spec", "f:plain"),
    }


def test_removed_fields_stay_while_another_manager_owns_them() -> None:
    first = apply(None, pod(containers=[{"name": "a", "image": "x"}]), POD, ONE, force=False)
    both = apply(first, pod(containers=[{"name": "a", "image": "x"}]), POD, TWO, force=False)
    left = apply(both, pod(containers=[{"name": "b", "image": "y"}]), POD, ONE, force=False)
    assert [c["name"] for c in left["spec"]["containers"]] == ["a", "b"]
    alone = apply(first, pod(containers=[{"name": "b", "image": "y"}]), POD, ONE, force=False)
    assert [c["name"] for c in alone["spec"]["containers"]] == ["b"]


def test_same_value_is_shared_different_value_conflicts_force_moves() -> None:
    first = apply(None, pod(nodeName="n1"), POD, ONE, force=False)
    shared = apply(first, pod(nodeName="n1"), POD, TWO, force=False)
    assert [e["manager"] for e in shared["metadata"]["managedFields"]] == ["one", "two"]
    with pytest.raises(Conflict) as refused:
        apply(first, pod(nodeName="n2"), POD, TWO, force=False)
    assert (
        refused.value.message == 'Apply failed with 1 conflict: conflict with "one": .spec.nodeName'
    )
    forced = apply(first, pod(nodeName="n2"), POD, TWO, force=True)
    assert [e["manager"] for e in forced["metadata"]["managedFields"]] == ["two"]
    assert forced["spec"]["nodeName"] == "n2"


def test_update_entries_take_changed_fields_and_keep_unchanged_entries() -> None:
    created = pod(nodeName="n1", hostname="h")
    created["metadata"]["managedFields"] = record_update(None, created, POD, ONE)
    changed = {**created, "spec": {"nodeName": "n2", "hostname": "h"}}
    entries = record_update(created, changed, POD, TWO)
    assert [(e["manager"], e["fieldsV1"]) for e in entries] == [
        ("one", {"f:spec": {"f:hostname": {}}}),
        ("two", {"f:spec": {"f:nodeName": {}}}),
    ]
    assert record_update(created, created, POD, TWO) == created["metadata"]["managedFields"]


def test_default_manager_and_deduced_shapes() -> None:
    assert default_manager("kubectl/v1.32.0 (linux/amd64)") == "kubectl"
    assert default_manager("") == "unknown"
    assert set(field_set({"data": {"a": [1]}}, DEDUCED)) == {("f:data",), ("f:data", "f:a")}
