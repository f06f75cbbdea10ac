"""`daiku plan` end to end through the Typer app: manifests and catalog files in, plan out."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

REPO = Path(__file__).resolve().parents[2]
PRICES = json.loads((REPO / "actuator_svc/data/ec2-on-demand-prices.json").read_text())["regions"][
    "us-east-1"
]
ZONES = ("us-east-1a", "us-east-1b")
# (vCPU, MiB, ENIs, IPv4 per ENI) from EC2 DescribeInstanceTypes.
SHAPES = {
    "c5.large": (2, 4096, 3, 10),
    "m5.large": (2, 8192, 3, 10),
    "r5.large": (2, 16384, 3, 10),
    "m5.xlarge": (4, 16384, 4, 15),
}


def capacity_only_entry(name: str) -> dict[str, Any]:
    """A catalog entry with capacity as the node reports it (VM overhead gone), no allocatable."""
    vcpus, mib, enis, ips = SHAPES[name]
    memory = mib - math.ceil(mib * 0.075)
    return {
        "name": name,
        "capacity": {
            "cpu": str(vcpus),
            "memory": f"{memory}Mi",
            "pods": str(enis * (ips - 1) + 2),
            "ephemeral-storage": "20Gi",
        },
        "labels": {"kubernetes.io/arch": "amd64"},
        "offerings": [
            {"zone": z, "capacityType": "on-demand", "price": PRICES[name], "available": True}
            for z in ZONES
        ],
    }


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"instanceTypes": [capacity_only_entry(n) for n in SHAPES]}))
    return path


def write(tmp_path: Path, name: str, *documents: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents))
    return path


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    template_spec = spec.pop("template_spec", {})
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def deployment(
    name: str, replicas: int, requests: dict[str, str], **pod_spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                    **pod_spec,
                },
            },
        },
    }


def plan_json(*args: str, exit_code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["plan", *args, "-o", "json"])
    assert result.exit_code == exit_code, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


SEED_003_POOL = nodepool(
    template_spec={
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["c5.large", "m5.large", "r5.large", "m5.xlarge"],
            },
        ]
    }
)


def test_facts_2_five_1gi_pods_get_exactly_one_m5_large(tmp_path: Path, catalog: Path) -> None:
    """FACTS §2: 5 pods x 1Gi under the seed's NodePool -> exactly one on-demand m5.large."""
    manifests = write(
        tmp_path, "m.yaml", SEED_003_POOL, deployment("inflate", 5, {"memory": "1Gi"})
    )
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog))
    assert [c["instanceType"] for c in plan["nodeClaims"]] == ["m5.large"]
    assert plan["nodeClaims"][0]["capacityType"] == "on-demand"
    assert len(plan["nodeClaims"][0]["pods"]) == 5
    assert plan["totalHourlyCost"] == PRICES["m5.large"]
    assert plan["unschedulable"] == []


def test_facts_2_with_the_bundled_catalog(tmp_path: Path) -> None:
    """Without --catalog the bundled us-east-1 catalog gives the same answer: one m5.large."""
    manifests = write(
        tmp_path, "m.yaml", SEED_003_POOL, deployment("inflate", 5, {"memory": "1Gi"})
    )
    plan = plan_json("-f", str(manifests))
    assert [c["instanceType"] for c in plan["nodeClaims"]] == ["m5.large"]


@pytest.mark.parametrize(
    ("requests", "fits"),
    [
        ({"cpu": "1930m"}, True),
        ({"cpu": "1931m"}, False),
        ({"memory": "6903Mi"}, True),
        ({"memory": "6904Mi"}, False),
    ],
)
def test_facts_1_m5_large_allocatable_from_capacity(
    tmp_path: Path, catalog: Path, requests: dict[str, str], fits: bool
) -> None:
    """FACTS §1: from capacity alone, m5.large offers exactly 1930m cpu and 6903Mi memory."""
    pool = nodepool(
        template_spec={
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                }
            ]
        }
    )
    manifests = write(tmp_path, "m.yaml", pool, deployment("one", 1, requests))
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog), exit_code=0 if fits else 1)
    assert (len(plan["nodeClaims"]) == 1) is fits
    if not fits:
        assert "no instance type has" in plan["unschedulable"][0]["reason"]


def test_facts_1_m5_large_holds_29_pods(tmp_path: Path, catalog: Path) -> None:
    """FACTS §1: an m5.large holds 29 pods; the 30th needs a second node."""
    pool = nodepool(
        template_spec={
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                }
            ]
        }
    )
    manifests = write(tmp_path, "m.yaml", pool, deployment("tiny", 30, {"cpu": "10m"}))
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog))
    assert sorted(len(c["pods"]) for c in plan["nodeClaims"]) == [1, 29]


