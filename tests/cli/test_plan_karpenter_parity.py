"""`daiku plan` on workloads written for Karpenter: they land where Karpenter puts them (issue 19).

The bundled us-east-1 catalog is used throughout (the user's path); each test cites the
Karpenter or Kubernetes test or document it follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .test_plan import deployment, nodepool, plan_json, write

ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"


def _instance_types(plan: dict[str, Any]) -> list[str]:
    return [c["instanceType"] for c in plan["nodeClaims"]]


def test_selector_on_an_accelerator_label_gets_an_inferentia_node(tmp_path: Path) -> None:
    """A pod selecting instance-accelerator-name=inferentia gets an inf1 node, not a t3.nano
    (aws/karpenter-provider-aws suite_test.go "should support instance type labels with
    accelerator": the label is on Inferentia types only)."""
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("infer", 1, {"cpu": "100m"}, nodeSelector={ACCELERATOR_NAME: "inferentia"}),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["unschedulable"] == []
    assert [t.split(".")[0] for t in _instance_types(plan)] == ["inf1"]


def test_neuron_request_gets_a_neuron_node(tmp_path: Path) -> None:
    """A pod requesting aws.amazon.com/neuron lands on an Inferentia/Trainium type, which
    advertises the resource (Karpenter's computeCapacity: awsNeuronDevices)."""
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("infer", 1, {"cpu": "100m", "aws.amazon.com/neuron": "1"}),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["unschedulable"] == []
    assert [t.split(".")[0] for t in _instance_types(plan)] in (["inf1"], ["inf2"], ["trn1"])
