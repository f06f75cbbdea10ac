"""Issue 16's items that other suites check with raw HTTP or in process, driven here through
the third-party clients (pykube-ng, lightkube, kr8s, the official `kubernetes` client and
kubectl) so the wire behaviour each client relies on is what kube-apiserver answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kr8s.asyncio
import kubernetes
import pykube
import pytest
import yaml
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.core_v1 import PodEviction

from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


@pytest.fixture
async def lightkube(kube: KubeApiServer, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(config=KubeConfig.from_file(tmp_path / "kubeconfig"))
    try:
        yield client
    finally:
        await client.close()


def owned(kind: str, name: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "blockOwnerDeletion": True,
                "controller": True,
            }
        ]
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


async def test_pykube_foreground_deletion_goes_level_by_level(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    """pykube's delete(propagation_policy="Foreground") of a three-level chain marks each
    owner with the foregroundDeletion finalizer and removes the leaf first, then its owner,
    then the root (as with pods, ReplicaSet, Deployment)."""

    def chain_then_delete() -> list[tuple[str, str, list[str]]]:
        api = pykube.HTTPClient(pykube.KubeConfig.from_file(str(tmp_path / "kubeconfig")))
        try:
            root = pykube.ConfigMap(api, owned("ConfigMap", "root", None))
            root.create()
            middle = pykube.ConfigMap(api, owned("ConfigMap", "middle", root.obj))
            middle.create()
            pykube.ConfigMap(api, owned("ConfigMap", "leaf", middle.obj)).create()
            query = pykube.ConfigMap.objects(api, namespace="default")
            list(query)
            version = query.response["metadata"]["resourceVersion"]
            root.delete(propagation_policy="Foreground")
            stream = pykube.ConfigMap.objects(api, namespace="default").watch(
                since=version, params={"timeoutSeconds": 2}
            )
            return [
                (e.type, e.object.name, e.object.obj["metadata"].get("finalizers") or [])
                for e in stream
            ]
        finally:
            api.session.close()

    events = await asyncio.to_thread(chain_then_delete)
    deleted = [name for kind, name, _ in events if kind == "DELETED"]
    assert deleted == ["leaf", "middle", "root"]
    held = {name for kind, name, finalizers in events if "foregroundDeletion" in finalizers}
    assert held == {"root", "middle"}


async def test_lightkube_eviction_lets_a_not_ready_pod_of_a_healthy_budget_go(
    kube: KubeApiServer, lightkube: AsyncClient
) -> None:
    """With minAvailable 2 and two Ready pods, evicting the third (not Ready) pod is allowed
    (unhealthyPodEvictionPolicy IfHealthyBudget); evicting a Ready one is 429."""
    await kube.store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    for name, ready in (("a", "True"), ("b", "True"), ("sick", "False")):
        body = {
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx"}]},
        }
        await kube.store.create("pods", body, "default")
        await kube.store.patch(
            "pods",
            name,
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}},
            namespace="default",
            subresource="status",
        )

    def eviction(name: str) -> PodEviction:
        return PodEviction(metadata=ObjectMeta(name=name, namespace="default"))

    await lightkube.create(eviction("sick"), "sick", namespace="default")
    with pytest.raises(ApiError) as refused:
        await lightkube.create(eviction("a"), "a", namespace="default")
    assert (refused.value.status.code, refused.value.status.reason) == (429, "TooManyRequests")
    sick = await kube.store.get("pods", "sick", "default")
    assert sick["metadata"].get("deletionTimestamp")
    assert not (await kube.store.get("pods", "a", "default"))["metadata"].get("deletionTimestamp")


async def test_kubectl_strategic_patch_retain_keys_clears_the_rest_of_the_union(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """A strategic merge patch with `$retainKeys` (what kubectl apply sends for a Deployment
    strategy) drops the union members not retained: Recreate loses rollingUpdate."""
    await kubectl("create", "deployment", "web", "--image=nginx")
    stored = await kube.store.get("deployments", "web", "default")
    assert "rollingUpdate" in stored["spec"]["strategy"]
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    await kubectl("patch", "deployment", "web", "--type=strategic", "-p", json.dumps(patch))
    stored = await kube.store.get("deployments", "web", "default")
    assert stored["spec"]["strategy"] == {"type": "Recreate"}


async def test_kr8s_reads_metadata_only_and_yaml(kube: KubeApiServer, tmp_path: Path) -> None:
    """kr8s connects (it probes `/version/`) and gets PartialObjectMetadata for a get and a
    list, and YAML, as its Accept header asks."""
    await kube.store.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "b"}}})
    api = await kr8s.asyncio.api(kubeconfig=str(tmp_path / "kubeconfig"))

    async def get(url: str, accept: str) -> tuple[str, str]:
        async with api.call_api("GET", url=url, headers={"Accept": accept}) as response:
            return response.headers["content-type"], response.text

    try:
        one_type, one = await get("nodes/n1", METADATA)
        list_type, listed = await get("nodes", METADATA_LIST)
        yaml_type, as_yaml = await get("nodes/n1", "application/yaml")
    finally:
        if api._session is not None:  # kr8s has no public close; its client holds a pool
            await api._session.aclose()

    assert one_type.startswith("application/json")
    node = json.loads(one)
    assert (node["kind"], set(node)) == (
        "PartialObjectMetadata",
        {"kind", "apiVersion", "metadata"},
    )
    assert node["metadata"]["labels"] == {"a": "b"}
    assert json.loads(listed)["kind"] == "PartialObjectMetadataList"
    assert list_type.startswith("application/json")
    assert yaml_type.startswith("application/yaml")
    assert yaml.safe_load(as_yaml)["metadata"]["name"] == "n1"


async def test_official_client_lists_exactly_refuses_the_future_and_reads_utc_times(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    """Through the official client: an Exact list shows the pods as they were at its version,
    a version not reached yet is 504 "Too large resource version", and a time written with an
    offset comes back in RFC 3339 UTC."""
    core = kubernetes.client.CoreV1Api

    def run() -> dict[str, Any]:
        config = str(tmp_path / "kubeconfig")
        new_client = kubernetes.config.new_client_from_config  # untyped in the stubs
        with new_client(config_file=config) as api_client:  # type: ignore[no-untyped-call]
            api_client.set_default_header("Connection", "close")
            # the generated stubs want V1Pod bodies; these tests send the wire form
            api: Any = core(api_client)
            pod = {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
            api.create_namespaced_pod("default", pod)
            version = api.list_namespaced_pod("default").metadata.resource_version
            api.create_namespaced_pod("default", {**pod, "metadata": {"name": "b"}})
            exact = api.list_namespaced_pod(
                "default", resource_version=version, resource_version_match="Exact"
            )
            try:
                api.list_namespaced_pod("default", resource_version="99999999")
                future: tuple[int, str] = (200, "")
            except kubernetes.client.ApiException as error:
                future = (error.status, json.loads(error.body or "{}")["message"])
            condition = {
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": "2026-11-26T10:00:00+02:00",
            }
            api.patch_namespaced_pod_status("a", "default", {"status": {"conditions": [condition]}})
            raw = api.read_namespaced_pod_status("a", "default", _preload_content=False)
            return {
                "exact": [p.metadata.name for p in exact.items],
                "future": future,
                "raw": json.loads(raw.data),
            }

    seen = await asyncio.to_thread(run)
    assert seen["exact"] == ["a"]
    assert seen["future"][0] == 504
    assert "Too large resource version" in seen["future"][1]
    (ready,) = [c for c in seen["raw"]["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["lastTransitionTime"] == "2026-11-26T08:00:00Z"


async def test_kubectl_auth_whoami_and_kr8s_whoami_name_the_admin(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`kubectl auth whoami` (a SelfSubjectReview, sent as protobuf) and kr8s's whoami (a
    TokenReview of its token) name the one admin user; another token is not authenticated."""
    shown = json.loads((await kubectl("auth", "whoami", "-o", "json")).stdout)
    assert (shown["kind"], shown["apiVersion"]) == ("SelfSubjectReview", "authentication.k8s.io/v1")
    assert shown["status"]["userInfo"]["username"] == "localcloud:admin"
    assert "system:masters" in shown["status"]["userInfo"]["groups"]

    api = await kr8s.asyncio.api(kubeconfig=str(tmp_path / "kubeconfig"))
    try:
        assert await api.whoami() == "localcloud:admin"  # type: ignore[no-untyped-call]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        async with api.call_api(
            "POST",
            version="authentication.k8s.io/v1",
            url="tokenreviews",
            content=json.dumps({**review, "spec": {"token": "not-the-token"}}),
        ) as response:
            assert response.json()["status"] == {"authenticated": False}
    finally:
        if api._session is not None:  # kr8s has no public close; its client holds a pool
            await api._session.aclose()