def test_list_json_node_with_bound_pods_and_daemonset(tmp_path: Path, catalog: Path) -> None:
    """A JSON `kind: List` with a Node, a pod bound to it, a DaemonSet and pending pods: the node
    takes what fits, new claims carry the DaemonSet's overhead."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-1",
            "labels": {"topology.kubernetes.io/zone": "us-east-1a"},
        },
        "status": {"allocatable": {"cpu": "1930m", "memory": "6903Mi", "pods": "29"}},
    }
    bound = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "running", "namespace": "default"},
        "spec": {
            "nodeName": "ip-10-0-0-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}],
        },
    }
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1600m"}}}]}
            }
        },
    }
    document = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [SEED_003_POOL, node, bound, daemon, deployment("web", 2, {"cpu": "400m"})],
    }
    path = tmp_path / "list.json"
    path.write_text(json.dumps(document))
    plan = plan_json("-f", str(path), "--catalog", str(catalog))
    assert plan["existingNodePlacements"] == [{"node": "ip-10-0-0-1", "pods": ["default/web-0"]}]
    # 400m + 1600m of DaemonSet overhead exceeds a 2-vCPU type's 1930m: a 4-vCPU m5.xlarge.
    assert [c["pods"] for c in plan["nodeClaims"]] == [["default/web-1"]]
    assert plan["nodeClaims"][0]["instanceType"] == "m5.xlarge"


def test_multiple_files_statefulset_and_job(tmp_path: Path, catalog: Path) -> None:
    """Several -f files; a StatefulSet expands to replicas and a Job to parallelism."""
    sts = deployment("db", 2, {"cpu": "100m"})
    sts["kind"] = "StatefulSet"
    job = deployment("batch", 0, {"cpu": "100m"})
    job["kind"] = "Job"
    job["spec"].pop("replicas")
    job["spec"]["parallelism"] = 3
    a = write(tmp_path, "a.yaml", SEED_003_POOL)
    b = write(tmp_path, "b.yaml", sts, job)
    plan = plan_json("-f", str(a), "-f", str(b), "--catalog", str(catalog))
    pods = sorted(p for c in plan["nodeClaims"] for p in c["pods"])
    assert pods == [
        "default/batch-0",
        "default/batch-1",
        "default/batch-2",
        "default/db-0",
        "default/db-1",
    ]


def test_yaml_and_table_outputs(tmp_path: Path, catalog: Path) -> None:
    """-o yaml parses to the JSON document's keys; the table shows the claim and the cost."""
    manifests = write(
        tmp_path, "m.yaml", SEED_003_POOL, deployment("inflate", 5, {"memory": "1Gi"})
    )
    out = CliRunner().invoke(
        app, ["plan", "-f", str(manifests), "--catalog", str(catalog), "-o", "yaml"]
    )
    assert out.exit_code == 0
    document = yaml.safe_load(out.stdout)
    assert set(document) == {
        "nodeClaims",
        "existingNodePlacements",
        "unschedulable",
        "totalHourlyCost",
        "solveSeconds",
    }
    assert set(document["nodeClaims"][0]) == {
        "nodePool",
        "instanceType",
        "zone",
        "capacityType",
        "price",
        "offeringCount",
        "pods",
    }
    table = CliRunner().invoke(app, ["plan", "-f", str(manifests), "--catalog", str(catalog)])
    assert "m5.large" in table.stdout
    assert "Total hourly cost: $0.0960" in table.stdout


def test_unschedulable_reason_names_the_taint(tmp_path: Path, catalog: Path) -> None:
    """A pod tolerating no NodePool taint is listed with the taint as its reason, and the plan
    exits 1 (exit_codes.INCOMPLETE), or 0 with --allow-unschedulable (issue 17 item 6)."""
    pool = nodepool(
        template_spec={"taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]}
    )
    manifests = write(tmp_path, "m.yaml", pool, deployment("web", 1, {"cpu": "100m"}))
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog), exit_code=1)
    assert plan["unschedulable"] == [
        {"pod": "default/web-0", "reason": "tolerates no NodePool's taint team=ml:NoSchedule"}
    ]
    allowed = plan_json(
        "-f", str(manifests), "--catalog", str(catalog), "--allow-unschedulable", exit_code=0
    )
    assert allowed["unschedulable"] == plan["unschedulable"]
    explained = CliRunner().invoke(
        app, ["plan", "-f", str(manifests), "--catalog", str(catalog), "--explain", "web-0"]
    )
    assert explained.exit_code == 1
    assert "Pod default/web-0: unschedulable" in explained.stdout


