"""Chunked lists (`limit`/`continue`) over HTTP, as kube-apiserver serves them."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl


async def make_pods(kube: KubeApiServer, names: list[str], namespace: str = "default") -> None:
    for name in names:
        await kube.store.create(
            "pods",
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"containers": [{"name": "app", "image": "pause"}]},
            },
        )


async def test_pages_follow_continue_to_the_end_in_order(
    kube: KubeApiServer, k8s: client.ApiClient
) -> None:
    """limit=2 over five pods gives pages of 2, 2, 1 in name order; each but the last carries
    a continue token and the count still to come; all pages report the first page's version."""
    await make_pods(kube, ["e", "c", "a", "d", "b"])
    core = client.CoreV1Api(k8s)
    names: list[list[str]] = []
    versions, remaining = set(), []
    token = ""
    while True:
        page = await core.list_namespaced_pod("default", limit=2, _continue=token)
        names.append([p.metadata.name for p in page.items])
        versions.add(page.metadata.resource_version)
        remaining.append(page.metadata.remaining_item_count)
        token = page.metadata._continue or ""
        if not token:
            break
    assert names == [["a", "b"], ["c", "d"], ["e"]]
    assert remaining == [3, 1, None]
    assert len(versions) == 1


async def test_later_pages_are_the_first_pages_snapshot_and_the_watch_replays_the_rest(
    kube: KubeApiServer, k8s: client.ApiClient
) -> None:
    """Pages of one list are one consistent snapshot, as etcd serves them to kube-apiserver: a
    pod created, one changed and one deleted after the first page do not show on the next. A
    watch from the list's version replays the creation, so nothing is lost."""
    await make_pods(kube, ["a", "b", "c", "d"])
    core = client.CoreV1Api(k8s)
    first = await core.list_namespaced_pod("default", limit=2)
    await make_pods(kube, ["bb"])
    await kube.store.patch(
        "pods", "c", {"metadata": {"labels": {"later": "yes"}}}, namespace="default"
    )
    await kube.store.delete("pods", "d", "default", grace_period_seconds=0)
    second = await core.list_namespaced_pod("default", limit=5, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["c", "d"]
    assert "later" not in (second.items[0].metadata.labels or {})
    assert second.metadata.resource_version == first.metadata.resource_version
    watcher = kube.store.watch("pods", "default", since_rv=first.metadata.resource_version)
    try:
        replayed = [(e.type, e.object["metadata"]["name"]) for e in watcher.take()]
    finally:
        watcher.close()
    assert replayed[0] == ("ADDED", "bb")


async def test_a_continue_token_from_before_a_compaction_is_410_expired(
    kube: KubeApiServer, k8s: client.ApiClient
) -> None:
    """After the store compacts, continuing an older list answers 410 Expired (the client
    must list again), as kube-apiserver does once etcd compacted the snapshot."""
    await make_pods(kube, ["a", "b", "c"])
    core = client.CoreV1Api(k8s)
    first = await core.list_namespaced_pod("default", limit=1)
    await make_pods(kube, ["d"])
    kube.store.compact()
    with pytest.raises(ApiException) as raised:
        await core.list_namespaced_pod("default", limit=1, _continue=first.metadata._continue)
    assert raised.value.status == 410
    assert raised.value.body is not None
    assert json.loads(raised.value.body)["reason"] == "Expired"


@pytest.mark.parametrize("token", ["not-base64!", "eyJ2IjoxfQ==", "W10="])
async def test_a_malformed_continue_token_is_400(kube: KubeApiServer, token: str) -> None:
    """A token this server did not write is a 400 Status naming the token."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{kube.url}/api/v1/pods",
            params={"limit": "1", "continue": token},
            headers={"Authorization": f"Bearer {kube.token}"},
            ssl=False,
        ) as response,
    ):
        body: dict[str, Any] = await response.json()
    assert (response.status, body["reason"]) == (400, "BadRequest")
    assert token in body["message"]


async def test_kubectl_reads_a_list_in_chunks(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """`kubectl get pods --chunk-size=2` follows the continue tokens and shows every pod once."""
    await make_pods(kube, [f"p{i}" for i in range(5)])
    result = await kubectl("get", "pods", "--chunk-size=2", "-o", "name")
    assert result.stdout.split() == [f"pod/p{i}" for i in range(5)]
    table = await kubectl("get", "pods", "--chunk-size=2", "--no-headers")
    assert [line.split()[0] for line in table.stdout.splitlines()] == [f"p{i}" for i in range(5)]


async def _get(kube: KubeApiServer, query: str) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.get(f"{kube.url}/api/v1/namespaces/default/pods?{query}", ssl=False) as response,
    ):
        body: dict[str, Any] = await response.json()
        return response.status, body


async def test_resource_version_match_exact_lists_the_objects_as_they_were(
    kube: KubeApiServer,
) -> None:
    """`resourceVersionMatch=Exact` shows the collection at that version: a pod added since is
    absent and a changed one shows its old labels; the list reports that version."""
    await make_pods(kube, ["a"])
    _, before = await _get(kube, "")
    version = before["metadata"]["resourceVersion"]
    await make_pods(kube, ["b"])
    await kube.store.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")

    status, exact = await _get(kube, f"resourceVersion={version}&resourceVersionMatch=Exact")

    assert status == 200
    assert [p["metadata"]["name"] for p in exact["items"]] == ["a"]
    assert "labels" not in exact["items"][0]["metadata"]
    assert exact["metadata"]["resourceVersion"] == version


@pytest.mark.parametrize(
    ("query", "code", "reason"),
    [
        ("resourceVersion=999999", 504, "Timeout"),
        ("resourceVersion=999999&resourceVersionMatch=Exact", 504, "Timeout"),
        ("resourceVersionMatch=Exact", 400, "BadRequest"),
        ("resourceVersion=0&resourceVersionMatch=Exact", 400, "BadRequest"),
        ("resourceVersion=1&resourceVersionMatch=Newest", 400, "BadRequest"),
    ],
)
async def test_resource_versions_the_apiserver_refuses(
    kube: KubeApiServer, query: str, code: int, reason: str
) -> None:
    """A version the server has not reached is 504 "Too large resource version"; a match
    without a version, Exact with 0 and an unknown match are 400s."""
    status, body = await _get(kube, query)

    assert (status, body["reason"]) == (code, reason)


async def test_a_version_already_reached_lists_the_current_objects(kube: KubeApiServer) -> None:
    """NotOlderThan (the default for a version > 0) serves the newest state."""
    await make_pods(kube, ["a"])
    _, first = await _get(kube, "")
    await make_pods(kube, ["b"])

    _, later = await _get(kube, f"resourceVersion={first['metadata']['resourceVersion']}")

    assert [p["metadata"]["name"] for p in later["items"]] == ["a", "b"]