async def test_priority_classes_give_pods_their_priority(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`kubectl create priorityclass` stores a class; a pod naming it gets its value and
    preemptionPolicy, one naming no class takes the global default, one naming a missing class
    is 403 Forbidden, and the system classes answer by name (the Priority admission plugin)."""
    await kubectl("create", "priorityclass", "batch", "--value=1000", "--preemption-policy=Never")
    await kubectl("create", "priorityclass", "everyone", "--value=10", "--global-default")

    def pod(name: str, priority_class: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {"metadata": {"name": name}, "spec": spec}

    def run() -> dict[str, Any]:
        new_client = kubernetes.config.new_client_from_config  # untyped in the stubs
        config = str(tmp_path / "kubeconfig")
        with new_client(config_file=config) as api_client:  # type: ignore[no-untyped-call]
            api_client.set_default_header("Connection", "close")
            api: Any = kubernetes.client.CoreV1Api(api_client)
            made = {
                name: api.create_namespaced_pod("default", pod(name, pc)).spec
                for name, pc in (
                    ("job", "batch"),
                    ("plain", None),
                    ("node-agent", "system-node-critical"),
                )
            }
            try:
                api.create_namespaced_pod("default", pod("lost", "nope"))
                refused: tuple[int, str] = (201, "")
            except kubernetes.client.ApiException as error:
                refused = (error.status, json.loads(error.body or "{}")["message"])
            return {"made": made, "refused": refused}

    seen = await asyncio.to_thread(run)
    job, plain, agent = (seen["made"][n] for n in ("job", "plain", "node-agent"))
    assert (job.priority, job.preemption_policy) == (1000, "Never")
    assert (plain.priority, plain.priority_class_name) == (10, "everyone")
    assert plain.preemption_policy == "PreemptLowerPriority"
    assert agent.priority == 2_000_001_000
    assert seen["refused"] == (
        403,
        'pods "lost" is forbidden: no PriorityClass with name nope was found',
    )
    listed = (await kubectl("get", "priorityclasses", "-o", "name")).stdout.split()
    assert listed == [
        "priorityclass.scheduling.k8s.io/batch",
        "priorityclass.scheduling.k8s.io/everyone",
    ]


async def test_kubectl_autoscale_writes_v1_and_both_versions_read_one_object(
    kube: KubeApiServer, kubectl: Kubectl, lightkube: AsyncClient
) -> None:
    """`kubectl autoscale` (autoscaling/v1, protobuf) creates an HPA that lightkube reads as
    autoscaling/v2 with the cpu target as a metric; `kubectl get hpa` shows it; one without
    --cpu-percent gets v2's default of 80 %."""
    await kubectl("create", "deployment", "web", "--image=nginx")
    await kubectl("create", "deployment", "api", "--image=nginx")
    await kubectl("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=60")
    await kubectl("autoscale", "deployment", "api", "--max=3")

    web = await lightkube.get(HorizontalPodAutoscaler, "web", namespace="default")
    assert web.spec is not None
    assert (web.spec.minReplicas, web.spec.maxReplicas) == (2, 5)
    assert web.spec.scaleTargetRef.name == "web"
    (metric,) = web.spec.metrics or []
    assert metric.resource is not None
    assert (metric.resource.name, metric.resource.target.averageUtilization) == ("cpu", 60)
    v1 = json.loads(
        (
            await kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "api", "-o", "json")
        ).stdout
    )
    assert (v1["apiVersion"], v1["spec"]["minReplicas"]) == ("autoscaling/v1", 1)
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 80
    assert (await kubectl("get", "hpa", "-o", "name")).stdout.split() == [
        "horizontalpodautoscaler.autoscaling/api",
        "horizontalpodautoscaler.autoscaling/web",
    ]


async def test_kubectl_create_token_gets_a_token_that_works(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`kubectl create token` (a TokenRequest on serviceaccounts/token, protobuf) answers a
    token kubectl can then use; a missing ServiceAccount is NotFound."""
    await kubectl("create", "serviceaccount", "ci")
    token = (await kubectl("create", "token", "ci", "--duration=10m")).stdout.strip()
    listed = await kubectl("get", "serviceaccounts", "-o", "name", f"--token={token}")
    assert "serviceaccount/ci" in listed.stdout.split()
    missing = await kubectl("create", "token", "nobody", check=False)
    assert missing.returncode != 0
    assert 'serviceaccounts "nobody" not found' in missing.stderr
