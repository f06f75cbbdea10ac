"""`daiku catalog` and bundled_catalog_document: the offline catalog document."""

import json

from typer.testing import CliRunner

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.main import app


def test_bundled_document_has_m5_large_as_facts_say() -> None:
    """m5.large: capacity 2/7577Mi/29/20Gi, allocatable 1930m/6903Mi/29/17Gi, priced offerings."""
    document = bundled_catalog_document("us-east-1")
    types = {t["name"]: t for t in document["instanceTypes"]}
    m5 = types["m5.large"]
    assert m5["capacity"] == {
        "cpu": "2",
        "memory": "7577Mi",
        "pods": "29",
        "ephemeral-storage": "20Gi",
    }
    assert m5["allocatable"] == {
        "cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi",
    }  # fmt: skip
    on_demand = {o["price"] for o in m5["offerings"] if o["capacityType"] == "on-demand"}
    spot = [o["price"] for o in m5["offerings"] if o["capacityType"] == "spot"]
    assert on_demand == {0.096}
    assert spot
    assert all(0 < p < 0.096 for p in spot)
    assert "m4.large" not in types  # previous generation


def test_cli_prints_json_and_table() -> None:
    """`daiku catalog -o json` prints the document; `-o table` one line per type."""
    runner = CliRunner()
    result = runner.invoke(app, ["catalog", "-o", "json"])
    assert result.exit_code == 0, result.output
    names = [t["name"] for t in json.loads(result.output)["instanceTypes"]]
    assert "c5.large" in names
    table = runner.invoke(app, ["catalog", "-o", "table"])
    assert table.exit_code == 0
    assert any(line.startswith("m5.large ") for line in table.output.splitlines())


def test_unknown_region_fails_with_a_message() -> None:
    """A region without bundled data exits 2 (bad input) and names the region."""
    result = CliRunner().invoke(app, ["catalog", "--region", "mars-1"])
    assert result.exit_code == 2  # exit_codes.BAD_INPUT
    assert "mars-1" in result.output


# Karpenter's AWS provider suite, pkg/providers/instancetype/suite_test.go, "should support
# instance type labels with accelerator" (inf2.xlarge) and "should support combined instance
# type labels" (g4dn.8xlarge): the instance labels a node of each type carries.
KARPENTER_INF2_XLARGE_LABELS = {
    "karpenter.k8s.aws/instance-tenancy": "default",
    "karpenter.k8s.aws/instance-hypervisor": "nitro",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
    "karpenter.k8s.aws/instance-category": "inf",
    "karpenter.k8s.aws/instance-capability-flex": "false",
    "karpenter.k8s.aws/instance-generation": "2",
    "karpenter.k8s.aws/instance-family": "inf2",
    "karpenter.k8s.aws/instance-size": "xlarge",
    "karpenter.k8s.aws/instance-cpu": "4",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3600",
    "karpenter.k8s.aws/instance-cpu-manufacturer": "amd",
    "karpenter.k8s.aws/instance-memory": "16384",
    "karpenter.k8s.aws/instance-ebs-bandwidth": "10000",
    "karpenter.k8s.aws/instance-network-bandwidth": "2083",
    "karpenter.k8s.aws/instance-accelerator-name": "inferentia2",
    "karpenter.k8s.aws/instance-accelerator-manufacturer": "aws",
    "karpenter.k8s.aws/instance-accelerator-count": "1",
}
KARPENTER_G4DN_8XLARGE_LABELS = {
    "karpenter.k8s.aws/instance-tenancy": "default",
    "karpenter.k8s.aws/instance-hypervisor": "nitro",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
    "karpenter.k8s.aws/instance-category": "g",
    "karpenter.k8s.aws/instance-capability-flex": "false",
    "karpenter.k8s.aws/instance-generation": "4",
    "karpenter.k8s.aws/instance-family": "g4dn",
    "karpenter.k8s.aws/instance-size": "8xlarge",
    "karpenter.k8s.aws/instance-cpu": "32",
    "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "2500",
    "karpenter.k8s.aws/instance-memory": "131072",
    "karpenter.k8s.aws/instance-ebs-bandwidth": "9500",
    "karpenter.k8s.aws/instance-network-bandwidth": "50000",
    "karpenter.k8s.aws/instance-gpu-name": "t4",
    "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
    "karpenter.k8s.aws/instance-gpu-count": "1",
    "karpenter.k8s.aws/instance-gpu-memory": "16384",
    "karpenter.k8s.aws/instance-local-nvme": "900",
}


def test_bundled_types_carry_every_instance_label_karpenter_sets() -> None:
    """inf2.xlarge and g4dn.8xlarge carry the instance labels Karpenter's AWS provider suite
    expects on them ("should support instance type labels with accelerator", "should support
    combined instance type labels"), and nothing claims a GPU or accelerator it lacks."""
    types = {t["name"]: t for t in bundled_catalog_document("us-east-1")["instanceTypes"]}
    inf2, g4dn = types["inf2.xlarge"]["labels"], types["g4dn.8xlarge"]["labels"]

    assert {k: inf2.get(k) for k in KARPENTER_INF2_XLARGE_LABELS} == KARPENTER_INF2_XLARGE_LABELS
    assert {k: g4dn.get(k) for k in KARPENTER_G4DN_8XLARGE_LABELS} == KARPENTER_G4DN_8XLARGE_LABELS
    assert not any(k.startswith("karpenter.k8s.aws/instance-gpu") for k in inf2)
    assert not any(k.startswith("karpenter.k8s.aws/instance-accelerator") for k in g4dn)
    assert all(" " not in value for t in types.values() for value in t["labels"].values())


def test_bundled_neuron_and_gpu_types_advertise_their_devices() -> None:
    """inf1/inf2/trn1 nodes advertise aws.amazon.com/neuron and neuroncore, GPU nodes their
    GPUs, EFA types vpc.amazonaws.com/efa (Karpenter's computeCapacity, aws/karpenter-provider-aws
    pkg/providers/instancetype/types.go)."""
    types = {t["name"]: t for t in bundled_catalog_document("us-east-1")["instanceTypes"]}

    assert types["inf1.xlarge"]["capacity"]["aws.amazon.com/neuron"] == "1"
    assert types["inf1.xlarge"]["capacity"]["aws.amazon.com/neuroncore"] == "4"
    assert types["inf2.xlarge"]["allocatable"]["aws.amazon.com/neuron"] == "1"
    assert types["inf2.xlarge"]["allocatable"]["aws.amazon.com/neuroncore"] == "2"
    assert types["g4dn.8xlarge"]["capacity"]["nvidia.com/gpu"] == "1"
    assert types["g4dn.8xlarge"]["capacity"]["vpc.amazonaws.com/efa"] == "1"
    assert "aws.amazon.com/neuron" not in types["m5.large"]["capacity"]
