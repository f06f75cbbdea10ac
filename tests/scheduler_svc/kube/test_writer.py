"""KubeWriter's condition writes against localcloud's API server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from localcloud.kube.server import KubeApiServer
from scheduler_svc.errors import KubeConflictError
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import NODE_CLAIMS, KubeObject, Resource
from scheduler_svc.kube.writer import (
    WRITE_ATTEMPTS,
    KubeWriter,
    condition,
    is_condition_true,
)
from tests.scheduler_svc.kube.test_objects import NOW, nodeclaim

ROOT = Path(__file__).parents[3]


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, KubeWriter]]:
    async with KubeApiServer() as server:
        for crd in sorted((ROOT / "deploy/crds").glob("*.yaml")):
            await server.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        async with await api_client_from_kubeconfig(path) as api:
            yield server, KubeWriter(KubeObjects(api, clock=lambda: NOW), clock=lambda: NOW)


async def test_a_stale_copy_never_erases_a_condition_another_writer_set(
    writer: tuple[KubeApiServer, KubeWriter],
) -> None:
    """Setting Launched from a copy read before Registered was written keeps Registered: the
    write conflicts on the old resourceVersion, re-reads the claim and merges into it."""
    _, kube = writer
    stale: KubeObject = await kube.create_nodeclaim(nodeclaim("default-abc12"))
    await kube.set_nodeclaim_conditions(stale, [("Registered", "True", "Registered", "")])

    written = await kube.set_nodeclaim_conditions(
        stale, [("Launched", "True", "Launched", "")], extra_status={"providerID": "aws:///z/i-1"}
    )

    assert is_condition_true(written, "Registered")
    assert is_condition_true(written, "Launched")
    assert written["status"]["providerID"] == "aws:///z/i-1"
    read = await kube.objects.get(NODE_CLAIMS, "default-abc12")
    assert sorted(c["type"] for c in read["status"]["conditions"]) == ["Launched", "Registered"]


async def test_a_claim_that_keeps_changing_gives_up_with_a_conflict(
    writer: tuple[KubeApiServer, KubeWriter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every re-read is already stale again, the write stops after a bounded number of
    attempts and raises KubeConflictError rather than writing blind."""
    server, kube = writer
    claim = await kube.create_nodeclaim(nodeclaim("default-busy"))
    reads = 0
    real_get = kube.objects.get

    async def get_then_change(
        resource: Resource, name: str, namespace: str | None = None
    ) -> KubeObject:
        nonlocal reads
        reads += 1
        fresh = await real_get(resource, name, namespace)
        # another writer changes the claim right after every read
        await server.store.patch(
            "nodeclaims", "default-busy", {"metadata": {"labels": {"touch": str(reads)}}}
        )
        return fresh

    monkeypatch.setattr(kube.objects, "get", get_then_change)
    await server.store.patch("nodeclaims", "default-busy", {"metadata": {"labels": {"a": "b"}}})

    with pytest.raises(KubeConflictError):
        await kube.set_nodeclaim_conditions(claim, [("Launched", "True", "Launched", "")])

    assert reads == WRITE_ATTEMPTS - 1
    read = await real_get(NODE_CLAIMS, "default-busy")
    assert condition(read, "Launched") is None
