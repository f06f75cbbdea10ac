"""`daiku plan` on workloads written for Karpenter: they land where Karpenter puts them (issue 19).

The bundled us-east-1 catalog is used throughout (the user's path); each test cites the
Karpenter or Kubernetes test or document it follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from daiku_cli.exit_codes import INCOMPLETE
from daiku_cli.main import app

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


# aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go, "should support instance
# type labels with accelerator": one pod selecting inf2.xlarge by every label Karpenter sets,
# deprecated aliases and the zone id (us-east-1a is use1-az6 in the emulator) included.
KARPENTER_INF2_NODE_SELECTOR = {
    "karpenter.sh/nodepool": "default",
    "topology.kubernetes.io/region": "us-east-1",
    "topology.kubernetes.io/zone": "us-east-1a",
    "topology.k8s.aws/zone-id": "use1-az6",
    "node.kubernetes.io/instance-type": "inf2.xlarge",
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "karpenter.sh/capacity-type": "on-demand",
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
    "failure-domain.beta.kubernetes.io/region": "us-east-1",
    "failure-domain.beta.kubernetes.io/zone": "us-east-1a",
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/instance-type": "inf2.xlarge",
    "topology.ebs.csi.aws.com/zone": "us-east-1a",
}


def test_karpenter_inf2_node_selector_with_deprecated_labels(tmp_path: Path) -> None:
    """The AWS provider suite's inf2.xlarge selector (current and deprecated labels) gets one
    on-demand inf2.xlarge in us-east-1a: every label is carried, every alias normalised."""
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("infer", 1, {"cpu": "100m"}, nodeSelector=KARPENTER_INF2_NODE_SELECTOR),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["unschedulable"] == []
    (claim,) = plan["nodeClaims"]
    assert (claim["instanceType"], claim["zone"], claim["capacityType"]) == (
        "inf2.xlarge",
        "us-east-1a",
        "on-demand",
    )


def test_deprecated_zone_selector_pins_the_zone(tmp_path: Path) -> None:
    """nodeSelector failure-domain.beta.kubernetes.io/zone=us-east-1b launches in us-east-1b
    (Karpenter's NormalizedLabels; before, the pod stayed Pending)."""
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment(
            "web",
            2,
            {"cpu": "500m"},
            nodeSelector={"failure-domain.beta.kubernetes.io/zone": "us-east-1b"},
        ),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["unschedulable"] == []
    assert {c["zone"] for c in plan["nodeClaims"]} == {"us-east-1b"}


def test_anti_affinity_with_empty_namespace_selector_avoids_other_namespaces(
    tmp_path: Path,
) -> None:
    """Required anti-affinity with namespaceSelector {} keeps a web pod off the node running
    the db pod in namespace "data" (Kubernetes: an empty namespaceSelector matches all
    namespaces); before, daiku placed it there and kube-scheduler refused the binding."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-1",
            "labels": {
                "kubernetes.io/hostname": "ip-10-0-0-1",
                "topology.kubernetes.io/zone": "us-east-1a",
            },
        },
        "status": {"allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"}},
    }
    db = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "db", "namespace": "data", "labels": {"app": "db"}},
        "spec": {
            "nodeName": "ip-10-0-0-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
        },
    }
    avoid_db = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {},
                }
            ]
        }
    }
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        node,
        db,
        deployment("web", 1, {"cpu": "500m"}, affinity=avoid_db),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["existingNodePlacements"] == []
    assert [c["pods"] for c in plan["nodeClaims"]] == [["default/web-0"]]


def test_gpu_neuron_and_plain_pods_plan_without_crashing(tmp_path: Path) -> None:
    """A GPU pod, a Neuron pod and a plain pod in one batch: exit 0 with the two device pods on
    different nodes (Karpenter "should launch pods with resources that aren't on any single
    instance type on different instances"); before, `daiku plan` exited 1 with `ValueError:
    negative shift count`."""
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("train", 1, {"cpu": "500m", "nvidia.com/gpu": "1"}),
        deployment("infer", 1, {"cpu": "500m", "aws.amazon.com/neuron": "1"}),
        deployment("web", 1, {"cpu": "500m"}),
    )

    plan = plan_json("-f", str(manifests))

    assert plan["unschedulable"] == []
    claims = {pod: c["instanceType"] for c in plan["nodeClaims"] for pod in c["pods"]}
    assert claims["default/train-0"] != claims["default/infer-0"]
    assert claims["default/infer-0"].split(".")[0] in ("inf1", "inf2", "trn1")


NODE_EXPORTER = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "node-exporter", "namespace": "monitoring"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "exporter",
                        "resources": {"requests": {"cpu": "100m"}},
                        "ports": [{"containerPort": 9100, "hostPort": 9100}],
                    }
                ]
            }
        }
    },
}


def _binds_9100() -> dict[str, Any]:
    return deployment(
        "metrics",
        1,
        {"cpu": "100m"},
        containers=[
            {
                "name": "c",
                "resources": {"requests": {"cpu": "100m"}},
                "ports": [{"containerPort": 9100, "hostPort": 9100}],
            }
        ],
    )


def test_daemonset_host_port_refuses_new_nodes_and_explain_names_it(tmp_path: Path) -> None:
    """A pod binding the hostPort node-exporter's DaemonSet binds gets no new node (Karpenter
    "should account for daemonset hostports"), and `--explain` names the rule: hostPort 9100
    taken by DaemonSet node-exporter."""
    manifests = write(tmp_path, "m.yaml", nodepool(), NODE_EXPORTER, _binds_9100())

    plan = plan_json("-f", str(manifests), exit_code=INCOMPLETE)
    explained = CliRunner().invoke(
        app, ["plan", "-f", str(manifests), "--explain", "default/metrics-0"]
    )

    assert plan["nodeClaims"] == []
    assert [u["pod"] for u in plan["unschedulable"]] == ["default/metrics-0"]
    assert explained.exit_code == INCOMPLETE, explained.output
    assert "hostPort 9100/TCP taken by DaemonSet node-exporter" in explained.stdout


def test_spread_counts_a_tainted_pools_zone_by_default(tmp_path: Path) -> None:
    """A zone spread (nodeTaintsPolicy left out: Ignore) over NodePool "open" in us-east-1a
    and a tainted NodePool in us-east-1b: us-east-1b counts with 0 pods, so of three replicas
    one lands in us-east-1a and two stay Pending, as Karpenter holds them (topology_test.go
    "should balance pods across a label when discovered from the nodepool
    (NodeTaintsPolicy=ignore)")."""
    zone = "topology.kubernetes.io/zone"
    open_pool = nodepool(
        "open",
        template_spec={"requirements": [{"key": zone, "operator": "In", "values": ["us-east-1a"]}]},
    )
    tainted_pool = nodepool(
        "tainted",
        template_spec={
            "requirements": [{"key": zone, "operator": "In", "values": ["us-east-1b"]}],
            "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
        },
    )
    spread = [
        {
            "topologyKey": zone,
            "maxSkew": 1,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    manifests = write(
        tmp_path,
        "m.yaml",
        open_pool,
        tainted_pool,
        deployment("web", 3, {"cpu": "500m"}, topologySpreadConstraints=spread),
    )

    plan = plan_json("-f", str(manifests), exit_code=INCOMPLETE)

    assert sum(len(c["pods"]) for c in plan["nodeClaims"]) == 1
    assert len(plan["unschedulable"]) == 2
