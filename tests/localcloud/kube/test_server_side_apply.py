"""Server-side apply and managedFields through real kubectl and the official client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
from kubernetes_asyncio import client

from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

REPO = Path(__file__).resolve().parents[3]


def config_map(data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cfg", "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


async def request(
    kube: KubeApiServer,
    method: str,
    path: str,
    body: dict[str, Any],
    *,
    content_type: str = "application/apply-patch+yaml",
    agent: str = "tests",
) -> tuple[int, dict[str, Any]]:
    headers = {
        "Authorization": f"Bearer {kube.token}",
        "Content-Type": content_type,
        "User-Agent": agent,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, kube.url + path, data=json.dumps(body), headers=headers, ssl=False
        ) as response,
    ):
        return response.status, await response.json()


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"]["managedFields"]}


async def test_kubectl_server_side_apply_owns_removes_and_conflicts(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(config_map({"a": "1", "b": "2"}, {"team": "x"})))
    assert "serverside-applied" in (await kubectl("apply", "--server-side", "-f", str(path))).stdout
    stored = await kube.store.get("configmaps", "cfg", "default")
    entry = managers(stored)[("kubectl", "Apply")]
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["apiVersion"] == "v1"
    assert entry["time"]
    assert entry["fieldsV1"] == {
        "f:data": {".": {}, "f:a": {}, "f:b": {}},
        "f:metadata": {"f:labels": {".": {}, "f:team": {}}},
    }

    # a field left out of the applied configuration goes away
    path.write_text(json.dumps(config_map({"a": "1"})))
    await kubectl("apply", "--server-side", "-f", str(path))
    stored = await kube.store.get("configmaps", "cfg", "default")
    assert stored["data"] == {"a": "1"}
    assert "labels" not in stored["metadata"]

    # kubectl patch records an Update entry and takes data.a over
    await kubectl("patch", "configmap", "cfg", "-p", '{"data":{"a":"9"}}')
    stored = await kube.store.get("configmaps", "cfg", "default")
    patcher = managers(stored)[("kubectl-patch", "Update")]
    assert patcher["fieldsV1"] == {"f:data": {"f:a": {}}}
    # the applier keeps the data map itself (granular maps are owned as nodes too)
    assert managers(stored)[("kubectl", "Apply")]["fieldsV1"] == {"f:data": {}}

    other = tmp_path / "other.json"
    other.write_text(json.dumps(config_map({"a": "2"})))
    refused = await kubectl(
        "apply", "--server-side", "--field-manager=deployer", "-f", str(other), check=False
    )
    assert refused.returncode != 0
    assert "conflict" in refused.stderr
    assert ".data.a" in refused.stderr
    assert '"kubectl-patch"' in refused.stderr
    await kubectl(
        "apply", "--server-side", "--field-manager=deployer", "--force-conflicts", "-f", str(other)
    )
    stored = await kube.store.get("configmaps", "cfg", "default")
    assert stored["data"] == {"a": "2"}
    assert ("kubectl-patch", "Update") not in managers(stored)
    assert managers(stored)[("deployer", "Apply")]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


async def test_apply_conflict_status_and_field_manager_required(
    kube: KubeApiServer, k8s: client.ApiClient
) -> None:
    """The 409 lists each conflict in details.causes as kube-apiserver words them."""
    api = client.CoreV1Api(k8s)
    body: Any = config_map({"a": "1", "b": "1"})
    await api.create_namespaced_config_map("default", body, field_manager="creator")
    created = await kube.store.get("configmaps", "cfg", "default")
    entry = managers(created)[("creator", "Update")]
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}
    status, body = await request(
        kube,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cfg?fieldManager=deployer",
        config_map({"a": "2", "b": "2"}),
    )
    assert status == 409
    assert body["reason"] == "Conflict"
    at = entry["time"]
    assert body["message"] == (
        f'Apply failed with 2 conflicts: conflicts with "creator" using v1 at {at}:\n'
        "- .data.a\n- .data.b"
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "creator" using v1 at {at}',
            "field": f".data.{key}",
        }
        for key in ("a", "b")
    ]
    status, body = await request(
        kube, "PATCH", "/api/v1/namespaces/default/configmaps/cfg", config_map({"a": "2"})
    )
    assert (status, body["message"]) == (400, "fieldManager is required for apply requests")


async def test_apply_creates_and_merges_containers_by_name(kube: KubeApiServer) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
            },
        },
    }
    status, _ = await request(
        kube, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=a", deployment
    )
    assert status == 201
    sidecar = json.loads(json.dumps(deployment))
    sidecar["spec"]["template"]["spec"]["containers"] = [{"name": "log", "image": "busybox"}]
    del sidecar["spec"]["selector"]
    status, body = await request(
        kube, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=b", sidecar
    )
    assert status == 200, body
    containers = body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "log"]
    owned = managers(body)[("b", "Apply")]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]
    assert owned["f:containers"] == {'k:{"name":"log"}': {".": {}, "f:image": {}, "f:name": {}}}


@pytest.mark.parametrize("agent", ["kubectl/v1.32.0 (linux/amd64) kubernetes/abc", "OpenAPI"])
async def test_default_manager_is_the_user_agent_prefix(kube: KubeApiServer, agent: str) -> None:
    status, body = await request(
        kube,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        config_map({"a": "1"}),
        content_type="application/json",
        agent=agent,
    )
    assert status == 201
    assert body["metadata"]["managedFields"][0]["manager"] == agent.split("/", maxsplit=1)[0]


def _official_client_applies(kubeconfig: Path) -> tuple[int, list[str]]:
    """The official (synchronous) `kubernetes` client: apply twice as two managers."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        str(kubeconfig), client_configuration=configuration
    )
    with kubernetes.client.ApiClient(configuration) as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        apply_type = "application/apply-patch+yaml"
        core.patch_namespaced_config_map(
            "cfg",
            "default",
            config_map({"a": "1"}),
            field_manager="one",
            _content_type=apply_type,
        )
        try:
            core.patch_namespaced_config_map(
                "cfg",
                "default",
                config_map({"a": "2"}),
                field_manager="two",
                _content_type=apply_type,
            )
        except kubernetes.client.ApiException as error:
            status = error.status
        read: Any = core.read_namespaced_config_map("cfg", "default")
        return status, [str(e.manager) for e in read.metadata.managed_fields]


async def test_official_client_apply_gets_409_from_a_second_manager(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    status, owners = await asyncio.to_thread(_official_client_applies, tmp_path / "kubeconfig")
    assert (status, owners) == (409, ["one"])


async def test_applying_the_same_configuration_again_changes_nothing(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """A no-op apply keeps the resourceVersion (and the entry's time); custom resources too."""
    await kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    example = str(REPO / "deploy" / "examples" / "nodepool-default.yaml")
    await kubectl("apply", "--server-side", "-f", example)
    first = await kube.store.get("nodepools.daiku.dev", "default")
    # an entry written a while ago: re-applying must not refresh its time (nor the object)
    first["metadata"]["managedFields"][0]["time"] = "2020-01-01T00:00:00Z"
    first = await kube.store.update("nodepools.daiku.dev", first)
    await kubectl("apply", "--server-side", "-f", example)
    again = await kube.store.get("nodepools.daiku.dev", "default")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    entry = managers(again)[("kubectl", "Apply")]
    assert entry["time"] == "2020-01-01T00:00:00Z"
    assert "f:template" in entry["fieldsV1"]["f:spec"]
