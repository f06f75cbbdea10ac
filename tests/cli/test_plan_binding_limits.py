"""`daiku plan` under a NodePool limit that binds (issue 11): the pods the limit can hold are
placed on fewer, larger nodes instead of waiting behind one-pod nodes."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_plan import deployment, nodepool, plan_json, write

SPOT = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}


def test_sixteen_pods_fit_two_nodes_under_a_two_node_limit(tmp_path: Path) -> None:
    """Spot [c6g.2xlarge, c6gd.medium] with `limits.nodes: 2`, 16 pods of 500m/512Mi: one
    c6g.2xlarge (15) and one c6gd.medium (1), where the greedy pass alone left 14 pending."""
    pool = nodepool(
        template_spec={
            "requirements": [
                SPOT,
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["c6g.2xlarge", "c6gd.medium"],
                },
            ]
        },
        limits={"nodes": 2},
    )
    manifests = write(
        tmp_path, "m.yaml", pool, deployment("inflate", 16, {"cpu": "500m", "memory": "512Mi"})
    )
    plan = plan_json("-f", str(manifests))
    assert sorted((c["instanceType"], len(c["pods"])) for c in plan["nodeClaims"]) == [
        ("c6g.2xlarge", 15),
        ("c6gd.medium", 1),
    ]
    assert not plan.get("unschedulable")
    assert plan["totalHourlyCost"] < 0.11
