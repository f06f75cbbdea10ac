"""`daiku plan` with a static NodePool: the claims it would create to reach its replicas, pods
placed on them, nothing more for it however many pods wait, and `limits.nodes` noted."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capacity" / "static-nodepool.yaml"


def test_plan_lists_the_static_claims_and_fills_them() -> None:
    result = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLE), "-o", "json"])
    assert result.exit_code == 0, result.output
    claims = json.loads(result.stdout)["nodeClaims"]
    static = [c for c in claims if c["nodePool"] == "static"]
    assert len(static) == 3
    assert {c["instanceType"] for c in static} == {"m5.large"}
    assert sum(len(c["pods"]) for c in claims) == 4


def test_a_static_pool_never_grows_for_pods_and_notes_its_limit(tmp_path: Path) -> None:
    """Pods pinned to a static pool beyond its room stay unschedulable; a limit below the
    replicas is noted on stderr."""
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    static = documents[0]
    static["spec"]["limits"] = {"nodes": 2}
    web = documents[2]
    web["spec"]["replicas"] = 9  # three fit on each m5.large
    web["spec"]["template"]["spec"]["nodeSelector"] = {"daiku.dev/nodepool": "static"}
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json"])
    assert result.exit_code == 1
    plan = json.loads(result.stdout)
    assert [c["nodePool"] for c in plan["nodeClaims"]] == ["static", "static"]
    assert plan["unschedulable"]
    assert "note: NodePool static: limits.nodes=2" in result.stderr
