"""The three patch formats the apiserver accepts, applied to JSON-like objects.

- JSON merge patch (RFC 7386, `application/merge-patch+json`): maps merge, `null` deletes,
  lists are replaced.
- JSON patch (RFC 6902, `application/json-patch+json`): applied with the `jsonpatch` library.
- Strategic merge patch (`application/strategic-merge-patch+json`), the cases kubectl sends:
  lists with a merge key (containers by `name`, conditions by `type`, ...) are
  merged element by element, `$patch: delete` / `$patch: replace` directives,
  `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (order is honoured),
  `finalizers` merged as a set; `$retainKeys` keeps only the listed keys of its map. Unknown
  lists are replaced, as for merge patch. The merge keys come from the Kubernetes API's
  `patchMergeKey` tags, keyed by field name only (not by full path), which holds for every
  built-in type kubectl patches.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import jsonpatch
import jsonpointer

from localcloud.kube.errors import BadRequest, Invalid, UnsupportedMediaType
from localcloud.kube.resources import ResourceType

# field name -> merge key, from the `patchMergeKey` struct tags of k8s.io/api. Node
# `spec.taints` has none (it is atomic): a strategic patch replaces the whole list.
MERGE_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "addresses": "type",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "readinessGates": "conditionType",
    "images": "names",
}
# primitive lists with patchStrategy=merge (merged as sets)
MERGE_PRIMITIVE_LISTS: Final[frozenset[str]] = frozenset({"finalizers"})

_DIRECTIVE = "$patch"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"
_RETAIN_KEYS = "$retainKeys"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: returns the patched value; `target` is not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902; a failing `test` or a bad path raises Invalid naming the operation."""
    if not isinstance(operations, list):
        raise BadRequest("json patch must be a list of operations")
    try:
        result = jsonpatch.apply_patch(target, operations, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise Invalid(f"the json patch could not be applied: {error}") from error
    if not isinstance(result, dict):
        raise Invalid("the json patch did not produce an object")
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:  # noqa: PLR0912 - one branch per directive
    """Apply a strategic merge patch; returns a new value, `target` is not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive == "delete":
        return None
    result = dict(target)
    deletions: dict[str, list[Any]] = {}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            deletions[key.removeprefix(_DELETE_PRIMITIVE)] = list(value or [])
            continue
        if key.startswith(_SET_ORDER):
            orders[key.removeprefix(_SET_ORDER)] = list(value or [])
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, values in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _apply_order(key, result[key], order)
    retained = patch.get(_RETAIN_KEYS)
    if isinstance(retained, list):
        # The map keeps only the listed keys: how kubectl clears a union's old member
        # (a Deployment strategy's rollingUpdate when its type becomes Recreate).
        result = {key: value for key, value in result.items() if key in retained}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    existing = list(current) if isinstance(current, list) else []
    if field in MERGE_PRIMITIVE_LISTS:
        return existing + [v for v in patch if v not in existing]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return [copy.deepcopy(item) for item in patch]
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if i.get(_DIRECTIVE) != "replace"]
    result = existing
    for item in patch:
        key_value = item.get(merge_key)
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(merge_key) == key_value
            ),
            None,
        )
        if item.get(_DIRECTIVE) == "delete":
            if index is not None:
                result = result[:index] + result[index + 1 :]
            continue
        if index is None:
            result = [*result, strategic_merge_patch({}, item)]
        else:
            result = [*result]
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    merge_key = MERGE_KEYS.get(field)

    def identity(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [identity(o) for o in order]
    ordered = [i for w in wanted for i in items if identity(i) == w]
    rest = [i for i in items if identity(i) not in wanted]
    return ordered + rest


def apply_patch(rt: ResourceType, old: dict[str, Any], body: Any, patch_type: str) -> Any:
    """Apply a patch of `patch_type` (merge | json | strategic) to a copy of `old`."""
    if patch_type == "json":
        return json_patch(old, body)
    if not isinstance(body, dict):
        raise BadRequest(f"a {patch_type} patch must be a JSON object")
    if patch_type == "merge":
        return merge_patch(old, body)
    if patch_type == "strategic":
        if not rt.strategic_patch:
            raise UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml"
            )
        return strategic_merge_patch(old, body)
    raise UnsupportedMediaType(f"unsupported patch type {patch_type!r}")
