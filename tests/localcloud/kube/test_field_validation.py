"""fieldValidation as kube-apiserver applies it, driven by kubectl and the official clients.

Strict (kubectl's default) refuses an object with a field its kind does not declare, Warn (the
server's default) stores it without the field and says so in a `Warning` header, Ignore drops it
silently; custom resources report the fields their structural schema prunes the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import kr8s.asyncio
import pytest

from localcloud.kube import fields
from localcloud.kube.errors import NotFound
from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

REPO = Path(__file__).resolve().parents[3]

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx", "imagePullPolcy": "Always"}]},
        },
    },
}
TYPO = "spec.template.spec.containers[0].imagePullPolcy"


async def test_kubectl_strict_refuses_and_warn_drops_an_unknown_field(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """kubectl apply (strict by default) is refused with the field's path; --validate=warn
    stores the Deployment without the field and prints the server's warning."""
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(DEPLOYMENT))
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert refused.returncode != 0
    assert f'strict decoding error: unknown field "{TYPO}"' in refused.stderr
    with pytest.raises(NotFound):
        await kube.store.get("deployments", "web", "default")

    warned = await kubectl("apply", "--validate=warn", "-f", str(manifest))
    assert f'Warning: unknown field "{TYPO}"' in warned.stderr
    assert [w for w in kube.api.field_warnings if TYPO in w] == [
        f'POST /apis/apps/v1/namespaces/default/deployments: unknown field "{TYPO}"'
    ]
    stored = await kube.store.get("deployments", "web", "default")
    assert "imagePullPolcy" not in stored["spec"]["template"]["spec"]["containers"][0]


async def test_kr8s_field_validation_modes(kube: KubeApiServer, tmp_path: Path) -> None:
    """Through kr8s: Strict is a 400 naming the field, Ignore stores the object without it,
    and an unknown mode is a 400."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "colour": "blue"},
        "data": {"a": "1"},
    }
    api = await kr8s.asyncio.api(kubeconfig=str(tmp_path / "kubeconfig"))

    async def create(mode: str) -> httpx.Response:
        async with api.call_api(
            "POST",
            namespace="default",
            url="configmaps",
            raise_for_status=False,
            params={"fieldValidation": mode},
            content=json.dumps(body),
        ) as response:
            return response

    try:
        strict = await create("Strict")
        assert strict.status_code == 400
        assert 'unknown field "metadata.colour"' in strict.json()["message"]
        assert (await create("Sometimes")).status_code == 400
        assert (await create("Ignore")).status_code == 201
    finally:
        if api._session is not None:  # kr8s has no public close; its client holds a pool
            await api._session.aclose()
    stored = await kube.store.get("configmaps", "settings", "default")
    assert "colour" not in stored["metadata"]
    assert stored["data"] == {"a": "1"}


async def test_custom_resources_report_pruned_fields(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """A NodePool with a field its CRD's schema does not declare is refused under Strict and
    pruned with a warning under Warn (kubectl)."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    pool = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "extra"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "x"},
                    "requirements": [],
                }
            },
            "notAField": True,
        },
    }
    manifest = tmp_path / "pool.json"
    manifest.write_text(json.dumps(pool))
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert 'strict decoding error: unknown field "spec.notAField"' in refused.stderr
    with pytest.raises(NotFound):
        await kube.store.get("nodepools.daiku.dev", "extra")
    warned = await kubectl("apply", "--validate=warn", "-f", str(manifest))
    assert 'unknown field "spec.notAField"' in warned.stderr
    assert "notAField" not in (await kube.store.get("nodepools.daiku.dev", "extra"))["spec"]


def test_builtin_field_table_matches_the_installed_client() -> None:
    """`builtin_fields.json` is what the installed client's models declare for the served
    kinds (regenerate it with `python -m localcloud.kube.fields` after a client upgrade)."""
    table = json.loads((REPO / "localcloud" / "kube" / "builtin_fields.json").read_text())
    assert table == fields.generate_table(fields.served_kinds())


async def test_times_come_back_in_rfc3339_utc_as_the_apiserver_encodes_them(
    kube: KubeApiServer,
) -> None:
    """A metav1.Time written with an offset or fractions comes back as whole seconds in UTC
    (`Z`); a MicroTime (a Lease's renewTime) keeps microseconds; a time without an offset is
    a 400."""
    headers = {"Authorization": f"Bearer {kube.token}"}
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l1"},
        "spec": {"holderIdentity": "a", "renewTime": "2026-11-26T10:00:00.5+01:00"},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1"},
        "spec": {"containers": [{"name": "a", "image": "x"}]},
    }
    async with httpx.AsyncClient(headers=headers, verify=False) as session:
        response = await session.post(
            f"{kube.url}/apis/coordination.k8s.io/v1/namespaces/default/leases", json=lease
        )
        created = response.json()
        response = await session.post(f"{kube.url}/api/v1/namespaces/default/pods", json=pod)
        assert response.status_code == 201
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": "2026-11-26T10:00:00.123456+02:00",
                    }
                ]
            }
        }
        response = await session.patch(
            f"{kube.url}/api/v1/namespaces/default/pods/p1/status",
            content=json.dumps(status),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        patched = response.json()
        naive = {
            **lease,
            "metadata": {"name": "l2"},
            "spec": {"acquireTime": "2026-11-26T10:00:00"},
        }
        response = await session.post(
            f"{kube.url}/apis/coordination.k8s.io/v1/namespaces/default/leases", json=naive
        )
        refused = response.status_code

    assert created["spec"]["renewTime"] == "2026-11-26T09:00:00.500000Z"
    condition = patched["status"]["conditions"][0]
    assert condition["lastTransitionTime"] == "2026-11-26T08:00:00Z"
    assert refused == 400
