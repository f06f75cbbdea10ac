"""daiku's CRDs accept the shipped examples and refuse what daiku's code would refuse."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .crd_validation import (
    CRD_DIR,
    CRD_FILES,
    CRD_VERSIONS,
    _openapi_schema,
    apply_defaults,
    cel_rules,
    compile_cel_rule,
    load_crd,
    violations,
)

# The console script installed beside the interpreter running the tests (a dev dependency).
KUBERNETES_VALIDATE = str(Path(sys.executable).with_name("kubernetes-validate"))
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def _example(name: str) -> dict[str, Any]:
    example: dict[str, Any] = yaml.safe_load((EXAMPLES_DIR / name).read_text())
    return example


def _nodepool() -> dict[str, Any]:
    return _example("nodepool-default.yaml")


def _nodeclass() -> dict[str, Any]:
    return _example("ec2nodeclass-default.yaml")


@pytest.mark.parametrize(
    "path",
    sorted(EXAMPLES_DIR.rglob("*.yaml")),
    ids=lambda p: str(p.relative_to(EXAMPLES_DIR)),
)
def test_examples_are_accepted(path: Path) -> None:
    """Every daiku object in deploy/examples passes its CRD's schema and CEL rules, and every
    other object passes kubernetes-validate --strict."""
    for document in yaml.safe_load_all(path.read_text()):
        if document["apiVersion"] in ("daiku.dev/v1", "daiku.dev/v1alpha1"):
            assert violations(document) == []
        else:
            result = subprocess.run(
                [KUBERNETES_VALIDATE, "--strict", "--quiet", "-k", "1.32.0", str(path)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_crd_identity(kind: str) -> None:
    """Each CRD is cluster-scoped, group daiku.dev, one served storage version with status (v1;
    NodeOverlay v1alpha1, as in Karpenter)."""
    crd = load_crd(kind)
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == ("daiku.dev", "Cluster", kind)
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.daiku.dev"
    (version,) = spec["versions"]
    expected = CRD_VERSIONS.get(kind, "v1")
    assert (version["name"], version["served"], version["storage"]) == (expected, True, True)
    assert version["subresources"]["status"] == {}


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_every_cel_rule_compiles(kind: str) -> None:
    """Every x-kubernetes-validations rule is standard CEL that cel-python compiles."""
    rules = cel_rules(kind)
    assert rules
    for rule in rules:
        compile_cel_rule(rule)


def test_printer_columns() -> None:
    """`kubectl get` shows type/zone/capacity/node/ready/age for NodeClaims, class/nodes/ready/age
    for NodePools, ready/age for EC2NodeClasses and NodeOverlays, the resolved room and its
    conditions for CapacityBuffers."""

    def columns(kind: str) -> list[str]:
        (version,) = load_crd(kind)["spec"]["versions"]
        return [c["name"] for c in version["additionalPrinterColumns"] if "priority" not in c]

    assert columns("NodeClaim") == ["Type", "Capacity", "Zone", "Node", "Ready", "Age"]
    assert columns("NodePool") == ["NodeClass", "Nodes", "Ready", "Age"]
    assert columns("EC2NodeClass") == ["Ready", "Age"]
    assert columns("NodeOverlay") == ["Weight", "Price", "Adjustment", "Ready", "Age"]
    # As upstream's CapacityBuffer: the replicas resolved (status) and the conditions.
    assert columns("CapacityBuffer") == ["NodePool", "Replicas", "Ready", "Provisioning", "Age"]


def test_nodepool_defaults() -> None:
    """A minimal NodePool gets Karpenter v1's defaults: consolidate at once when empty or
    underutilized, a 10% budget, nodes expire after 720h."""
    minimal = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "minimal"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "x"},
                    "requirements": [],
                }
            }
        },
    }
    defaulted = apply_defaults(_openapi_schema("NodePool"), minimal)
    assert defaulted["spec"]["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert defaulted["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert violations(minimal) == []


def test_ec2nodeclass_metadata_defaults_to_imdsv2() -> None:
    """An EC2NodeClass without metadataOptions gets IMDSv2-only with a hop limit of 1."""
    nodeclass = _nodeclass()
    del nodeclass["spec"]["metadataOptions"]
    defaulted = apply_defaults(_openapi_schema("EC2NodeClass"), nodeclass)
    assert defaulted["spec"]["metadataOptions"]["httpTokens"] == "required"
    assert defaulted["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 1


def _requirement(operator: str, values: list[str], key: str = "example.com/tier") -> Any:
    return {"key": key, "operator": operator, "values": values}


NODEPOOL_BREAKAGES = {
    "unknown operator": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("Like", ["a"])
    ),
    "weight 0": lambda s: s.update(weight=0),
    "weight 101": lambda s: s.update(weight=101),
    "duration in days": lambda s: s["template"]["spec"].update(expireAfter="30d"),
    "consolidateAfter junk": lambda s: s["disruption"].update(consolidateAfter="soon"),
    "unknown policy": lambda s: s["disruption"].update(consolidationPolicy="WhenUnderutilized"),
    "consolidationThreshold without Balanced": lambda s: s["disruption"].update(
        consolidationThreshold=2
    ),
    "consolidationThreshold 4": lambda s: s["disruption"].update(
        consolidationPolicy="Balanced", consolidationThreshold=4
    ),
    "consolidationThreshold 0": lambda s: s["disruption"].update(
        consolidationPolicy="Balanced", consolidationThreshold=0
    ),
    "doNotDisruptGracePeriod Never": lambda s: s["disruption"].update(
        doNotDisruptGracePeriod="Never"
    ),
    "doNotDisruptGracePeriod in days": lambda s: s["disruption"].update(
        doNotDisruptGracePeriod="1d"
    ),
    "bad taint effect": lambda s: s["template"]["spec"].update(
        taints=[{"key": "a", "effect": "NoRun"}]
    ),
    "budget nodes 101%": lambda s: s["disruption"]["budgets"].append({"nodes": "101%"}),
    "budget unknown reason": lambda s: s["disruption"]["budgets"].append(
        {"nodes": "1", "reasons": ["Expired"]}
    ),
    "budget schedule without duration": lambda s: s["disruption"]["budgets"].append(
        {"nodes": "1", "schedule": "@daily"}
    ),
    "minValues 0": lambda s: s["template"]["spec"]["requirements"][0].update(minValues=0),
    "minValues above values": lambda s: s["template"]["spec"]["requirements"][0].update(
        minValues=3
    ),
    "In without values": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("In", [])
    ),
    "Gt with a word": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("Gt", ["four"])
    ),
    "Lte with two values": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("Lte", ["1", "2"])
    ),
    "Exists with values": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("Exists", ["a"])
    ),
    "unknown capacity type": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("In", ["spot", "preemptible"], key="karpenter.sh/capacity-type")
    ),
    "hostname requirement": lambda s: s["template"]["spec"]["requirements"].append(
        _requirement("In", ["a"], key="kubernetes.io/hostname")
    ),
    "daiku nodepool label": lambda s: s["template"]["metadata"]["labels"].update(
        {"daiku.dev/nodepool": "x"}
    ),
    "karpenter nodepool label": lambda s: s["template"]["metadata"]["labels"].update(
        {"karpenter.sh/nodepool": "x"}
    ),
    "kubernetes.io label": lambda s: s["template"]["metadata"]["labels"].update(
        {"kubernetes.io/role": "x"}
    ),
    "limit not a quantity": lambda s: s["limits"].update(cpu="lots"),
    "negative limit": lambda s: s["limits"].update(cpu=-5),
    "negative limit as text": lambda s: s["limits"].update(cpu="-5"),
    "limit with a huge exponent": lambda s: s["limits"].update(cpu="1e20000000"),
    "limit with twenty digits": lambda s: s["limits"].update(memory="12345678901234567890"),
    "unknown field": lambda s: s.update(ttlSecondsAfterEmpty=30),
    "nodeClassRef to another kind": lambda s: s["template"]["spec"]["nodeClassRef"].update(
        kind="AWSNodeTemplate"
    ),
}


@pytest.mark.parametrize("breakage", sorted(NODEPOOL_BREAKAGES))
def test_nodepool_rejections(breakage: str) -> None:
    """The default NodePool, broken in one way, is refused."""
    nodepool = copy.deepcopy(_nodepool())
    NODEPOOL_BREAKAGES[breakage](nodepool["spec"])
    assert violations(nodepool) != []


def test_a_balanced_nodepool_with_its_threshold_passes() -> None:
    """Karpenter v1.14's `consolidationPolicy: Balanced` with `consolidationThreshold` 1-3."""
    for threshold in (1, 2, 3):
        nodepool = _nodepool()
        nodepool["spec"]["disruption"].update(
            consolidationPolicy="Balanced", consolidationThreshold=threshold
        )
        assert violations(nodepool) == []


