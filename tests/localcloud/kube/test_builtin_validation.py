"""kube-apiserver's built-in validation rules, answered 422 with details.causes, driven by the
official `kubernetes` client, kr8s and kubectl."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest
from kubernetes.client import (
    CoreV1Api,
    V1ConfigMap,
    V1Container,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1ResourceRequirements,
    V1Secret,
)

from localcloud.kube.builtin_rules import parse_quantity
from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

T = TypeVar("T")


async def official(tmp_path: Path, call: Callable[[CoreV1Api], T]) -> T:
    """Run `call` with the official (synchronous) client, off the server's event loop."""

    def run() -> T:
        config = str(tmp_path / "kubeconfig")
        new_client = kubernetes.config.new_client_from_config  # untyped in the stubs
        with new_client(config_file=config) as api_client:  # type: ignore[no-untyped-call]
            # no keep-alive: urllib3 drops idle TLS sockets without a close_notify, and the
            # server's side of them would outlive the test
            api_client.set_default_header("Connection", "close")
            return call(CoreV1Api(api_client))

    return await asyncio.to_thread(run)


def causes(error: kubernetes.client.ApiException) -> list[dict[str, Any]]:
    assert error.status == 422, error.body
    found: list[dict[str, Any]] = json.loads(error.body or "{}")["details"]["causes"]
    return found


def pod(name: str, requests: dict[str, str], limits: dict[str, str] | None = None) -> V1Pod:
    resources = V1ResourceRequirements(requests=requests, limits=limits)
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(containers=[V1Container(name="app", image="nginx", resources=resources)]),
    )


async def test_negative_and_malformed_resource_requests_are_invalid(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    """A pod requesting -1 CPU, a malformed memory quantity, or more than its limit is refused
    422 with one cause per field; a sound pod is created."""
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await official(
            tmp_path,
            lambda core: core.create_namespaced_pod(
                "default", pod("bad", {"cpu": "-1", "memory": "lots"})
            ),
        )
    fields = {(c["field"], c["reason"]) for c in causes(refused.value)}
    assert fields == {
        ("spec.containers[0].resources.requests[cpu]", "FieldValueInvalid"),
        ("spec.containers[0].resources.requests[memory]", "FieldValueInvalid"),
    }
    with pytest.raises(kubernetes.client.ApiException) as over_limit:
        await official(
            tmp_path,
            lambda core: core.create_namespaced_pod(
                "default", pod("greedy", {"cpu": "2"}, {"cpu": "1"})
            ),
        )
    assert "must be less than or equal to cpu limit" in causes(over_limit.value)[0]["message"]
    await official(
        tmp_path, lambda core: core.create_namespaced_pod("default", pod("fine", {"cpu": "100m"}))
    )
    assert (await kube.store.get("pods", "fine", "default"))["metadata"]["name"] == "fine"


def test_quantities_parse_as_resource_quantity_does() -> None:
    """Decimal and binary suffixes and exponents give the quantity's value; junk gives None."""
    assert parse_quantity("100m") == parse_quantity("0.1")
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("-1") == -1
    assert parse_quantity("lots") is None
    assert parse_quantity("1Qi") is None


async def test_deployment_selector_must_match_template_labels(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """kubectl apply of a Deployment whose selector misses its template's labels is refused
    with the apiserver's message; one without a selector needs one."""
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(deployment))
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert "`selector` does not match template `labels`" in refused.stderr
    del deployment["spec"]["selector"]
    manifest.write_text(json.dumps(deployment))
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert "spec.selector: Required value" in refused.stderr


async def test_immutable_config_maps_keep_their_data(kube: KubeApiServer, tmp_path: Path) -> None:
    """Once `immutable: true`, a ConfigMap's data cannot change and the flag cannot be cleared;
    keys must be config keys."""
    settings = V1ConfigMap(metadata=V1ObjectMeta(name="settings"), data={"a": "1"}, immutable=True)
    await official(tmp_path, lambda core: core.create_namespaced_config_map("default", settings))
    with pytest.raises(kubernetes.client.ApiException) as changed:
        await official(
            tmp_path,
            lambda core: core.patch_namespaced_config_map(
                "settings", "default", {"data": {"a": "2"}}
            ),
        )
    assert [(c["field"], c["reason"]) for c in causes(changed.value)] == [
        ("data", "FieldValueForbidden")
    ]
    with pytest.raises(kubernetes.client.ApiException) as cleared:
        await official(
            tmp_path,
            lambda core: core.patch_namespaced_config_map(
                "settings", "default", {"immutable": False}
            ),
        )
    assert causes(cleared.value)[0]["field"] == "immutable"
    bad_key = V1ConfigMap(metadata=V1ObjectMeta(name="keys"), data={"a b": "1"})
    with pytest.raises(kubernetes.client.ApiException) as key:
        await official(tmp_path, lambda core: core.create_namespaced_config_map("default", bad_key))
    assert causes(key.value)[0]["field"] == "data[a b]"
    assert (await kube.store.get("configmaps", "settings", "default"))["data"] == {"a": "1"}


async def test_secrets_merge_string_data_default_type_and_refuse_bad_base64(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    """stringData lands base64-encoded in data, type defaults to Opaque, and data that is not
    base64 is a 400."""
    secret = V1Secret(metadata=V1ObjectMeta(name="token"), string_data={"token": "s3cret"})
    created = await official(
        tmp_path, lambda core: core.create_namespaced_secret("default", secret)
    )
    assert created.type == "Opaque"
    assert created.string_data is None
    assert base64.b64decode((created.data or {})["token"]) == b"s3cret"

    broken = V1Secret(metadata=V1ObjectMeta(name="broken"), data={"token": "not base64!"})
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await official(tmp_path, lambda core: core.create_namespaced_secret("default", broken))
    assert refused.value.status == 400
    assert "illegal base64 data" in json.loads(refused.value.body or "{}")["message"]


async def test_no_new_finalizers_on_an_object_being_deleted(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    """An object held by a finalizer while being deleted may lose finalizers but not gain one."""
    held = V1ConfigMap(metadata=V1ObjectMeta(name="held", finalizers=["example.com/keep"]))
    await official(tmp_path, lambda core: core.create_namespaced_config_map("default", held))
    await official(tmp_path, lambda core: core.delete_namespaced_config_map("held", "default"))
    with pytest.raises(kubernetes.client.ApiException) as added:
        await official(
            tmp_path,
            lambda core: core.patch_namespaced_config_map(
                "held",
                "default",
                {"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}},
            ),
        )
    cause = causes(added.value)[0]
    assert (cause["field"], cause["reason"]) == ("metadata.finalizers", "FieldValueForbidden")
    assert "example.com/more" in cause["message"]
    await official(
        tmp_path,
        lambda core: core.patch_namespaced_config_map(
            "held", "default", {"metadata": {"finalizers": None}}
        ),
    )
    assert not (await kube.store.list("configmaps", "default")).items
