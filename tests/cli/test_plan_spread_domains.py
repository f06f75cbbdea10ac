"""`daiku plan` on the bundled catalog: an amd64, on-demand, generation > 4 NodePool reaches
us-east-1e only through p5 GPU types. That zone counts for a zone spread (its offerings come
from the pool), so, as Karpenter does, a claim pinned to it takes a type offered there; before,
12 spread pods left 7 waiting ("topology spread … cannot be met")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.cli.test_plan import deployment, nodepool, plan_json, write

POOL = nodepool(
    template_spec={
        "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
        ]
    }
)
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


def test_every_zone_the_pool_offers_takes_its_share(tmp_path: Path) -> None:
    web = deployment("web", 12, {"cpu": "1", "memory": "2Gi"}, topologySpreadConstraints=[SPREAD])
    plan = plan_json("-f", str(write(tmp_path, "m.yaml", POOL, web)))
    assert plan["unschedulable"] == []
    per_zone = Counter(c["zone"] for c in plan["nodeClaims"] for _ in c["pods"])
    assert sum(per_zone.values()) == 12
    assert set(per_zone) == {f"us-east-1{z}" for z in "abcdef"}
    assert max(per_zone.values()) - min(per_zone.values()) <= 1


def test_the_dear_zone_holds_its_share_on_as_few_nodes_as_it_can(tmp_path: Path) -> None:
    """55 spread pods (1 cpu) beside 4 of 1.5 cpu/8Gi and 11 of 250m/4Gi: us-east-1e's nine
    or ten spread pods fit one p5.4xlarge (16 cpu), and the plan buys one there, not two
    ($17.15/h when the program saw only the LP's 24 favourite options, which kept the
    p5.48xlarge and dropped the p5.4xlarge)."""
    web = deployment("web", 55, {"cpu": "1", "memory": "2Gi"}, topologySpreadConstraints=[SPREAD])
    big = deployment("big", 4, {"cpu": "1500m", "memory": "8Gi"})
    small = deployment("small", 11, {"cpu": "250m", "memory": "4Gi"})
    plan = plan_json("-f", str(write(tmp_path, "m.yaml", POOL, web, big, small)))
    assert plan["unschedulable"] == []
    assert [c["zone"] for c in plan["nodeClaims"]].count("us-east-1e") == 1
    assert plan["totalHourlyCost"] < 10.0
