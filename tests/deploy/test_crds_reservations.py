"""The EC2NodeClass CRD's capacityReservationSelectorTerms and status.capacityReservations:
Karpenter's spelling accepted, bad terms refused with Karpenter's messages."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from .crd_validation import violations

NODECLASS = (
    Path(__file__).resolve().parents[2] / "deploy" / "examples" / "ec2nodeclass-default.yaml"
)


def nodeclass(*terms: dict[str, Any], status: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(yaml.safe_load(NODECLASS.read_text()))
    obj["spec"]["capacityReservationSelectorTerms"] = list(terms)
    if status is not None:
        obj["status"] = {"capacityReservations": status}
    return obj


def test_terms_by_id_and_by_tags_with_owner_and_a_status_are_accepted() -> None:
    obj = nodeclass(
        {"id": "cr-0123456789abcdef0"},
        {"tags": {"team": "ml"}, "ownerID": "123456789012"},
        status=[
            {
                "id": "cr-0123456789abcdef0",
                "instanceType": "p5.48xlarge",
                "availabilityZone": "us-east-1a",
                "reservationType": "capacity-block",
                "state": "expiring",
                "endTime": "2026-12-01T12:00:00Z",
                "availableInstanceCount": 0,
            }
        ],
    )
    assert violations(obj) == []


@pytest.mark.parametrize(
    ("term", "rule"),
    [
        ({}, "has(x.tags) || has(x.id)"),
        ({"id": "cr-1", "tags": {"a": "b"}}, "has(x.id) && (has(x.tags) || has(x.ownerID))"),
        ({"id": "cr-1", "ownerID": "123456789012"}, "has(x.id) && (has(x.tags)"),
        ({"id": "ami-123"}, "cr-"),
        ({"tags": {"a": "b"}, "ownerID": "self"}, "[0-9]{12}"),
    ],
)
def test_bad_terms_are_refused_naming_the_rule(term: dict[str, Any], rule: str) -> None:
    found = violations(nodeclass(term))
    assert any(rule in str(v) for v in found), found


def test_an_unknown_reservation_type_in_the_status_is_refused() -> None:
    obj = nodeclass(
        {"id": "cr-1"},
        status=[
            {
                "id": "cr-1",
                "instanceType": "m5.large",
                "availabilityZone": "a",
                "reservationType": "odcr",
            }
        ],
    )
    assert violations(obj) != []


@pytest.mark.parametrize(
    ("strategy", "ok"),
    [
        ({"spot": "capacity-optimized-prioritized", "onDemand": "lowest-price"}, True),
        ({"spot": "prioritized"}, False),
        ({"onDemand": "capacity-optimized"}, False),
    ],
)
def test_fleet_allocation_strategy_takes_only_ec2s_values(
    strategy: dict[str, str], ok: bool
) -> None:
    obj = copy.deepcopy(yaml.safe_load(NODECLASS.read_text()))
    obj["spec"]["fleetAllocationStrategy"] = strategy
    assert (violations(obj) == []) is ok
