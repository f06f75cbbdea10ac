"""Discovery documents: what `/api`, `/api/v1`, `/apis` and `/apis/<group>/<version>` return.

These are the legacy (unaggregated) forms. kubectl asks for aggregated discovery first
(`Accept: ...;as=APIGroupDiscoveryList`); answering with plain `application/json` makes
client-go fall back to these, which is what an older apiserver does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from localcloud.kube.resources import ResourceType

JsonObject = dict[str, Any]

SERVER_VERSION: JsonObject = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-localcloud",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _subresources(rt: ResourceType) -> list[JsonObject]:
    entries: list[JsonObject] = []

    def entry(
        sub: str, verbs: list[str], kind: str, group: str | None = None, version: str | None = None
    ) -> JsonObject:
        item: JsonObject = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": kind,
            "verbs": verbs,
        }
        if group is not None:
            item["group"] = group
            item["version"] = version
        return item

    if rt.has_status:
        entries.append(entry("status", ["get", "patch", "update"], rt.kind))
    if rt.has_scale:
        entries.append(entry("scale", ["get", "patch", "update"], "Scale", "autoscaling", "v1"))
    for sub in rt.extra_subresources:
        if sub == "binding":
            entries.append(entry("binding", ["create"], "Binding"))
        elif sub == "eviction":
            entries.append(entry("eviction", ["create"], "Eviction", "policy", "v1"))
        elif sub == "finalize":
            entries.append(entry("finalize", ["update"], rt.kind))
        elif sub == "log":
            entries.append(entry("log", ["get"], rt.kind))
    return entries


def resource_list(group_version: str, types: Iterable[ResourceType]) -> JsonObject:
    resources: list[JsonObject] = []
    for rt in sorted(types, key=lambda t: t.plural):
        item: JsonObject = {
            "name": rt.plural,
            "singularName": rt.singular or rt.kind.lower(),
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            item["shortNames"] = list(rt.short_names)
        if rt.categories:
            item["categories"] = list(rt.categories)
        resources.append(item)
        resources.extend(_subresources(rt))
    if group_version == "v1":
        resources.append(
            {
                "name": "bindings",
                "singularName": "binding",
                "namespaced": True,
                "kind": "Binding",
                "verbs": ["create"],
            }
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def api_versions(server_address: str) -> JsonObject:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> JsonObject:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def groups_of(types: Iterable[ResourceType]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rt in types:
        if rt.group and rt.version not in groups.setdefault(rt.group, []):
            groups[rt.group].append(rt.version)
    return groups


def api_group_list(types: Iterable[ResourceType]) -> JsonObject:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in groups_of(types).items()],
    }


def api_group(name: str, types: Iterable[ResourceType]) -> JsonObject | None:
    versions = groups_of(types).get(name)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _gv_path(group_version: str) -> str:
    return f"apis/{group_version}" if "/" in group_version else f"api/{group_version}"


def openapi_v3_root(types: Iterable[ResourceType]) -> JsonObject:
    """The OpenAPI v3 discovery root: one entry per served group/version."""
    versions = sorted({t.api_version for t in types})
    return {
        "paths": {
            _gv_path(gv): {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(gv)}?hash={_hash(gv, types)}"
            }
            for gv in versions
        }
    }


def _hash(group_version: str, types: Iterable[ResourceType]) -> str:
    import hashlib

    names = sorted(t.key for t in types if t.api_version == group_version)
    return hashlib.sha256(",".join(names).encode()).hexdigest()[:16].upper()


def openapi_v3_group_version(
    group_version: str, types: Iterable[ResourceType]
) -> JsonObject | None:
    """The paths of the OpenAPI v3 document for one group/version (the API server adds the
    schemas, `openapi.schemas`).

    It carries, per resource, the PATCH operation with its `x-kubernetes-group-version-kind`
    and the `fieldValidation` parameter: that is what kubectl checks to decide that the server
    validates fields itself (`kubectl apply`'s default `--validate=strict`), so kubectl leaves
    validation to the server as it does with kube-apiserver 1.27+.
    """
    served = [t for t in types if t.api_version == group_version]
    if not served:
        return None
    paths: JsonObject = {}
    prefix = "/" + _gv_path(group_version)
    for rt in served:
        scope = f"{prefix}/namespaces/{{namespace}}" if rt.namespaced else prefix
        operation = {
            "operationId": f"patch{rt.kind}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {
                "group": rt.group,
                "version": rt.version,
                "kind": rt.kind,
            },
            "parameters": [
                {"name": name, "in": "query", "schema": {"type": "string"}}
                for name in ("dryRun", "fieldManager", "fieldValidation", "force")
            ],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{scope}/{rt.plural}/{{name}}"] = {"patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (localcloud)", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
