"""Conformance through pykube-ng (issue 16): a synchronous client on `requests` that builds its
resource classes from discovery, as operators written with it do for custom resources.

pykube blocks, so each test runs it in a worker thread while the server serves on the test's
event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pykube
import pytest
import yaml

from localcloud.kube.server import KubeApiServer

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")


@pytest.fixture
def pykube_api(kube: KubeApiServer, tmp_path: Path) -> Iterator[pykube.HTTPClient]:
    api = pykube.HTTPClient(pykube.KubeConfig.from_file(str(tmp_path / "kubeconfig")))
    try:
        yield api
    finally:
        api.session.close()


async def in_thread(call: Callable[[], T]) -> T:
    return await asyncio.to_thread(call)


def nodepool(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "x"},
                    "requirements": [],
                }
            }
        },
    }


def install_nodepool_crd(api: pykube.HTTPClient) -> None:
    crd = yaml.safe_load((REPO / "deploy" / "crds" / "daiku.dev_nodepools.yaml").read_text())
    pykube.CustomResourceDefinition(api, crd).create()


async def test_crud_of_a_nodepool_found_through_discovery(pykube_api: pykube.HTTPClient) -> None:
    """pykube finds NodePool in discovery once its CRD is created, then creates (with the
    schema's defaults), reads, lists by label, patches spec and status apart, and deletes it."""
    await in_thread(lambda: install_nodepool_crd(pykube_api))
    node_pool = await in_thread(
        lambda: pykube.object_factory(pykube_api, "daiku.dev/v1", "NodePool")
    )

    def crud() -> dict[str, Any]:
        pool = node_pool(pykube_api, nodepool("blue", {"team": "a"}))
        pool.create()
        created = dict(pool.obj)
        node_pool(pykube_api, nodepool("green", {"team": "b"})).create()
        listed = [p.name for p in node_pool.objects(pykube_api).filter(selector={"team": "a"})]
        pool = node_pool.objects(pykube_api).get(name="blue")
        pool.obj["spec"]["weight"] = 7
        pool.update(is_strategic=False)
        pool.patch({"status": {"nodes": 2}}, subresource="status")
        pool.patch({"spec": {"weight": 8}, "status": {"nodes": 9}})
        pool.reload()
        after = dict(pool.obj)
        pool.delete()
        remaining = [p.name for p in node_pool.objects(pykube_api)]
        return {"created": created, "listed": listed, "after": after, "remaining": remaining}

    seen = await in_thread(crud)
    created = seen["created"]
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"]
    assert created["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert seen["listed"] == ["blue"]
    assert seen["after"]["spec"]["weight"] == 8
    assert seen["after"]["status"]["nodes"] == 2  # the main endpoint ignores status
    assert seen["after"]["metadata"]["generation"] == 3  # two spec changes, status none
    assert seen["remaining"] == ["green"]


async def test_watch_of_nodepools_from_a_resource_version(pykube_api: pykube.HTTPClient) -> None:
    """A pykube watch from a list's resourceVersion streams the later create, update and
    delete of a NodePool in order, and ends when the server's timeout does."""
    await in_thread(lambda: install_nodepool_crd(pykube_api))
    node_pool = await in_thread(
        lambda: pykube.object_factory(pykube_api, "daiku.dev/v1", "NodePool")
    )

    def change_then_watch() -> list[tuple[str, str, int | None]]:
        query = node_pool.objects(pykube_api)
        assert list(query) == []
        version = query.response["metadata"]["resourceVersion"]
        pool = node_pool(pykube_api, nodepool("blue", {}))
        pool.create()
        pool.patch({"spec": {"weight": 3}})
        pool.delete()
        stream = node_pool.objects(pykube_api).watch(since=version, params={"timeoutSeconds": 2})
        return [(e.type, e.object.name, e.object.obj["spec"].get("weight")) for e in stream]

    assert await in_thread(change_then_watch) == [
        ("ADDED", "blue", None),
        ("MODIFIED", "blue", 3),
        ("DELETED", "blue", 3),
    ]
