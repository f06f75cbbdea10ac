"""The provisioner's catalog carries the zone ids of the EC2NodeClass's resolved subnets on its
offerings, as Karpenter's AWS provider adds ``topology.k8s.aws/zone-id`` to each offering from
``status.subnets[].zoneID`` (aws/karpenter-provider-aws pkg/providers/instancetype/offering)."""

from __future__ import annotations

from typing import Any

from scheduler_svc.core import InstanceType, Offering, Resources
from scheduler_svc.core.nodeclass import KubeletSpec
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog

TYPES = (
    InstanceType(
        "m5.large",
        Resources(2000),
        Resources(1930),
        {},
        (Offering("us-east-1a", "on-demand", 0.096), Offering("us-east-1b", "spot", 0.03)),
    ),
)


class _Source:
    def __init__(self) -> None:
        self.calls = 0

    async def list_instance_types(
        self, *, kubelet: KubeletSpec | None = None, root_volume_size_bytes: int = 0
    ) -> tuple[InstanceType, ...]:
        self.calls += 1
        return TYPES


def _node_class(subnets: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "default"}, "spec": {}, "status": {"subnets": subnets}}


async def test_offerings_carry_the_zone_ids_of_the_resolved_subnets() -> None:
    """us-east-1a's subnet says use1-az6: its offering carries the id; us-east-1b has no
    subnet with an id and stays without. The same tuple comes back while nothing changes (the
    solver's index cache matches catalogs by identity)."""
    catalog = InstanceTypeCatalog(_Source(), clock=lambda: 0.0)
    node_class = _node_class(
        [
            {"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az6"},
            {"id": "subnet-2", "zone": "us-east-1b"},
        ]
    )

    first = await catalog.instance_types(node_class)
    again = await catalog.instance_types(node_class)

    assert [(o.zone, o.zone_id) for o in first[0].offerings] == [
        ("us-east-1a", "use1-az6"),
        ("us-east-1b", ""),
    ]
    assert again is first


async def test_a_class_without_resolved_subnets_gets_the_catalog_as_fetched() -> None:
    catalog = InstanceTypeCatalog(_Source(), clock=lambda: 0.0)

    assert await catalog.instance_types(_node_class([])) is TYPES
