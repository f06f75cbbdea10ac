"""`daiku plan -f` on a NodePool with `limits` and minValues: a claim there keeps only the types
no bigger than its target, so the plan targets one whose kept types still span the minValues
and buys the cheapest of them; with no such target within the limit, Strict leaves the pod
pending naming minValues and BestEffort relaxes them on the claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from daiku_cli.main import app

FAMILY = "karpenter.k8s.aws/instance-family"
NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  LIMITS
  template:
    spec:
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [a, b], minValues: 2}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 1200m, memory: 1Gi}}
"""


def entry(name: str, cpu: int, family: str, price: float) -> dict[str, Any]:
    """One on-demand offering in one zone, so a claim's offering count is its type count."""
    return {
        "name": name,
        "capacity": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", "pods": "29"},
        "labels": {"kubernetes.io/arch": "amd64", FAMILY: family},
        "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": price}],
    }


def plan(tmp_path: Path, limits: str, *args: str) -> tuple[int, dict[str, Any]]:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps(
            {"instanceTypes": [entry("a.large", 2, "a", 0.10), entry("b.xlarge", 4, "b", 0.30)]}
        )
    )
    manifest = tmp_path / "pool.yaml"
    manifest.write_text("---\n".join([NODEPOOL.replace("LIMITS", limits), DEPLOYMENT]))
    result = CliRunner().invoke(
        app, ["plan", "-f", str(manifest), "--catalog", str(catalog), "-o", "json", *args]
    )
    document: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, document


@pytest.mark.parametrize(
    "limits", ["limits: {cpu: 100}", "limits: {}"], ids=["limited", "unlimited"]
)
def test_the_claim_keeps_both_families_and_buys_the_cheapest(tmp_path: Path, limits: str) -> None:
    """Limited: targeting a.large would keep family a alone; the claim targets b.xlarge, keeps
    a.large and b.xlarge and buys a.large. Unlimited: the same plan, as before."""
    code, document = plan(tmp_path, limits)
    assert code == 0
    assert document["unschedulable"] == []
    (claim,) = document["nodeClaims"]
    assert (claim["instanceType"], claim["price"]) == ("a.large", 0.1)
    assert claim["offeringCount"] == 2  # a.large and b.xlarge
    assert "minValuesRelaxed" not in claim


def test_strict_leaves_the_pod_pending_when_the_limit_leaves_one_family(tmp_path: Path) -> None:
    code, document = plan(tmp_path, "limits: {cpu: 3}")
    assert code == 1
    assert document["nodeClaims"] == []
    (refused,) = document["unschedulable"]
    assert f"minValues 2 for {FAMILY} (only 1 fit)" in refused["reason"]


def test_best_effort_relaxes_minvalues_on_the_claim_and_says_so(tmp_path: Path) -> None:
    code, document = plan(tmp_path, "limits: {cpu: 3}", "--min-values-policy", "BestEffort")
    assert code == 0
    (claim,) = document["nodeClaims"]
    assert (claim["instanceType"], claim["offeringCount"]) == ("a.large", 1)
    assert claim["minValuesRelaxed"] == [{"key": FAMILY, "minValues": 2, "relaxedTo": 1}]
