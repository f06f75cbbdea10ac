"""The live scheduler's catalog applies the mirror's NodeOverlays to every read (provisioning,
disruption and a launched claim's capacity alike), and hands back the same tuple while nothing
changes, so catalog indexes stay cached; the converter refuses what the CRD refuses."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.core.model import InstanceType
from scheduler_svc.core.nodeclass import KubeletSpec
from scheduler_svc.core.overlay import NodeOverlay, PriceAdjustment
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import node_overlay_from_k8s
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.resources import NODE_OVERLAYS
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.state.cluster import ClusterMirror
from scheduler_svc.state.core_snapshot import CoreSnapshotter
from tests.scheduler_svc.core.builders import instance_type

NODE_CLASS = {"metadata": {"name": "default"}, "spec": {}}


class Source:
    def __init__(self) -> None:
        self.calls = 0

    async def list_instance_types(
        self, *, kubelet: KubeletSpec | None = None, root_volume_size_bytes: int = 0
    ) -> tuple[InstanceType, ...]:
        self.calls += 1
        return (instance_type("m5.large", 2, 8, 0.1),)


def overlay_object(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": spec,
    }


async def test_catalog_reads_carry_the_overlays() -> None:
    mirror = ClusterMirror((NODE_OVERLAYS,), transforms={})
    snapshotter = CoreSnapshotter(mirror)
    catalog = InstanceTypeCatalog(Source(), overlays=lambda: snapshotter.overlays()[0])

    plain = await catalog.instance_types(NODE_CLASS)
    assert plain[0].offerings[0].price_per_hour == 0.1
    mirror.handle(
        ObjectEvent(
            NODE_OVERLAYS,
            "ADDED",
            overlay_object("sp", priceAdjustment="-50%", capacity={"example.com/fuse": "2"}),
        )
    )
    first = await catalog.instance_types(NODE_CLASS)
    assert {o.price_per_hour for o in first[0].offerings} == {0.05}
    assert (
        await catalog.instance_types(NODE_CLASS) is first
    )  # unchanged: the same tuple, indexes stay cached
    claimed = catalog.lookup(NODE_CLASS, "m5.large")
    assert claimed is not None
    assert dict(claimed.allocatable.extended) == {"example.com/fuse": 2}


def test_an_invalid_overlay_is_left_out_and_reported() -> None:
    mirror = ClusterMirror((NODE_OVERLAYS,), transforms={})
    mirror.handle(ObjectEvent(NODE_OVERLAYS, "ADDED", overlay_object("ok", price="0.2")))
    mirror.handle(
        ObjectEvent(NODE_OVERLAYS, "ADDED", overlay_object("bad", priceAdjustment="cheaper"))
    )
    valid, invalid = CoreSnapshotter(mirror).overlays()
    assert [o.name for o in valid] == ["ok"]
    assert [(e.name, e.field) for e in invalid] == [("bad", "spec.priceAdjustment")]


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"price": "0.1", "priceAdjustment": "-1%"}, "spec", "cannot set both"),
        ({"price": "-1"}, "spec.price", "negative"),
        ({"priceAdjustment": "30%"}, "spec.priceAdjustment", "signed"),
        ({"capacity": {"memory": "1Gi"}}, "spec.capacity.memory", "extended resources"),
        ({"capacity": {"example.com/x": "-1"}}, "spec.capacity.example.com/x", "negative"),
        ({"requirements": [{"key": "a", "operator": "Near"}]}, "spec.requirements[0].operator", ""),
    ],
)
def test_the_converter_refuses_bad_overlays(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidObjectError) as caught:
        node_overlay_from_k8s(overlay_object("bad", **spec))
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_the_converter_reads_karpenter_fields() -> None:
    overlay = node_overlay_from_k8s(
        overlay_object(
            "sp",
            weight=7,
            priceAdjustment="+0.01",
            capacity={"hugepages-2Mi": "100Mi"},
            requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}],
        )
    )
    assert overlay.weight == 7
    assert overlay.price_adjustment == PriceAdjustment(0.01, percent=False)
    assert overlay.capacity == (("hugepages-2Mi", 100 * 1024**2),)
    assert overlay.matches({"kubernetes.io/arch": "arm64"})
    assert not overlay.matches({"kubernetes.io/arch": "amd64"})
    assert isinstance(overlay, NodeOverlay)
