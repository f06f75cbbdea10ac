"""The converter reads an EC2NodeClass's fleetAllocationStrategy and capacity reservation terms
into the typed launch settings the actuator client sends."""

from __future__ import annotations

from typing import Any

from scheduler_svc.core.nodeclass import CapacityReservationTerm
from scheduler_svc.kube.convert import node_class_from_k8s


def node_class(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "r",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-1"}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
            **spec,
        },
    }


def test_strategies_and_reservation_terms_are_read() -> None:
    spec = node_class_from_k8s(
        node_class(
            fleetAllocationStrategy={"spot": "lowest-price", "onDemand": "lowest-price"},
            capacityReservationSelectorTerms=[
                {"id": "cr-1"},
                {"tags": {"team": "ml"}, "ownerID": "123456789012"},
            ],
        )
    )
    assert spec.spot_allocation_strategy == "lowest-price"
    assert spec.on_demand_allocation_strategy == "lowest-price"
    assert spec.capacity_reservation_terms == (
        CapacityReservationTerm(id="cr-1"),
        CapacityReservationTerm(tags=(("team", "ml"),), owner_id="123456789012"),
    )


def test_unset_strategies_are_empty() -> None:
    spec = node_class_from_k8s(node_class())
    assert (spec.spot_allocation_strategy, spec.on_demand_allocation_strategy) == ("", "")