def test_a_nodepool_with_a_do_not_disrupt_grace_period_passes() -> None:
    """daiku's `spec.disruption.doNotDisruptGracePeriod` (issue 15 item 4), a Go-style duration."""
    for grace in ("30m", "4h", "1h30m"):
        nodepool = _nodepool()
        nodepool["spec"]["disruption"].update(doNotDisruptGracePeriod=grace)
        assert violations(nodepool) == []


def test_karpenter_v1_nodepool_only_apiversion_changed() -> None:
    """A Karpenter v1 NodePool (nodeClassRef group karpenter.k8s.aws) passes as daiku.dev/v1."""
    nodepool = _nodepool()
    nodepool["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws"
    assert violations(nodepool) == []


NODECLASS_BREAKAGES = {
    "no role nor profile": lambda s: s.pop("role"),
    "role and profile": lambda s: s.update(instanceProfile="p"),
    "alias of unknown family": lambda s: s.update(amiSelectorTerms=[{"alias": "ubuntu@latest"}]),
    "alias with id": lambda s: s.update(
        amiSelectorTerms=[{"alias": "al2023@latest", "id": "ami-1"}]
    ),
    "no amiFamily without alias": lambda s: s.update(amiSelectorTerms=[{"id": "ami-0abc"}]),
    "empty subnet term": lambda s: s.update(subnetSelectorTerms=[{}]),
    "no subnet terms": lambda s: s.update(subnetSelectorTerms=[]),
    "bad subnet id": lambda s: s.update(subnetSelectorTerms=[{"id": "sg-123"}]),
    "empty tag value": lambda s: s.update(securityGroupSelectorTerms=[{"tags": {"a": ""}}]),
    "reserved tag": lambda s: s["tags"].update({"daiku.dev/cluster": "other"}),
    "hop limit 0": lambda s: s["metadataOptions"].update(httpPutResponseHopLimit=0),
    "IMDS tokens maybe": lambda s: s["metadataOptions"].update(httpTokens="maybe"),
    "two root volumes": lambda s: s["blockDeviceMappings"].append(
        {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "10Gi"}}
    ),
    "volume in MB": lambda s: s["blockDeviceMappings"][0]["ebs"].update(volumeSize="500M"),
    "unknown eviction signal": lambda s: s["kubelet"]["evictionHard"].update(
        {"cpu.available": "1"}
    ),
    "soft eviction without grace": lambda s: s["kubelet"].update(
        evictionSoft={"memory.available": "500Mi"}
    ),
    "grace without soft eviction": lambda s: s["kubelet"].update(
        evictionSoftGracePeriod={"memory.available": "1m"}
    ),
    "negative reservation": lambda s: s["kubelet"]["systemReserved"].update(cpu="-100m"),
}


