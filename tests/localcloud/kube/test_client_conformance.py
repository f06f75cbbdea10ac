"""Conformance through kubernetes_asyncio: the semantics daiku's watch loops rely on."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from localcloud.kube.server import KubeApiServer
from tests.polling import until

# kubernetes_asyncio's generated APIs accept plain dicts as bodies at run time (they go out as
# JSON unchanged) though their stubs ask for models such as V1Pod; these tests send the wire
# form, so bodies are typed Any.
WireBody = Any

# The generated APIs take `_content_type` at run time (and reject unknown keywords), but their
# stubs omit it; spread from a dict so the other arguments stay checked.
MERGE_PATCH: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


def pod_body(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> WireBody:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def status_of(error: ApiException) -> dict[str, Any]:
    assert error.body is not None, f"{error.status} came without a body"
    body: dict[str, Any] = json.loads(error.body)
    return body


async def test_unauthenticated_requests_get_a_401_status(kube: KubeApiServer) -> None:
    """A missing or wrong bearer token is a 401 Status object; /version needs none."""
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with session.get(
                f"{kube.url}/api/v1/pods", headers=headers, ssl=False
            ) as response:
                assert response.status == 401
                body = await response.json()
                assert (body["kind"], body["reason"], body["code"]) == (
                    "Status",
                    "Unauthorized",
                    401,
                )
        async with session.get(f"{kube.url}/version", ssl=False) as response:
            assert (await response.json())["major"] == "1"


async def test_list_then_watch_resumes_from_the_list_version(k8s: client.ApiClient) -> None:
    """A watch from a list's resourceVersion replays exactly the changes made after the list."""
    core = client.CoreV1Api(k8s)
    await core.create_namespaced_pod("default", pod_body("before"))
    listed = await core.list_namespaced_pod("default")
    assert [p.metadata.name for p in listed.items] == ["before"]
    await core.create_namespaced_pod("default", pod_body("after"))
    await core.patch_namespaced_pod("before", "default", {"metadata": {"labels": {"x": "1"}}})
    await core.delete_namespaced_pod("before", "default")
    seen = []
    async with watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=1,
    ) as stream:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                break
    assert seen == [("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "before")]


async def test_bookmarks_arrive_when_allowed(k8s: client.ApiClient) -> None:
    """With allowWatchBookmarks a quiet watch gets BOOKMARKs carrying the current version."""
    core = client.CoreV1Api(k8s)
    listed = await core.list_node()
    # with _preload_content=False the call returns the raw aiohttp response, not a V1NodeList
    response = cast(
        aiohttp.ClientResponse,
        await core.list_node(
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
            _preload_content=False,
        ),
    )
    first = json.loads(await response.content.readline())
    response.release()
    assert first["type"] == "BOOKMARK"
    assert first["object"]["metadata"]["resourceVersion"] == listed.metadata.resource_version


async def test_watch_from_a_compacted_version_is_410_then_relist_recovers(
    kube: KubeApiServer, k8s: client.ApiClient
) -> None:
    """A watch from a version older than the retained window fails with 410; a relist and a
    watch from its version work."""
    core = client.CoreV1Api(k8s)
    old = (await core.list_node()).metadata.resource_version
    for i in range(120):  # the fixture's window keeps 50 events per resource
        await kube.store.create("nodes", {"metadata": {"name": f"n{i}"}})

    async def watch_from_old_version() -> None:
        async with watch.Watch().stream(
            core.list_node, resource_version=old, timeout_seconds=1
        ) as stream:
            async for _ in stream:
                pass

    with pytest.raises(ApiException) as gone:
        await watch_from_old_version()
    assert gone.value.status == 410
    relisted = await core.list_node()
    assert len(relisted.items) == 120
    await core.delete_node("n0")
    async with watch.Watch().stream(
        core.list_node, resource_version=relisted.metadata.resource_version, timeout_seconds=1
    ) as stream:
        async for event in stream:
            assert (event["type"], event["object"].metadata.name) == ("DELETED", "n0")
            break


async def test_conflicts_and_already_exists(k8s: client.ApiClient) -> None:
    """A stale resourceVersion on replace is 409 Conflict; creating an existing name is 409
    AlreadyExists."""
    core = client.CoreV1Api(k8s)
    created = await core.create_namespaced_pod("default", pod_body("p"))
    created.metadata.labels = {"a": "1"}
    await core.replace_namespaced_pod("p", "default", created)
    created.metadata.labels = {"a": "2"}
    with pytest.raises(ApiException) as conflict:
        await core.replace_namespaced_pod("p", "default", created)
    assert (conflict.value.status, status_of(conflict.value)["reason"]) == (409, "Conflict")
    with pytest.raises(ApiException) as exists:
        await core.create_namespaced_pod("default", pod_body("p"))
    assert (exists.value.status, status_of(exists.value)["reason"]) == (409, "AlreadyExists")
    with pytest.raises(ApiException) as missing:
        await core.read_namespaced_pod("nope", "default")
    assert status_of(missing.value)["message"] == 'pods "nope" not found'


async def test_delete_status_codes(kube: KubeApiServer) -> None:
    """A delete that removes the object answers 200; one held by a finalizer answers 202."""
    headers = {"Authorization": f"Bearer {kube.token}"}
    await kube.store.create("nodes", {"metadata": {"name": "gone"}})
    await kube.store.create("nodes", {"metadata": {"name": "held", "finalizers": ["x/y"]}})
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.delete(f"{kube.url}/api/v1/nodes/gone", ssl=False) as response:
            assert response.status == 200
        async with session.delete(f"{kube.url}/api/v1/nodes/held", ssl=False) as response:
            assert response.status == 202
            assert (await response.json())["metadata"]["deletionTimestamp"]


async def test_finalizer_holds_deletion(k8s: client.ApiClient) -> None:
    """A node with a finalizer survives delete with a deletionTimestamp until the finalizer goes."""
    core = client.CoreV1Api(k8s)
    node: WireBody = {"metadata": {"name": "n1", "finalizers": ["daiku.dev/termination"]}}
    await core.create_node(node)
    await core.delete_node("n1")
    held = await core.read_node("n1")
    assert held.metadata.deletion_timestamp is not None
    await core.patch_node("n1", [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as gone:
        await core.read_node("n1")
    assert gone.value.status == 404


async def test_status_subresource_isolation(k8s: client.ApiClient) -> None:
    """Writes to the main endpoint ignore status; writes to /status ignore spec."""
    core = client.CoreV1Api(k8s)
    await core.create_namespaced_pod("default", pod_body("p"))
    await core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    assert (await core.read_namespaced_pod("p", "default")).status.phase == "Pending"
    await core.patch_namespaced_pod_status(
        "p", "default", {"status": {"phase": "Running"}, "spec": {"nodeName": "n9"}}
    )
    pod = await core.read_namespaced_pod_status("p", "default")
    assert pod.status.phase == "Running"
    assert pod.spec.node_name is None  # the stubs say str, but an unbound pod has none


async def test_label_and_field_selectors(k8s: client.ApiClient) -> None:
    """Label selectors (=, !=, in, notin, exists, !exists) and field selectors filter lists."""
    core = client.CoreV1Api(k8s)
    await core.create_namespaced_pod(
        "default", pod_body("a", {"app": "web", "tier": "1"}, node="n1")
    )
    await core.create_namespaced_pod("default", pod_body("b", {"app": "db"}, node="n2"))
    await core.create_namespaced_pod("kube-system", pod_body("c", {"app": "web"}))

    def names(listed: client.V1PodList) -> list[str]:
        return sorted(p.metadata.name for p in listed.items)

    pods = core.list_pod_for_all_namespaces
    assert names(await pods(label_selector="app=web")) == ["a", "c"]
    assert names(await pods(label_selector="app!=web")) == ["b"]
    assert names(await pods(label_selector="app in (web,db),tier")) == ["a"]
    assert names(await pods(label_selector="app notin (web),!tier")) == ["b"]
    assert names(await pods(field_selector="spec.nodeName=n2")) == ["b"]
    assert names(await pods(field_selector="metadata.namespace=kube-system")) == ["c"]
    assert names(await pods(field_selector="spec.nodeName=,status.phase=Pending")) == ["c"]


async def test_patch_flavours(k8s: client.ApiClient) -> None:
    """JSON patch, merge patch and strategic merge patch each apply as the apiserver does."""
    core = client.CoreV1Api(k8s)
    body = pod_body("p", {"app": "web"})
    body["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    await core.create_namespaced_pod("default", body)
    await core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}
    )  # strategic: merged by container name
    pod = await core.read_namespaced_pod("p", "default")
    assert [(c.name, c.image) for c in pod.spec.containers] == [
        ("app", "nginx:2"),
        ("sidecar", "envoy"),
    ]
    await core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"labels": {"app": None, "v": "2"}}},
        **MERGE_PATCH,
    )
    await core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]
    )
    pod = await core.read_namespaced_pod("p", "default")
    assert (pod.metadata.labels, pod.metadata.annotations) == ({"v": "2"}, {"a": "b"})


