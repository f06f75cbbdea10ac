"""Merge, JSON and strategic merge patches as kubectl sends them."""

from typing import Any

import pytest

from localcloud.kube.errors import Invalid
from localcloud.kube.patches import json_patch, merge_patch, strategic_merge_patch

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"app": "web"}, "finalizers": ["a"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "envoy:1"},
        ],
        "tolerations": [{"key": "x", "operator": "Exists"}],
    },
}


async def test_merge_patch_deletes_with_null_and_replaces_lists() -> None:
    """RFC 7386: null removes a key and lists are replaced wholesale."""
    patched = merge_patch(
        POD,
        {"metadata": {"labels": {"app": None, "v": "2"}}, "spec": {"containers": [{"name": "x"}]}},
    )
    assert patched["metadata"]["labels"] == {"v": "2"}
    assert patched["spec"]["containers"] == [{"name": "x"}]
    assert POD["metadata"]["labels"] == {"app": "web"}


async def test_json_patch_applies_and_test_failure_is_invalid() -> None:
    """RFC 6902 operations apply in order; a failing test op is Invalid."""
    patched = json_patch(
        POD, [{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}]
    )
    assert patched["spec"]["containers"][0]["image"] == "nginx:2"
    with pytest.raises(Invalid):
        json_patch(POD, [{"op": "test", "path": "/metadata/name", "value": "other"}])


async def test_strategic_merge_merges_containers_by_name() -> None:
    """A container patch names its container and leaves the others alone."""
    patched = strategic_merge_patch(
        POD, {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}
    )
    containers = patched["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert containers[0]["image"] == "nginx:2"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}]


async def test_strategic_merge_delete_directive_and_primitive_lists() -> None:
    """`$patch: delete` removes an element; finalizers merge as a set and can be deleted."""
    patched = strategic_merge_patch(
        POD,
        {
            "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]},
        },
    )
    assert patched["metadata"]["finalizers"] == ["b"]
    assert [c["name"] for c in patched["spec"]["containers"]] == ["app"]


async def test_strategic_merge_replaces_lists_without_merge_key_and_honours_order() -> None:
    """Tolerations have no merge key (replaced); $setElementOrder reorders merged lists."""
    patched = strategic_merge_patch(
        POD,
        {
            "spec": {
                "tolerations": [{"key": "y", "operator": "Exists"}],
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "nginx:3"}],
            }
        },
    )
    assert patched["spec"]["tolerations"] == [{"key": "y", "operator": "Exists"}]
    assert [c["name"] for c in patched["spec"]["containers"]] == ["sidecar", "app"]


async def test_strategic_merge_cordon_and_map_replace() -> None:
    """kubectl cordon's patch sets spec.unschedulable; `$patch: replace` replaces a map."""
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "metadata": {"labels": {"x": "1"}},
    }
    cordoned = strategic_merge_patch(node, {"spec": {"unschedulable": True}})
    assert cordoned["spec"] == {
        "taints": [{"key": "a", "effect": "NoSchedule"}],
        "unschedulable": True,
    }
    replaced = strategic_merge_patch(
        node, {"metadata": {"labels": {"$patch": "replace", "y": "2"}}}
    )
    assert replaced["metadata"]["labels"] == {"y": "2"}


async def test_strategic_merge_replaces_node_taints_as_an_atomic_list() -> None:
    """Node spec.taints has no merge key: a strategic patch replaces the list, so [] clears it."""
    node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    cleared = strategic_merge_patch(node, {"spec": {"taints": []}})
    assert cleared["spec"]["taints"] == []
    swapped = strategic_merge_patch(
        node, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}
    )
    assert swapped["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]


def test_retain_keys_clears_the_other_members_of_a_union() -> None:
    """`$retainKeys` (what kubectl sends when a Deployment's strategy changes kind) keeps only
    the listed keys: switching to Recreate drops the old rollingUpdate."""
    live = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}

    assert strategic_merge_patch(live, patch) == {"spec": {"strategy": {"type": "Recreate"}}}
