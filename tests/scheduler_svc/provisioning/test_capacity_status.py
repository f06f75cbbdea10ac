"""CapacityBuffer and NodeOverlay status: what each condition says (pure), and the controller
writing it through the status subresource of localcloud's API server, once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.server import KubeApiServer
from scheduler_svc.core.headroom import BufferRoom, CapacityBuffer
from scheduler_svc.core.model import Resources
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import CAPACITY_BUFFERS, NODE_OVERLAYS, KubeObject, Resource
from scheduler_svc.kube.writer import KubeWriter
from scheduler_svc.provisioning.capacity_status import (
    CapacityStatusController,
    buffer_status,
    overlay_status,
)
from scheduler_svc.provisioning.headroom import BufferReport
from scheduler_svc.state.cluster import ClusterMirror
from tests.scheduler_svc.core.builders import instance_type

ROOT = Path(__file__).parents[3]
FAMILY = "karpenter.k8s.aws/instance-family"
CATALOG = (
    instance_type("m5.large", 2, 8, 0.096, spot_price=0.04, labels={FAMILY: "m5"}),
    instance_type("c5.large", 2, 4, 0.085, labels={FAMILY: "c5"}),
)


def buffer_object(name: str = "burst", **spec: Any) -> KubeObject:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "generation": 3},
        "spec": {"nodePoolRef": {"name": "default"}, "requests": {"cpu": "1"}, **spec},
    }


BUFFER = CapacityBuffer("burst", "default", Resources(cpu_millis=1000), replicas=4)


def report(**changes: Any) -> BufferReport:
    return BufferReport(BUFFER, BufferRoom(BUFFER, 4, "replicas=4"), **changes)


def conditions(update: Any) -> dict[str, tuple[str, str, str]]:
    return {t: (status, reason, message) for t, status, reason, message in update.conditions}


def test_a_buffer_whose_room_was_placed_is_ready_and_provisioning() -> None:
    update = buffer_status(buffer_object(replicas=4, limits={"cpu": "16"}), report(), None)
    assert update is not None
    assert update.fields["replicas"] == 4
    assert update.fields["observedGeneration"] == 3
    assert update.fields["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    assert update.fields["podTemplate"] == {
        "requests": {"cpu": "1"},
        "nodeSelector": {"daiku.dev/nodepool": "default"},
    }
    assert update.fields["limits"] == {"cpu": "16"}
    found = conditions(update)
    assert found["ReadyForProvisioning"][:2] == ("True", "AttributesSetSuccessfully")
    message = found["ReadyForProvisioning"][2]
    assert message == "room for 4 pods of 1 cpu in NodePool default (replicas=4)"
    assert found["Provisioning"] == ("True", "Provisioned", "4 of 4 pods placed")


def test_room_that_found_no_node_is_not_provisioning_and_says_why() -> None:
    reason = "NodePool default limit cpu=2 reached"
    unplaced = report(unplaced=3, unplaced_reason=reason)
    update = buffer_status(buffer_object(replicas=4), unplaced, None)
    assert update is not None
    assert conditions(update)["Provisioning"] == (
        "False",
        "RoomUnplaced",
        f"3 of 4 pods found no node: {reason}",
    )


def test_a_buffer_whose_nodepool_is_missing_is_not_ready_for_provisioning() -> None:
    missing = report(problem="NodePool default not found")
    update = buffer_status(buffer_object(replicas=4), missing, None)
    assert update is not None
    assert update.fields["replicas"] == 0
    found = conditions(update)
    assert found["ReadyForProvisioning"] == (
        "False",
        "NodePoolNotFound",
        "NodePool default not found",
    )
    assert found["Provisioning"][:2] == ("False", "NotReadyForProvisioning")


def test_an_invalid_buffer_says_which_field_and_a_valid_unseen_one_says_nothing() -> None:
    error = InvalidObjectError(
        kind="CapacityBuffer", name="burst", field="spec.requests", reason="x"
    )
    update = buffer_status(buffer_object(), None, error)
    assert update is not None
    assert conditions(update)["ReadyForProvisioning"] == ("False", "InvalidSpec", str(error))
    assert update.fields["podTemplate"] is None  # removed
    assert buffer_status(buffer_object(), None, None) is None


def test_overlay_conditions_follow_karpenter() -> None:
    fine = conditions(overlay_status(None, None))
    assert fine == {
        "ValidationSucceeded": ("True", "ValidationSucceeded", ""),
        "Ready": ("True", "Ready", ""),
    }
    clash = conditions(overlay_status(None, "conflicts with NodeOverlay b (weight 0): ..."))
    assert clash["ValidationSucceeded"][:2] == ("False", "Conflict")
    assert clash["Ready"] == clash["ValidationSucceeded"]
    error = InvalidObjectError(kind="NodeOverlay", name="a", field="spec.price", reason="bad")
    assert conditions(overlay_status(error, None))["Ready"][:2] == ("False", "RuntimeValidation")


def overlay(name: str, **spec: Any) -> KubeObject:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [{"key": FAMILY, "operator": "In", "values": ["m5"]}], **spec},
    }


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, KubeWriter]]:
    async with KubeApiServer() as server:
        for crd in sorted((ROOT / "deploy/crds").glob("*.yaml")):
            await server.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        async with await api_client_from_kubeconfig(path) as api:
            yield server, KubeWriter(KubeObjects(api))


async def _mirror_of(server: KubeApiServer, mirror: ClusterMirror) -> None:
    resources: dict[str, Resource] = {
        "capacitybuffers": CAPACITY_BUFFERS,
        "nodeoverlays": NODE_OVERLAYS,
    }
    for plural, resource in resources.items():
        for obj in (await server.store.list(plural)).items:
            mirror.handle(ObjectEvent(resource, "MODIFIED", obj))


async def test_the_controller_writes_each_status_once_through_the_subresource(
    kube: tuple[KubeApiServer, KubeWriter],
) -> None:
    """Two overlays of one weight pricing m5 differently: the one later in the alphabet is
    Ready, the other is ValidationSucceeded=False (Conflict) naming it; an overlay of another
    weight is Ready. The buffer's status shows the round's room. A second pass writes nothing."""
    server, writer = kube
    await server.store.create("capacitybuffers", buffer_object(replicas=4))
    await server.store.create("nodeoverlays", overlay("aa-flat", price="0.05", weight=5))
    await server.store.create(
        "nodeoverlays", overlay("zz-savings", priceAdjustment="-30%", weight=5)
    )
    await server.store.create("nodeoverlays", overlay("other", price="0.07", weight=9))
    mirror = ClusterMirror()

    async def catalog() -> tuple[Any, ...]:
        return CATALOG

    controller = CapacityStatusController(mirror=mirror, writer=writer, instance_types=catalog)
    controller.report([report()])
    await _mirror_of(server, mirror)

    assert await controller.write_all() == 4

    async def read(plural: str, name: str) -> KubeObject:
        return await server.store.get(plural, name)

    def by_type(obj: KubeObject) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in obj["status"]["conditions"]}

    loser = by_type(await read("nodeoverlays", "aa-flat"))
    assert loser["ValidationSucceeded"]["status"] == "False"
    assert loser["ValidationSucceeded"]["reason"] == "Conflict"
    assert "NodeOverlay zz-savings (weight 5)" in loser["ValidationSucceeded"]["message"]
    assert loser["Ready"]["status"] == "False"
    assert by_type(await read("nodeoverlays", "zz-savings"))["Ready"]["status"] == "True"
    assert by_type(await read("nodeoverlays", "other"))["Ready"]["status"] == "True"
    buffer = await read("capacitybuffers", "burst")
    assert buffer["status"]["replicas"] == 4
    assert by_type(buffer)["ReadyForProvisioning"]["status"] == "True"
    assert by_type(buffer)["Provisioning"]["observedGeneration"] == 1

    await _mirror_of(server, mirror)  # the mirror sees the writes
    assert await controller.write_all() == 0