def test_explain_counts_ruled_out_types(tmp_path: Path, catalog: Path) -> None:
    """--explain shows the pod's outcome and how many instance types each constraint removed."""
    manifests = write(tmp_path, "m.yaml", SEED_003_POOL, deployment("big", 1, {"memory": "10Gi"}))
    out = CliRunner().invoke(
        app, ["plan", "-f", str(manifests), "--catalog", str(catalog), "--explain", "big-0"]
    )
    assert out.exit_code == 0
    assert "Pod default/big-0: placed on new NodeClaim 1 (r5.large" in out.stdout
    assert "2 of 4 instance types remain" in out.stdout
    assert "2 by resources" in out.stdout


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "Gizmo", "metadata": {"name": "x"}},
            "Gizmo default/x: field kind: unknown kind 'Gizmo'",
        ),
        (
            deployment("web", 1, {"cpu": "lots"}),
            "Deployment default/web: field spec.template.spec.containers[0].resources.requests.cpu:"
            " 'lots' is not a quantity",
        ),
        (
            {**nodepool(), "apiVersion": "karpenter.sh/v1beta1"},
            "NodePool default: field apiVersion",
        ),
        (
            nodepool(
                "other",
                template_spec={"requirements": [{"key": "k", "operator": "Near", "values": ["a"]}]},
            ),
            "field spec.template.spec.requirements[0].operator: unknown operator 'Near'",
        ),
    ],
)
def test_bad_input_exits_2_naming_object_and_field(
    tmp_path: Path, catalog: Path, document: dict[str, Any], message: str
) -> None:
    """Bad input prints one error naming the object and field, exits 2, and prints no plan."""
    manifests = write(tmp_path, "bad.yaml", SEED_003_POOL, document)
    out = CliRunner().invoke(
        app, ["plan", "-f", str(manifests), "--catalog", str(catalog), "-o", "json"]
    )
    assert out.exit_code == 2
    assert message in out.stderr
    assert out.stdout == ""


def test_malformed_yaml_exits_2(tmp_path: Path, catalog: Path) -> None:
    """Malformed YAML is reported with the file name and exit code 2, the parser's message
    keeping its lines (where it failed, with the line and column) as `convert` prints it."""
    path = tmp_path / "broken.yaml"
    path.write_text("kind: Pod\nmetadata: {name: [unclosed\n")
    out = CliRunner().invoke(app, ["plan", "-f", str(path), "--catalog", str(catalog)])
    assert out.exit_code == 2
    assert "broken.yaml: malformed YAML/JSON" in out.stderr
    assert '\n  in "<unicode string>", line 3, column 1' in out.stderr
    assert out.stdout == ""


def test_volume_zone_from_bound_pv(tmp_path: Path, catalog: Path) -> None:
    """A StatefulSet replica whose PVC is bound to a zonal PV gets a claim in that zone only."""
    sts = deployment("db", 1, {"cpu": "100m"})
    sts["kind"] = "StatefulSet"
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-db-0", "namespace": "default"},
        "spec": {"volumeName": "pv-1"},
    }
    zone_term = {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1b"]}
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "spec": {
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone_term]}]}}
        },
    }
    manifests = write(tmp_path, "m.yaml", SEED_003_POOL, sts, pvc, pv)
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog))
    assert plan["nodeClaims"][0]["zone"] == "us-east-1b"
    assert plan["nodeClaims"][0]["offeringCount"] == 4  # the four types, in us-east-1b only


def test_restricted_nodepool_label_is_rejected(tmp_path: Path, catalog: Path) -> None:
    """A NodePool requirement on kubernetes.io/hostname is refused with exit code 2."""
    pool = nodepool(
        template_spec={
            "requirements": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]
        }
    )
    out = CliRunner().invoke(
        app, ["plan", "-f", str(write(tmp_path, "m.yaml", pool)), "--catalog", str(catalog)]
    )
    assert out.exit_code == 2
    assert (
        "spec.template.spec.requirements[0].key: kubernetes.io/hostname is restricted" in out.stderr
    )


def test_reads_manifests_from_stdin(catalog: Path) -> None:
    """-f - reads the manifests from standard input."""
    text = yaml.safe_dump_all([SEED_003_POOL, deployment("inflate", 5, {"memory": "1Gi"})])
    out = CliRunner().invoke(
        app, ["plan", "-f", "-", "--catalog", str(catalog), "-o", "json"], input=text
    )
    assert out.exit_code == 0, out.output
    assert [c["instanceType"] for c in json.loads(out.stdout)["nodeClaims"]] == ["m5.large"]