@pytest.mark.parametrize("breakage", sorted(NODECLASS_BREAKAGES))
def test_ec2nodeclass_rejections(breakage: str) -> None:
    """The default EC2NodeClass, broken in one way, is refused."""
    nodeclass = copy.deepcopy(_nodeclass())
    NODECLASS_BREAKAGES[breakage](nodeclass["spec"])
    assert violations(nodeclass) != []


def test_nodeclaim_rejects_bad_condition_status() -> None:
    """A NodeClaim condition status other than True/False/Unknown is refused."""
    nodeclaim = _example("nodeclaim.yaml")
    nodeclaim["status"]["conditions"][0]["status"] = "Yes"
    assert violations(nodeclaim) != []


@pytest.mark.parametrize("name", sorted(CRD_FILES.values()))
def test_crds_pass_kubernetes_validate(name: str) -> None:
    """Each CRD document is a valid apiextensions.k8s.io/v1 CustomResourceDefinition."""
    result = subprocess.run(
        [KUBERNETES_VALIDATE, "--strict", "--quiet", "-k", "1.32.0", str(CRD_DIR / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _overlay(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "savings-plan"},
        "spec": {
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
            ],
            **spec,
        },
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"priceAdjustment": "-30%"},
        {"priceAdjustment": "+0.01"},
        {"priceAdjustment": "-100%"},
        {"price": "0.05", "weight": 10000},
        {"capacity": {"smarter-devices/fuse": "1", "hugepages-2Mi": "100Mi"}},
    ],
)
def test_nodeoverlay_accepts(spec: dict[str, Any]) -> None:
    """Karpenter's spellings of a price, a price adjustment and extended resources pass."""
    assert violations(_overlay(**spec)) == []


