"""`daiku plan` with a growing root volume (ebs.maxVolumeSize): pods' ephemeral-storage packs
against the cap, each claim names the volume it would launch with, a pod beyond the cap is
unschedulable with a reason naming it, and a cap below volumeSize is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/launch-options/root-volume.yaml"


def run(path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", "-f", str(path), *args])
    return result.exit_code, result.output


def test_each_claim_names_the_volume_its_pods_need_and_the_cap_refuses_the_rest() -> None:
    code, out = run(EXAMPLE, "-o", "json")
    assert code == 1
    document = json.loads(out)
    # 40Gi per build pod: the smallest whole GiB v with v - v/10 - 1 >= 40 x pods.
    volume_for_pods = {1: "46Gi", 2: "90Gi", 3: "135Gi", 4: "179Gi"}
    for claim in document["nodeClaims"]:
        assert claim["rootVolumeSize"] == volume_for_pods[len(claim["pods"])]
    assert sum(len(c["pods"]) for c in document["nodeClaims"]) == 6
    (refused,) = document["unschedulable"]
    assert refused["pod"] == "default/huge"
    assert "root volume grows to at most 200Gi, 179 GiB allocatable" in refused["reason"]
    _, explained = run(EXAMPLE, "--explain", "build-0")
    assert "Root volume of its NodeClaim: 46Gi for 40 GiB of ephemeral-storage" in explained


def test_without_a_cap_the_pods_do_not_fit(tmp_path: Path) -> None:
    documents: list[dict[str, Any]] = list(yaml.safe_load_all(EXAMPLE.read_text()))
    del documents[0]["spec"]["blockDeviceMappings"][0]["ebs"]["maxVolumeSize"]
    path = tmp_path / "fixed.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    code, out = run(path, "-o", "json")
    assert code == 1
    document = json.loads(out)
    assert document["nodeClaims"] == []
    assert all("rootVolumeSize" not in c for c in document["nodeClaims"])


def test_a_cap_below_the_volume_size_is_refused_naming_the_field(tmp_path: Path) -> None:
    documents: list[dict[str, Any]] = list(yaml.safe_load_all(EXAMPLE.read_text()))
    documents[0]["spec"]["blockDeviceMappings"][0]["ebs"]["maxVolumeSize"] = "10Gi"
    path = tmp_path / "low.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    code, out = run(path)
    assert code == 2
    assert "blockDeviceMappings[0].ebs.maxVolumeSize" in out
    assert "10Gi is below volumeSize 20Gi" in out
