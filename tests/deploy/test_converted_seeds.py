"""The Karpenter manifests users have (the seed articles' and v1/v1beta1 ones) convert into
objects that daiku's CRDs accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from daiku_cli.conversion import convert

from .crd_validation import violations

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.name)
def test_converted_objects_pass_the_crds(path: Path) -> None:
    """Every object converted from the fixture passes its daiku CRD's schema and CEL rules."""
    result = convert(_documents(path), cluster_name="my-cluster")
    assert result.objects
    for obj in result.objects:
        assert violations(obj) == [], (obj["kind"], obj["metadata"]["name"])


def test_seed000_provisioner_keeps_its_meaning() -> None:
    """Seed 000's Provisioner (30 s empty TTL, 30 min expiry, cpu limit 100, discovery-tag
    selectors) keeps each of these in the NodePool and EC2NodeClass."""
    nodepool, node_class = convert(
        _documents(FIXTURES / "seed000_provisioner.yaml"), cluster_name="mz-karpenter"
    ).objects
    assert nodepool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "30s",
    }
    assert nodepool["spec"]["template"]["spec"]["expireAfter"] == "30m"
    assert nodepool["spec"]["limits"] == {"cpu": 100}
    assert nodepool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    discovery = [{"tags": {"karpenter.sh/discovery": "mz-karpenter"}}]
    assert node_class["spec"]["subnetSelectorTerms"] == discovery
    assert node_class["spec"]["securityGroupSelectorTerms"] == discovery


def test_karpenter_v1_manifest_works_after_changing_only_api_version() -> None:
    """The Karpenter v1 fixture, with apiVersion set to daiku.dev/v1 and its extra fields
    removed, passes daiku's CRDs as it is."""
    for document in _documents(FIXTURES / "karpenter_v1.yaml"):
        document["apiVersion"] = "daiku.dev/v1"
        document.pop("status", None)
        document["metadata"].pop("resourceVersion", None)
        document["spec"].pop("nodeRepairPolicy", None)  # the fixture's deliberately unknown fields
        document["spec"].pop("ipPrefixCount", None)
        assert violations(document) == []