async def test_eviction_respects_pod_disruption_budget(k8s: client.ApiClient) -> None:
    """Evicting the last pod a PodDisruptionBudget needs is refused with 429."""
    core, policy = client.CoreV1Api(k8s), client.PolicyV1Api(k8s)
    for name in ("a", "b"):
        await core.create_namespaced_pod("default", pod_body(name, {"app": "web"}, node="n1"))
        await core.patch_namespaced_pod_status(
            name,
            "default",
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )
    budget: WireBody = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    await policy.create_namespaced_pod_disruption_budget("default", budget)
    eviction: WireBody = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "default"},
    }
    await core.create_namespaced_pod_eviction("a", "default", eviction)
    assert (await core.read_namespaced_pod("a", "default")).metadata.deletion_timestamp is not None
    second: WireBody = {**eviction, "metadata": {"name": "b"}}
    with pytest.raises(ApiException) as blocked:
        await core.create_namespaced_pod_eviction("b", "default", second)
    assert blocked.value.status == 429
    assert status_of(blocked.value)["details"]["causes"][0]["reason"] == "DisruptionBudget"


async def test_custom_resources_follow_their_crd(k8s: client.ApiClient) -> None:
    """An applied CRD serves its kind (cluster-scoped, with a status subresource) through the
    custom objects API."""
    extensions = client.ApiextensionsV1Api(k8s)
    crd: WireBody = {
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    await extensions.create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(k8s)
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"size": 1},
    }
    await custom.create_cluster_custom_object("example.com", "v1", "gadgets", body)
    # kubernetes_asyncio labels a dict body json-patch for custom objects; like the real
    # apiserver we refuse that, so callers name the merge patch type
    with pytest.raises(ApiException) as mislabelled:
        await custom.patch_cluster_custom_object(
            "example.com", "v1", "gadgets", "g", {"spec": {"size": 2}}
        )
    assert mislabelled.value.status == 400
    await custom.patch_cluster_custom_object_status(
        "example.com", "v1", "gadgets", "g", {"status": {"ready": True}}, **MERGE_PATCH
    )
    await custom.patch_cluster_custom_object(
        "example.com", "v1", "gadgets", "g", {"spec": {"size": 2}}, **MERGE_PATCH
    )
    gadget = await custom.get_cluster_custom_object("example.com", "v1", "gadgets", "g")
    assert (gadget["spec"], gadget["status"], gadget["metadata"]["generation"]) == (
        {"size": 2},
        {"ready": True},
        2,
    )
    listed = await custom.list_cluster_custom_object("example.com", "v1", "gadgets")
    assert [g["metadata"]["name"] for g in listed["items"]] == ["g"]


