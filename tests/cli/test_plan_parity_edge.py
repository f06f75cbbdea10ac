"""`daiku plan` on what issue 19 left for the edge: ``--explain`` naming the preferences a placed
pod lost, Namespace objects whose labels a ``namespaceSelector`` selects, and the
``topology.k8s.aws/zone-id`` label. Bundled us-east-1 catalog; each test cites the upstream
test or document it follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from daiku_cli.main import app

from .test_plan import deployment, nodepool, plan_json, write

ZONE = "topology.kubernetes.io/zone"


def test_explain_names_the_preferences_a_placed_pod_lost(tmp_path: Path) -> None:
    """A pod preferring zone mars-1 (weight 100, no offering there) and us-east-1c (weight 50)
    lands in us-east-1c, and ``--explain`` says the mars-1 term was relaxed (Karpenter logs
    "relaxing soft constraints for pod since it previously failed to schedule, removing: ...",
    kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/preferences.go Relax); a
    pod that kept its preferences says none."""
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["mars-1"]}]
                    },
                },
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": ["us-east-1c"]}
                        ]
                    },
                },
            ]
        }
    }
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("picky", 1, {"cpu": "500m"}, affinity=prefer),
        deployment("plain", 1, {"cpu": "500m"}),
    )

    def explain(pod: str) -> str:
        result = CliRunner().invoke(app, ["plan", "-f", str(manifests), "--explain", pod])
        assert result.exit_code == 0, result.output
        return result.stdout

    picky, plain = explain("picky-0"), explain("plain-0")

    assert "Pod default/picky-0: placed on new NodeClaim" in picky
    assert (
        f"Preferences relaxed: preferred node affinity (weight 100): {ZONE} In [mars-1]\n" in picky
    )
    assert "Preferences relaxed: none\n" in plain


def _node_running_db_in(namespace: str) -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-1",
            "labels": {"kubernetes.io/hostname": "ip-10-0-0-1", ZONE: "us-east-1a"},
        },
        "status": {"allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"}},
    }
    db = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "db", "namespace": namespace, "labels": {"app": "db"}},
        "spec": {
            "nodeName": "ip-10-0-0-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
        },
    }
    return [node, db]


def test_namespace_objects_give_a_namespace_selector_its_labels(tmp_path: Path) -> None:
    """Required anti-affinity to app=db pods in namespaces labelled team=data: with Namespace
    "warehouse" (team=data) in the manifests, the web pod keeps off the node running db there
    and gets a new node; labelled team=web, the namespace is not selected and web joins the
    node (Kubernetes: namespaceSelector is "a label query over the set of namespaces",
    concepts/scheduling-eviction/assign-pod-node; Karpenter topology.go buildNamespaceList)."""
    avoid_data_dbs = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {"matchLabels": {"team": "data"}},
                }
            ]
        }
    }

    def plan_with(team: str) -> dict[str, Any]:
        warehouse = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "warehouse", "labels": {"team": team}},
        }
        manifests = write(
            tmp_path,
            f"{team}.yaml",
            nodepool(),
            warehouse,
            *_node_running_db_in("warehouse"),
            deployment("web", 1, {"cpu": "500m"}, affinity=avoid_data_dbs),
        )
        return plan_json("-f", str(manifests))

    data, web = plan_with("data"), plan_with("web")

    assert data["existingNodePlacements"] == []
    assert [c["pods"] for c in data["nodeClaims"]] == [["default/web-0"]]
    assert web["existingNodePlacements"] == [{"node": "ip-10-0-0-1", "pods": ["default/web-0"]}]
    assert web["nodeClaims"] == []


def test_a_zone_id_selector_pins_the_zone_with_that_id(tmp_path: Path) -> None:
    """nodeSelector topology.k8s.aws/zone-id=use1-az2 plans the node in us-east-1c, the zone
    with that id in the bundled catalog (the emulator's ids: us-east-1a is use1-az6); an id no
    zone has leaves the pod Pending (aws/karpenter-provider-aws test/suites/scheduling "should
    support well-known labels for zone id selection")."""
    zone_id = "topology.k8s.aws/zone-id"
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("web", 2, {"cpu": "500m"}, nodeSelector={zone_id: "use1-az2"}),
        deployment("lost", 1, {"cpu": "500m"}, nodeSelector={zone_id: "mars-az1"}),
    )

    plan = plan_json("-f", str(manifests), exit_code=1)

    assert {c["zone"] for c in plan["nodeClaims"]} == {"us-east-1c"}
    assert [u["pod"] for u in plan["unschedulable"]] == ["default/lost-0"]