NODEOVERLAY_BREAKAGES: dict[str, tuple[dict[str, Any], str]] = {
    "price and priceAdjustment": (
        {"price": "0.05", "priceAdjustment": "-30%"},
        "!has(self.price) || !has(self.priceAdjustment)",
    ),
    "unsigned adjustment": ({"priceAdjustment": "30%"}, "does not match"),
    "below -100%": ({"priceAdjustment": "-150%"}, "does not match"),
    "negative price": ({"price": "-1"}, "does not match"),
    "cpu capacity": ({"capacity": {"cpu": "2"}}, "x in ['cpu'"),
    "weight 0": ({"weight": 0}, "less than the minimum"),
}


@pytest.mark.parametrize("breakage", sorted(NODEOVERLAY_BREAKAGES))
def test_nodeoverlay_rejections(breakage: str) -> None:
    """A NodeOverlay with both a price and an adjustment, an adjustment without its sign or
    below -100 %, a negative price, a base resource in capacity or weight 0 is refused."""
    spec, expected = NODEOVERLAY_BREAKAGES[breakage]
    found = violations(_overlay(**spec))
    assert any(expected in v.message for v in found), found


def test_nodeoverlay_both_prices_message() -> None:
    """The CRD says in words why an overlay with price and priceAdjustment is refused."""
    (version,) = load_crd("NodeOverlay")["spec"]["versions"]
    rules = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    assert {r["message"] for r in rules} == {"cannot set both 'price' and 'priceAdjustment'"}


def _static(**spec: Any) -> dict[str, Any]:
    nodepool = copy.deepcopy(_nodepool())
    nodepool["spec"].pop("weight", None)
    nodepool["spec"]["limits"] = {"nodes": 4}
    nodepool["spec"].update({"replicas": 3, **spec})
    return nodepool


def test_a_static_nodepool_is_accepted() -> None:
    """replicas with only limits.nodes (or no limits) passes; the scale subresource maps
    spec.replicas and status.nodes, as Karpenter's."""
    assert violations(_static()) == []
    assert violations(_static(limits={})) == []
    (version,) = load_crd("NodePool")["spec"]["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.nodes",
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"limits": {"nodes": 4, "cpu": "100"}}, "only 'limits.nodes' is supported"),
        ({"weight": 10}, "'weight' is not supported on static NodePools"),
        ({"replicas": -1}, "less than the minimum"),
    ],
)
def test_static_nodepool_rejections(spec: dict[str, Any], message: str) -> None:
    """A static NodePool with a cpu limit or a weight is refused with Karpenter's message; a
    negative replicas by the schema."""
    found = violations(_static(**spec))
    rules = {
        r["rule"]: r["message"]
        for r in _openapi_schema("NodePool")["properties"]["spec"]["x-kubernetes-validations"]
    }
    messages = [rules.get(v.message.removeprefix("failed rule: "), v.message) for v in found]
    assert any(message in m for m in messages), found