async def test_scale_subresource_and_binding(k8s: client.ApiClient) -> None:
    """Deployments scale through /scale; pods bind to a node through /binding."""
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)
    deployment: WireBody = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "x"}]},
            },
        },
    }
    await apps.create_namespaced_deployment("default", deployment)
    await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
    scale = await apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (4, "app=web")
    await core.create_namespaced_pod("default", pod_body("p"))
    binding: WireBody = {
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    await core.create_namespaced_binding("default", binding, _preload_content=False)
    assert (await core.read_namespaced_pod("p", "default")).spec.node_name == "n1"


async def test_query_booleans_in_any_case_and_tables(kube: KubeApiServer) -> None:
    """watch=True and watch=1 both stream; a Table Accept header returns rows with cells."""
    headers = {"Authorization": f"Bearer {kube.token}"}
    await kube.store.create("nodes", {"metadata": {"name": "n1"}})
    async with aiohttp.ClientSession(headers=headers) as session:
        for value in ("True", "1", "true"):
            url = f"{kube.url}/api/v1/nodes?watch={value}&timeoutSeconds=1"
            async with session.get(url, ssl=False) as response:
                line = await asyncio.wait_for(response.content.readline(), 5)
                assert json.loads(line)["type"] == "ADDED"
        table_accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
        async with session.get(
            f"{kube.url}/api/v1/nodes", headers=table_accept, ssl=False
        ) as response:
            table = await response.json()
        assert table["kind"] == "Table"
        assert table["rows"][0]["cells"][0] == "n1"
        assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Status"]


async def test_watch_list_initial_events_end_with_a_bookmark(kube: KubeApiServer) -> None:
    """sendInitialEvents=true streams the current objects, then a BOOKMARK annotated
    k8s.io/initial-events-end."""
    await kube.store.create("nodes", {"metadata": {"name": "n1"}})
    await kube.store.create("nodes", {"metadata": {"name": "n2"}})
    headers = {"Authorization": f"Bearer {kube.token}"}
    query = (
        "watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=2"
    )
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.get(f"{kube.url}/api/v1/nodes?{query}", ssl=False) as response,
    ):
        lines = [
            json.loads(await asyncio.wait_for(response.content.readline(), 5)) for _ in range(3)
        ]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in lines[:2]] == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
    ]
    assert lines[2]["type"] == "BOOKMARK"
    assert lines[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_closing_the_server_ends_open_watches_promptly() -> None:
    """Stopping the server ends an open watch stream at once instead of hanging its client."""
    server = KubeApiServer(bookmark_interval_seconds=30)
    await server.start()
    headers = {"Authorization": f"Bearer {server.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get(f"{server.url}/api/v1/pods?watch=true") as response:
            await until(lambda: server.api.open_watches, timeout_seconds=10)
            started = asyncio.get_running_loop().time()
            await server.close()
            assert await asyncio.wait_for(response.content.read(), 5) == b""
        assert asyncio.get_running_loop().time() - started < 3


METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
METADATA_LIST_ACCEPT = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)


async def test_metadata_only_reads_as_client_gos_metadata_informers_send_them(
    kube: KubeApiServer,
) -> None:
    """`as=PartialObjectMetadata[List]` answers get, list and watch with each object's metadata
    only (kind PartialObjectMetadata, meta.k8s.io/v1), as controller-runtime's metadata
    informers read them."""
    await kube.store.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "b"}}})
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get(
            f"{kube.url}/api/v1/nodes/n1", headers={"Accept": METADATA_ACCEPT}, ssl=False
        ) as response:
            one = await response.json()
        async with session.get(
            f"{kube.url}/api/v1/nodes", headers={"Accept": METADATA_LIST_ACCEPT}, ssl=False
        ) as response:
            listed = await response.json()
        async with session.get(
            f"{kube.url}/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=1",
            headers={"Accept": METADATA_ACCEPT},
            ssl=False,
        ) as response:
            event = json.loads(await asyncio.wait_for(response.content.readline(), 5))

    assert (one["kind"], one["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert set(one) == {"kind", "apiVersion", "metadata"}
    assert one["metadata"]["labels"] == {"a": "b"}
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert listed["metadata"]["resourceVersion"]
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("PartialObjectMetadata", "n1")
    ]
    assert event["type"] == "ADDED"
    assert set(event["object"]) == {"kind", "apiVersion", "metadata"}


async def test_yaml_reads_and_media_types_nobody_serves(kube: KubeApiServer) -> None:
    """`Accept: application/yaml` answers a get or list in YAML; a header naming only types the
    server does not produce is 406 Not Acceptable."""
    await kube.store.create("nodes", {"metadata": {"name": "n1"}})
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get(
            f"{kube.url}/api/v1/nodes/n1", headers={"Accept": "application/yaml"}, ssl=False
        ) as response:
            assert response.content_type == "application/yaml"
            node = yaml.safe_load(await response.text())
        async with session.get(
            f"{kube.url}/api/v1/nodes", headers={"Accept": "application/yaml"}, ssl=False
        ) as response:
            nodes = yaml.safe_load(await response.text())
        async with session.get(
            f"{kube.url}/api/v1/nodes", headers={"Accept": "text/html"}, ssl=False
        ) as response:
            refused = (response.status, (await response.json())["reason"])

    assert (node["kind"], node["metadata"]["name"]) == ("Node", "n1")
    assert (nodes["kind"], [n["metadata"]["name"] for n in nodes["items"]]) == ("NodeList", ["n1"])
    assert refused == (406, "NotAcceptable")
