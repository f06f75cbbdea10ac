"""`daiku plan` on the bundled catalog buys the cheapest nodes in issue 11's measured cases."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_plan import deployment, nodepool, plan_json, write

SPOT = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}


def test_sixteen_pods_get_one_c6g_2xlarge_and_one_c6gd_medium(tmp_path: Path) -> None:
    """Spot [c6g.2xlarge, c6gd.medium], 16 pods of 500m/512Mi: 15 on a c6g.2xlarge and one on a
    c6gd.medium ($0.1040/h), not 16 c6gd.medium ($0.1868/h)."""
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
        }
    )
    manifests = write(
        tmp_path, "m.yaml", pool, deployment("inflate", 16, {"cpu": "500m", "memory": "512Mi"})
    )
    plan = plan_json("-f", str(manifests))
    assert sorted((c["instanceType"], len(c["pods"])) for c in plan["nodeClaims"]) == [
        ("c6g.2xlarge", 15),
        ("c6gd.medium", 1),
    ]
    assert plan["totalHourlyCost"] < 0.11


def test_five_8gi_pods_on_arm64_spot_share_one_node(tmp_path: Path) -> None:
    """arm64 spot, 5 pods of 1 cpu / 8Gi: one r-family node holds all five (about $0.128/h),
    not five r7g.large ($0.1711/h)."""
    pool = nodepool(
        template_spec={
            "requirements": [
                SPOT,
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            ]
        }
    )
    manifests = write(tmp_path, "m.yaml", pool, deployment("big", 5, {"cpu": "1", "memory": "8Gi"}))
    plan = plan_json("-f", str(manifests))
    assert len(plan["nodeClaims"]) == 1
    assert plan["nodeClaims"][0]["instanceType"].startswith("r")
    assert plan["totalHourlyCost"] < 0.1711
