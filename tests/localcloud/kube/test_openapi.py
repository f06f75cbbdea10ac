"""OpenAPI v2/v3 with real schemas: kubectl explain for built-in kinds and CRDs."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

REPO = Path(__file__).resolve().parents[3]


async def test_kubectl_explain_built_in_kinds(kubectl: Kubectl) -> None:
    explained = (await kubectl("explain", "pods.spec.containers")).stdout
    assert "KIND:       Pod" in explained
    assert "FIELD: containers <[]Container>" in explained
    assert "image\t<string>" in explained
    deployment = (await kubectl("explain", "deployments.spec.replicas")).stdout
    assert "GROUP:      apps" in deployment
    assert "<integer>" in deployment


async def test_kubectl_explain_custom_resources_from_their_crd(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    explained = (await kubectl("explain", "nodepools.spec")).stdout
    assert "GROUP:      daiku.dev" in explained
    assert "KIND:       NodePool" in explained
    assert "disruption\t<Object>" in explained
    assert "template\t<Object>" in explained
    meta = (await kubectl("explain", "nodepools.metadata.labels")).stdout
    assert "<map[string]string>" in meta


async def test_openapi_v2_json_and_v3_documents(kube: KubeApiServer) -> None:
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get(f"{kube.url}/openapi/v2", ssl=False) as response:
            v2 = await response.json()
        async with session.get(f"{kube.url}/openapi/v3/apis/apps/v1", ssl=False) as response:
            v3 = await response.json()
        protobuf = {"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
        async with session.get(f"{kube.url}/openapi/v2", headers=protobuf, ssl=False) as response:
            assert response.status == 404  # client-go then uses v3 or compiled-in types
    pod = v2["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["properties"]["spec"]["allOf"] == [
        {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}
    ]
    schemas = v3["components"]["schemas"]
    spec = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert spec["replicas"]["type"] == "integer"
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
