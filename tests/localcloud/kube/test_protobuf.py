"""Protobuf request bodies from kubectl's typed clients (`kubectl create <kind> ...`)."""

from __future__ import annotations

import pytest

from localcloud.kube.errors import UnsupportedMediaType
from localcloud.kube.protobuf import MAGIC, decode_object
from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return MAGIC + _field(1, type_meta) + _field(2, raw)


async def test_decodes_a_namespace_skipping_empty_go_fields() -> None:
    """A Namespace body decodes to its JSON form; empty fields Go always encodes are skipped."""
    label = _field(1, b"team") + _field(2, b"a")
    meta = _field(1, b"ns1") + _field(4, b"") + _field(7, 0) + _field(11, label)
    obj = decode_object(_envelope("v1", "Namespace", _field(1, meta) + _field(2, b"")))
    assert obj == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ns1", "labels": {"team": "a"}},
        "spec": {},
    }


async def test_unknown_nonempty_field_is_refused() -> None:
    """A field the decoder does not know is an UnsupportedMediaType naming it, not dropped."""
    meta = _field(1, b"ns1") + _field(99, b"surprise")
    with pytest.raises(UnsupportedMediaType, match="field 99 of ObjectMeta"):
        decode_object(_envelope("v1", "Namespace", _field(1, meta)))


async def test_kubectl_create_generators(kube: KubeApiServer, kubectl: Kubectl) -> None:
    """kubectl create namespace/deployment/pdb/configmap/secret (protobuf bodies) store the
    objects they describe."""
    await kubectl("create", "namespace", "team-a")
    await kubectl("create", "deployment", "web", "--image=nginx", "--replicas=0", "--port=80")
    await kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=50%")
    await kubectl("create", "configmap", "c1", "--from-literal=a=b")
    await kubectl("create", "secret", "generic", "s1", "--from-literal=x=y")
    await kube.store.get("namespaces", "team-a")
    web = await kube.store.get("deployments", "web", "default")
    assert web["spec"]["replicas"] == 0
    assert web["spec"]["strategy"]["type"] == "RollingUpdate"
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["ports"]) == ("nginx", [{"containerPort": 80}])
    pdb = await kube.store.get("poddisruptionbudgets", "web", "default")
    assert pdb["spec"] == {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
    assert (await kube.store.get("configmaps", "c1", "default"))["data"] == {"a": "b"}
    assert (await kube.store.get("secrets", "s1", "default"))["data"] == {"x": "eQ=="}


async def test_kubectl_create_rbac_and_batch_generators(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    """kubectl create role/clusterrole/rolebinding/clusterrolebinding/job/cronjob (protobuf
    bodies) store the objects they describe."""
    await kubectl("create", "role", "r1", "--verb=get,list", "--resource=pods", "--resource-name=x")
    await kubectl("create", "clusterrole", "logs", "--verb=get", "--non-resource-url=/logs")
    await kubectl("create", "rolebinding", "rb1", "--role=r1", "--serviceaccount=default:sa")
    await kubectl("create", "clusterrolebinding", "crb1", "--clusterrole=logs", "--group=g")
    await kubectl("create", "job", "j1", "--image=busybox", "--", "echo", "hi")
    await kubectl("create", "cronjob", "c1", "--image=busybox", "--schedule=*/5 * * * *")

    role = await kube.store.get("roles.rbac.authorization.k8s.io", "r1", "default")
    assert role["rules"] == [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["x"]}
    ]
    logs = await kube.store.get("clusterroles.rbac.authorization.k8s.io", "logs")
    assert logs["rules"] == [{"verbs": ["get"], "nonResourceURLs": ["/logs"]}]
    binding = await kube.store.get("rolebindings.rbac.authorization.k8s.io", "rb1", "default")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "r1",
    }
    cluster_binding = await kube.store.get("clusterrolebindings.rbac.authorization.k8s.io", "crb1")
    assert cluster_binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "g"}
    ]
    job = await kube.store.get("jobs.batch", "j1", "default")
    pod_spec = job["spec"]["template"]["spec"]
    assert (pod_spec["restartPolicy"], pod_spec["containers"][0]["command"]) == (
        "Never",
        ["echo", "hi"],
    )
    cron = await kube.store.get("cronjobs.batch", "c1", "default")
    assert cron["spec"]["schedule"] == "*/5 * * * *"
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
