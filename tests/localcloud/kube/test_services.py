"""Services as kube-apiserver admits them: defaults, clusterIPs from 10.96.0.0/12, immutability,
and kubectl's table."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from localcloud.kube.errors import Invalid
from localcloud.kube.server import KubeApiServer
from localcloud.kube.store import Store
from tests.localcloud.kube.conftest import Kubectl


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec},
    }


async def test_a_service_gets_the_apiservers_defaults_and_a_cluster_ip() -> None:
    store = Store()

    created = await store.create("services", service("web"), "default")

    spec = created["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIP"] != "10.96.0.1", "the kubernetes Service's address is reserved"
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")


async def test_every_service_gets_its_own_address_and_a_freed_one_is_reused_later() -> None:
    store = Store()
    addresses = [
        (await store.create("services", service(f"s{i}"), "default"))["spec"]["clusterIP"]
        for i in range(5)
    ]

    assert len(set(addresses)) == 5


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"clusterIP": "None"}, "None"),
        ({"type": "ExternalName", "externalName": "db.example.com", "ports": []}, None),
        ({"clusterIP": "10.96.7.7"}, "10.96.7.7"),
    ],
)
async def test_headless_external_name_and_an_asked_address(
    spec: dict[str, Any], expected: str | None
) -> None:
    store = Store()

    created = await store.create("services", service("web", **spec), "default")

    assert created["spec"].get("clusterIP") == expected


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ("10.96.7.7", "provided IP is already allocated"),
        ("10.96.0.1", "provided IP is already allocated"),
        ("192.168.0.1", "not in the valid range"),
        ("not-an-ip", "must be a valid IP address"),
    ],
)
async def test_an_address_that_cannot_be_had_is_refused(asked: str, message: str) -> None:
    store = Store()
    await store.create("services", service("first", clusterIP="10.96.7.7"), "default")

    with pytest.raises(Invalid, match=message):
        await store.create("services", service("second", clusterIP=asked), "default")


async def test_an_update_keeps_the_address_and_may_not_change_it() -> None:
    store = Store()
    created = await store.create("services", service("web"), "default")
    replacement = service("web", ports=[{"port": 8080}])
    replacement["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]

    updated = await store.update("services", replacement, "default")

    assert updated["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    moved = service("web", clusterIP="10.96.9.9")
    moved["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]
    with pytest.raises(Invalid, match="field is immutable"):
        await store.update("services", moved, "default")


async def test_kubectl_creates_a_service_and_shows_its_cluster_ip(
    kube: KubeApiServer, kubectl: Kubectl
) -> None:
    await kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")

    table = (await kubectl("get", "service", "web")).stdout

    address = (await kube.store.get("services", "web", "default"))["spec"]["clusterIP"]
    header, row = table.splitlines()
    assert header.split()[:5] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)"]
    assert row.split()[:5] == ["web", "ClusterIP", address, "<none>", "80/TCP"]