def _buffer(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "burst"},
        "spec": {"nodePoolRef": {"name": "default"}, "requests": {"cpu": "1"}, **spec},
    }


def test_a_capacity_buffer_is_accepted() -> None:
    assert violations(_buffer(replicas=4)) == []
    assert violations(_buffer(percentage=20, limits={"cpu": "16"})) == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"replicas": -1}, "less than the minimum of 0"),
        ({"percentage": -10}, "less than the minimum of 0"),
        ({"replicas": 2, "percentage": 10}, "has(self.replicas) != has(self.percentage)"),
        ({}, "has(self.replicas) != has(self.percentage)"),
        ({"replicas": 1, "requests": {}}, "should be non-empty"),
    ],
)
def test_capacity_buffer_rejections(spec: dict[str, Any], message: str) -> None:
    """Negative headroom, both or neither of replicas and percentage, and an empty shape are
    refused (the CEL rule's message: "set exactly one of 'replicas' ... or 'percentage'")."""
    found = violations(_buffer(**spec))
    assert any(message in v.message for v in found), found


def _growing_root(**ebs: Any) -> dict[str, Any]:
    nodeclass = copy.deepcopy(_nodeclass())
    nodeclass["spec"]["blockDeviceMappings"][0]["ebs"].update(ebs)
    return nodeclass


def test_a_root_volume_with_max_volume_size_is_accepted() -> None:
    assert violations(_growing_root(maxVolumeSize="500Gi")) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s["blockDeviceMappings"][0]["ebs"].update(maxVolumeSize="500MB"),
            "does not match",
        ),
        (
            lambda s: s["blockDeviceMappings"][0]["ebs"].update(
                maxVolumeSize="500Gi", volumeSize=None, snapshotID="snap-0abc"
            ),
            "maxVolumeSize needs volumeSize, the size the root volume grows from",
        ),
        (
            lambda s: s["blockDeviceMappings"].append(
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "10Gi", "maxVolumeSize": "20Gi"}}
            ),
            "maxVolumeSize is allowed only on the blockDeviceMappings entry with rootVolume true",
        ),
    ],
    ids=["not a size", "without volumeSize", "not the root volume"],
)
def test_max_volume_size_rejections(change: Any, message: str) -> None:
    """maxVolumeSize (daiku's root volume growth) is refused, with a message saying why, when
    it is not a size, has no volumeSize to grow from, or sits on a volume other than the root."""
    nodeclass = copy.deepcopy(_nodeclass())
    change(nodeclass["spec"])
    ebs = nodeclass["spec"]["blockDeviceMappings"][0]["ebs"]
    if ebs.get("volumeSize") is None:
        ebs.pop("volumeSize", None)
    found = violations(nodeclass)
    assert any(message in _rule_message(v.message) for v in found), found


def _rule_message(violation: str) -> str:
    """The CRD's message for a 'failed rule: …' violation (the violation itself otherwise)."""
    rule = violation.removeprefix("failed rule: ")

    def walk(node: Any) -> str | None:
        if isinstance(node, dict):
            for v in node.get("x-kubernetes-validations", []):
                if v["rule"] == rule:
                    return str(v["message"])
            nodes: Any = node.values()
        elif isinstance(node, list):
            nodes = node
        else:
            return None
        return next((m for m in map(walk, nodes) if m is not None), None)

    return walk(_openapi_schema("EC2NodeClass")) or violation
