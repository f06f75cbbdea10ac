"""`daiku plan --min-values-policy`: Strict (the default) leaves a pod the NodePool's minValues
rules out unschedulable and `--explain` says BestEffort would relax it; BestEffort plans it on
a claim whose relaxed minValues the plan and `--explain` name."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from daiku_cli.main import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/launch-options/min-values-best-effort.yaml"
FAMILY = "karpenter.k8s.aws/instance-family"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLE), *args])
    return result.exit_code, result.stdout


def test_strict_leaves_the_big_pod_pending_and_explain_names_best_effort() -> None:
    code, out = run("-o", "json")
    assert code == 1
    (refused,) = json.loads(out)["unschedulable"]
    assert refused["pod"] == "default/analytics"
    assert f"minValues 2 for {FAMILY} (only 1 fit)" in refused["reason"]
    _, explained = run("--explain", "analytics")
    assert "--min-values-policy BestEffort would relax them instead" in explained


def test_best_effort_places_it_on_a_claim_that_says_what_was_relaxed() -> None:
    code, out = run("-o", "json", "--min-values-policy", "BestEffort")
    assert code == 0
    document = json.loads(out)
    assert document["unschedulable"] == []
    relaxed = [c for c in document["nodeClaims"] if "minValuesRelaxed" in c]
    assert [c["minValuesRelaxed"] for c in relaxed] == [
        [{"key": FAMILY, "minValues": 2, "relaxedTo": 1}]
    ]
    assert "default/analytics" in relaxed[0]["pods"]
    _, table = run("--min-values-policy", "BestEffort")
    assert f"minValues for {FAMILY} relaxed from 2 to 1" in table
    _, explained = run("--explain", "analytics", "--min-values-policy", "BestEffort")
    assert "MinValues relaxed on its NodeClaim" in explained


def test_an_unknown_policy_is_refused() -> None:
    code, _ = run("--min-values-policy", "Lenient")
    assert code == 2
