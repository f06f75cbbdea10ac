"""`daiku plan` with a Deployment spread over zones beside pods that only need room: the
spread pods share nodes with the others (``core/zone_repacking``) instead of one claim per zone
sized for what reached it first, and the spread still holds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.cli.test_plan import deployment, nodepool, plan_json, write

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GENERAL = nodepool(
    template_spec={
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In",
             "values": ["c", "m", "r"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In",
             "values": ["spot", "on-demand"]},
        ]
    }
)  # fmt: skip


def _selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _workload() -> list[dict[str, Any]]:
    """30 web pods spread over zones, 10 api, 6 workers, 3 caches one per host."""
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": _selector("web")}  # fmt: skip
    anti = {"topologyKey": HOSTNAME, "labelSelector": _selector("cache")}
    one_per_host = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}}
    return [
        GENERAL,
        deployment("web", 30, {"cpu": "250m", "memory": "512Mi"},
                   topologySpreadConstraints=[spread]),
        deployment("api", 10, {"cpu": "1", "memory": "2Gi"}),
        deployment("worker", 6, {"cpu": "2", "memory": "4Gi"}),
        deployment("cache", 3, {"cpu": "1", "memory": "12Gi"},
                   affinity=one_per_host),
    ]  # fmt: skip


def test_zone_spread_web_tier_shares_nodes_and_stays_spread(tmp_path: Path) -> None:
    """Measured on the bundled catalog: $0.7406/h on 14 nodes before, $0.5904/h on 10 after
    (the greedy pass alone opened a claim per zone for the workers, api and web pods that
    reached it). The bound asserted leaves room for the program's budget, not for the old
    plan; the five zones the pool's types are offered in hold 6 web pods each."""
    plan = plan_json("-f", str(write(tmp_path, "m.yaml", *_workload())))
    assert not plan["unschedulable"]
    assert plan["totalHourlyCost"] < 0.65
    web_per_zone = Counter(
        claim["zone"]
        for claim in plan["nodeClaims"]
        for pod in claim["pods"]
        if pod.startswith("default/web-")
    )
    assert sum(web_per_zone.values()) == 30
    assert max(web_per_zone.values()) - min(web_per_zone.values()) <= 1
    caches = [
        c for c in plan["nodeClaims"] if any(p.startswith("default/cache-") for p in c["pods"])
    ]
    assert len(caches) == 3
