"""`daiku plan` offline with reserved capacity: the reservations an EC2NodeClass's status lists
are planned first, each for no more claims than it has free instances; the rest fall back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/reserved-capacity/reserved.yaml"


def plan(path: Path, exit_code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json"])
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout) if exit_code == 0 else result.output


def test_the_example_fills_each_reservation_to_its_room_and_no_further() -> None:
    claims = plan(EXAMPLE)["nodeClaims"]
    reserved = [c for c in claims if c["capacityType"] == "reserved"]
    assert sorted(c["capacityReservationId"] for c in reserved) == [
        "cr-0123456789abcdef0",
        "cr-0123456789abcdef0",
        "cr-0fedcba9876543210",
    ]
    assert {c["instanceType"] for c in reserved} == {"m5.xlarge", "m5.2xlarge"}
    assert all(c["price"] < 0.001 for c in reserved)
    assert sum(len(c["pods"]) for c in claims) == 8
    assert all("capacityReservationId" not in c for c in claims if c not in reserved)


def test_without_the_status_nothing_is_reserved(tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    del documents[0]["status"]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    claims = plan(path)["nodeClaims"]
    assert {c["capacityType"] for c in claims} == {"spot"}


def test_a_malformed_reservation_in_the_status_is_refused_naming_it(tmp_path: Path) -> None:
    documents: list[dict[str, Any]] = list(yaml.safe_load_all(EXAMPLE.read_text()))
    documents[0]["status"]["capacityReservations"][1]["endTime"] = "next tuesday"
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    output = plan(path, exit_code=2)
    assert "status.capacityReservations[1].endTime" in output