def starting_node(labels: dict[str, str]) -> dict[str, Any]:
    """A node of NodePool `default` carrying its startup taint and kubelet's not-ready taint."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-9",
            "labels": {
                "karpenter.sh/nodepool": "default",
                "topology.kubernetes.io/zone": "us-east-1a",
                **labels,
            },
        },
        "spec": {
            "taints": [
                {"key": "example.com/agent-not-ready", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            ]
        },
        "status": {"allocatable": {"cpu": "1930m", "memory": "6903Mi", "pods": "29"}},
    }


def pool_with_startup_taint() -> dict[str, Any]:
    pool = copy.deepcopy(SEED_003_POOL)
    pool["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    ]
    return pool


def test_startup_taints_of_a_starting_node_do_not_block_it(tmp_path: Path, catalog: Path) -> None:
    """A node of a NodePool not yet initialised (no `karpenter.sh/initialized=true`) takes pods
    despite its NodePool's startup taints and not-ready taint, as Karpenter's
    `StateNode.Taints()` ignores them until initialisation (issue 19 item 9); an initialised
    node's taints count."""
    manifests = write(
        tmp_path,
        "m.yaml",
        pool_with_startup_taint(),
        starting_node({}),
        deployment("web", 1, {"cpu": "500m"}),
    )
    plan = plan_json("-f", str(manifests), "--catalog", str(catalog))
    assert plan["existingNodePlacements"] == [{"node": "ip-10-0-0-9", "pods": ["default/web-0"]}]
    assert plan["nodeClaims"] == []

    initialised = write(
        tmp_path,
        "i.yaml",
        pool_with_startup_taint(),
        starting_node({"karpenter.sh/initialized": "true"}),
        deployment("web", 1, {"cpu": "500m"}),
    )
    plan = plan_json("-f", str(initialised), "--catalog", str(catalog))
    assert plan["existingNodePlacements"] == []
    assert [c["pods"] for c in plan["nodeClaims"]] == [["default/web-0"]]


def test_runtime_class_overhead_is_added_to_pods_naming_it(tmp_path: Path, catalog: Path) -> None:
    """A pod naming a RuntimeClass gets its overhead.podFixed, as the RuntimeClass admission
    plugin sets spec.overhead (kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead;
    issue 19 item 10): 1500m + 500m no longer fits a 2-vCPU type's 1930m."""
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kata"},
        "handler": "kata",
        "overhead": {"podFixed": {"cpu": "500m", "memory": "120Mi"}},
    }
    plain = write(tmp_path, "p.yaml", SEED_003_POOL, deployment("vm", 1, {"cpu": "1500m"}))
    assert plan_json("-f", str(plain), "--catalog", str(catalog))["nodeClaims"][0][
        "instanceType"
    ] in ("c5.large", "m5.large", "r5.large")
    kata = write(
        tmp_path,
        "k.yaml",
        SEED_003_POOL,
        runtime_class,
        deployment("vm", 1, {"cpu": "1500m"}, runtimeClassName="kata"),
    )
    plan = plan_json("-f", str(kata), "--catalog", str(catalog))
    assert [c["instanceType"] for c in plan["nodeClaims"]] == ["m5.xlarge"]


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        (
            {"operator": "In", "values": ["a"]},
            "field spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored"
            "DuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: required",
        ),
        (
            {"key": "k", "operator": "In", "values": ["a"], "minValues": 0},
            "field spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored"
            "DuringExecution.nodeSelectorTerms[0].matchExpressions[0].minValues: must be at least"
            " 1, got 0",
        ),
    ],
)
def test_plan_refuses_what_the_live_scheduler_refuses(
    tmp_path: Path, catalog: Path, requirement: dict[str, Any], message: str
) -> None:
    """A node-selector term without a key, or minValues 0, is refused by plan as by the live
    converter (issue 12: the two copies disagreed), naming the object and field."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
            }
        }
    }
    manifests = write(
        tmp_path, "m.yaml", SEED_003_POOL, deployment("web", 1, {"cpu": "1"}, affinity=affinity)
    )
    out = CliRunner().invoke(app, ["plan", "-f", str(manifests), "--catalog", str(catalog)])
    assert out.exit_code == 2
    assert "Deployment default/web: " + message in out.stderr


@pytest.mark.parametrize("amount", ["-1", "-500m"])
def test_negative_request_is_a_field_error(tmp_path: Path, catalog: Path, amount: str) -> None:
    """A negative request is refused naming the object and field (issue 17 item 6)."""
    manifests = write(tmp_path, "m.yaml", SEED_003_POOL, deployment("web", 1, {"cpu": amount}))
    out = CliRunner().invoke(app, ["plan", "-f", str(manifests), "--catalog", str(catalog)])
    assert out.exit_code == 2
    assert (
        "Deployment default/web: field spec.template.spec.containers[0].resources.requests.cpu: "
        f"'{amount}' is negative" in out.stderr
    )
