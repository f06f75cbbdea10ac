"""`daiku plan` with CapacityBuffers: the room each wants, where it goes, after the real pods
(which keep their placements), never counted as unschedulable."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capacity" / "headroom.yaml"


def _plan(path: Path) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    plan: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return plan


def test_plan_reports_and_provisions_the_room(tmp_path: Path) -> None:
    plan = _plan(EXAMPLE)
    report = {r["capacityBuffer"]: r for r in plan["headroom"]}
    assert report["web-burst"]["pods"] == 4
    assert report["quarter"]["pods"] == 3  # 25 % of 6 cpu requested, in 500m units
    for r in report.values():
        placed = r["onNewNodeClaims"] + r["onPlannedNodeClaims"] + r["onExistingNodes"]
        assert placed + r["unplaced"] == r["pods"]
        assert r["unplaced"] == 0
    virtual = [p for c in plan["nodeClaims"] for p in c["pods"] if p.startswith("daiku.dev:")]
    assert (
        len(virtual)
        == report["web-burst"]["onNewNodeClaims"] + report["quarter"]["onNewNodeClaims"]
    )
    without = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d["kind"] != "CapacityBuffer"]
    plain_path = tmp_path / "plain.yaml"
    plain_path.write_text(yaml.safe_dump_all(without))
    plain = _plan(plain_path)
    assert "headroom" not in plain
    # The real pods are placed as without buffers: room never moves them.
    real = {
        p: c["instanceType"]
        for c in plan["nodeClaims"]
        for p in c["pods"]
        if not p.startswith("daiku.dev:")
    }
    real_plain = {p: c["instanceType"] for c in plain["nodeClaims"] for p in c["pods"]}
    assert real == real_plain
    assert plan["existingNodePlacements"] == plain["existingNodePlacements"]


def test_a_buffer_with_negative_room_is_refused(tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    documents[0]["spec"]["replicas"] = -2
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = CliRunner().invoke(app, ["plan", "-f", str(path)])
    assert result.exit_code == 2
    assert "CapacityBuffer web-burst: field spec.replicas: headroom cannot be negative" in (
        result.stderr
    )
