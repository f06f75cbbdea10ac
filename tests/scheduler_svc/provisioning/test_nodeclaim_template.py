"""A solver plan becomes a Karpenter-v1-shaped NodeClaim, and the claim gives back the launch."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler_svc.core.model import NodeClaimPlan, OfferingOption, RelaxedMinValues, Resources
from scheduler_svc.core.requirements import Operator, Requirement
from scheduler_svc.kube.convert_disruption import OFFERINGS_ANNOTATION
from scheduler_svc.provisioning.nodeclaim_template import (
    MAX_OFFERINGS,
    MIN_VALUES_RELAXED_ANNOTATION,
    format_quantity,
    launch_request_of,
    new_nodeclaim_name,
    nodeclaim_from_plan,
)

NODEPOOL: dict[str, Any] = {
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "cilium", "effect": "NoExecute"}],
                "expireAfter": "720h",
            },
        }
    },
}

PLAN = NodeClaimPlan(
    nodepool="default",
    requirements=(
        Requirement("kubernetes.io/arch", Operator.IN, ("amd64",)),
        Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.large", "c5.large")),
    ),
    pods=("default/a", "default/b"),
    requests=Resources(cpu_millis=1500, memory_bytes=3 * 1024**3, pods=2),
    offerings=(
        OfferingOption("m5.large", "us-east-1a", "spot", 0.04),
        OfferingOption("m5.large", "us-east-1b", "spot", 0.05),
        OfferingOption("c5.large", "us-east-1a", "on-demand", 0.085),
    ),
)


def test_the_claim_carries_karpenter_v1_fields() -> None:
    """Requirements pin instance type, zone and capacity type to the plan's offerings; labels,
    taints, startup taints, requests, nodeClassRef and the finalizer come along."""
    claim = nodeclaim_from_plan(PLAN, NODEPOOL, name="default-abcde")
    spec = claim["spec"]
    requirements = {r["key"]: r for r in spec["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"]["values"] == ["m5.large", "c5.large"]
    assert requirements["topology.kubernetes.io/zone"]["values"] == ["us-east-1a", "us-east-1b"]
    assert requirements["karpenter.sh/capacity-type"]["values"] == ["spot", "on-demand"]
    assert requirements["kubernetes.io/arch"] == {
        "key": "kubernetes.io/arch",
        "operator": "In",
        "values": ["amd64"],
    }
    assert spec["resources"]["requests"] == {"cpu": "1500m", "memory": "3Gi", "pods": "2"}
    assert spec["nodeClassRef"]["name"] == "default"
    assert spec["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "cilium", "effect": "NoExecute"}]
    assert spec["expireAfter"] == "720h"
    labels = claim["metadata"]["labels"]
    assert labels == {
        "team": "ml",
        "daiku.dev/nodepool": "default",
        "karpenter.sh/nodepool": "default",
    }
    assert claim["metadata"]["finalizers"] == ["daiku.dev/termination"]


def test_a_claim_opened_with_relaxed_min_values_records_them() -> None:
    """As Karpenter does: the relaxed minValues on the claim's requirement, and the annotation;
    a claim that kept its minValues has neither."""
    relaxed = dataclasses.replace(
        PLAN, min_values_relaxed=(RelaxedMinValues("kubernetes.io/arch", 2, 1),)
    )
    claim = nodeclaim_from_plan(relaxed, NODEPOOL, name="default-abcde")
    requirements = {r["key"]: r for r in claim["spec"]["requirements"]}
    assert requirements["kubernetes.io/arch"]["minValues"] == 1
    assert claim["metadata"]["annotations"][MIN_VALUES_RELAXED_ANNOTATION] == "true"
    kept = nodeclaim_from_plan(PLAN, NODEPOOL, name="default-abcde")
    assert MIN_VALUES_RELAXED_ANNOTATION not in kept["metadata"]["annotations"]
    assert all("minValues" not in r for r in kept["spec"]["requirements"])


def test_the_launch_request_keeps_the_offerings_in_order() -> None:
    """Read back from the claim, the launch has the plan's offerings in the plan's order."""
    claim = nodeclaim_from_plan(PLAN, NODEPOOL, name="default-abcde")
    request = launch_request_of(claim)
    assert request.offerings == PLAN.offerings
    assert request.nodepool_name == "default"
    assert request.node_class_name == "default"
    assert request.startup_taints == ({"key": "cilium", "effect": "NoExecute"},)


def test_a_claim_without_the_annotation_launches_the_cross_product() -> None:
    """A claim written by hand launches every type x zone x capacity type its requirements
    allow, in the order written."""
    claim = nodeclaim_from_plan(PLAN, NODEPOOL, name="x")
    del claim["metadata"]["annotations"][OFFERINGS_ANNOTATION]
    offerings = launch_request_of(claim).offerings
    assert len(offerings) == 2 * 2 * 2
    assert (offerings[0].instance_type, offerings[0].zone, offerings[0].capacity_type) == (
        "m5.large",
        "us-east-1a",
        "spot",
    )


def test_a_claim_with_nothing_to_launch_is_refused_by_name() -> None:
    """No offering at all is a ValueError naming the claim and field."""
    claim = {"metadata": {"name": "empty"}, "spec": {"nodeClassRef": {"name": "d"}}}
    with pytest.raises(ValueError, match=r"NodeClaim empty: spec\.requirements"):
        launch_request_of(claim)


def test_quantities_and_names() -> None:
    """cpu in millis reads as cores when whole; bytes as Gi/Mi when exact; names are
    `<nodepool>-<5 chars>`."""
    assert format_quantity("cpu", 2000) == "2"
    assert format_quantity("cpu", 1930) == "1930m"
    assert format_quantity("memory", 6903 * 1024**2) == "6903Mi"
    assert format_quantity("ephemeral-storage", 17 * 1024**3) == "17Gi"
    assert format_quantity("memory", 1000) == "1000"
    name = new_nodeclaim_name("default")
    assert name.startswith("default-")
    assert len(name) == len("default-") + 5


def test_offerings_are_capped_at_what_the_actuator_accepts() -> None:
    """A plan with more offerings than the actuator takes keeps the most preferred ones."""
    many = tuple(OfferingOption(f"t{i}.large", "us-east-1a", "spot", 0.01 * i) for i in range(700))
    plan = NodeClaimPlan("default", (), ("default/a",), Resources(cpu_millis=100), many)
    request = launch_request_of(nodeclaim_from_plan(plan, NODEPOOL, name="x"))
    assert request.offerings == many[:MAX_OFFERINGS]


def test_the_launch_request_carries_the_claims_ephemeral_storage() -> None:
    """What a growing root volume is sized for (core.root_volume): the claim's requested
    ephemeral-storage, read back from the object; a bad quantity is refused naming the field."""
    plan = dataclasses.replace(PLAN, requests=Resources(ephemeral_storage_bytes=60 * 1024**3))
    claim = nodeclaim_from_plan(plan, NODEPOOL, name="default-abcde")
    assert launch_request_of(claim).ephemeral_storage_bytes == 60 * 1024**3
    assert (
        launch_request_of(nodeclaim_from_plan(PLAN, NODEPOOL, name="x")).ephemeral_storage_bytes
        == 0
    )
    claim["spec"]["resources"]["requests"]["ephemeral-storage"] = "lots"
    with pytest.raises(ValueError, match=r"spec.resources.requests\[ephemeral-storage\]"):
        launch_request_of(claim)
