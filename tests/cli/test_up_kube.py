"""`daiku up`'s Kubernetes calls against localcloud's API server over real HTTPS: CRDs become
usable once applied, apply creates then replaces, delete finds a kind by discovery, scale
patches a Deployment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from daiku_cli.scenario.defaults import default_node_pool, inflate_deployment
from daiku_cli.up_kube import KubeCallError, KubeClient
from daiku_cli.up_runner import install_crds
from localcloud.kube.server import KubeApiServer

CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = KubeApiServer(host="127.0.0.1", port=0, tls=True)
    await server.start()
    try:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        client = await KubeClient.from_kubeconfig(tmp_path / "kubeconfig")
        try:
            yield client
        finally:
            await client.close()
    finally:
        await server.close()


async def test_crds_then_nodepool_apply_creates_then_replaces(kube: KubeClient) -> None:
    """After install_crds a NodePool can be applied: first created, then replaced in place."""
    await install_crds(kube, CRD_DIR)
    pool = default_node_pool()
    assert await kube.apply(pool) == "created"
    pool["spec"]["limits"] = {"cpu": "7"}
    assert await kube.apply(pool) == "replaced"
    (stored,) = await kube.list("daiku.dev/v1", "NodePool")
    assert stored["spec"]["limits"] == {"cpu": "7"}


async def test_an_object_in_a_new_namespace_creates_the_namespace(kube: KubeClient) -> None:
    """Applying a Deployment into a namespace that does not exist creates the namespace."""
    deployment = inflate_deployment(0)
    deployment["metadata"]["namespace"] = "shop"
    assert await kube.apply(deployment) == "created"
    namespace = await kube.call("GET", "/api/v1/namespaces/shop")
    assert namespace["metadata"]["name"] == "shop"


async def test_scale_and_delete_by_kind(kube: KubeClient) -> None:
    """scale_deployment sets spec.replicas; delete finds Deployment by discovery alone and
    reports False for an object that is already gone."""
    await kube.apply(inflate_deployment(0))
    await kube.scale_deployment("default", "inflate", 4)
    (stored,) = await kube.list("apps/v1", "Deployment")
    assert stored["spec"]["replicas"] == 4
    assert await kube.delete("Deployment", "inflate", "default") is True
    assert await kube.delete("Deployment", "inflate", "default") is False


async def test_an_unserved_kind_is_a_clear_error(kube: KubeClient) -> None:
    """Applying a kind the API server does not serve names the kind and group version."""
    with pytest.raises(KubeCallError, match=r"serves no NodePool in daiku\.dev/v1"):
        await kube.apply(
            {"apiVersion": "daiku.dev/v1", "kind": "NodePool", "metadata": {"name": "x"}}
        )
