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


def test_the_claims_beyond_the_room_are_sized_for_spot_not_for_a_free_node() -> None:
    # The solver counts each reservation's room while it plans: the Capacity Block's
    # m5.2xlarge takes two 3-cpu pods and the four pods left share one spot node. When the
    # room was counted after the solve, claims sized for free m5 nodes fell back one by one
    # to spot types: six claims, $0.2316/h for what now costs $0.1789/h.
    document = plan(EXAMPLE)
    claims = document["nodeClaims"]
    block = next(c for c in claims if c.get("capacityReservationId") == "cr-0fedcba9876543210")
    assert len(block["pods"]) == 2
    spot = [c for c in claims if c["capacityType"] != "reserved"]
    assert len(spot) == 1
    assert document["totalHourlyCost"] < 0.2


def _claim_in(reservation_id: str, name: str) -> dict[str, Any]:
    """A NodeClaim in flight that launched into the reservation (its label), too small to
    take a pending pod."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "karpenter.k8s.aws/capacity-reservation-id": reservation_id,
            },
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [],
            "resources": {"requests": {"cpu": "100m"}},
        },
    }


def test_claims_in_flight_in_a_reservation_leave_less_room(tmp_path: Path) -> None:
    # The status (resolved before they launched) says 2 of 4 free; three claims already hold
    # instances there, so one is left.
    documents = [*yaml.safe_load_all(EXAMPLE.read_text())]
    documents += [_claim_in("cr-0123456789abcdef0", f"held-{i}") for i in range(3)]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    claims = plan(path)["nodeClaims"]
    ids = [c.get("capacityReservationId") for c in claims]
    assert ids.count("cr-0123456789abcdef0") == 1
    assert ids.count("cr-0fedcba9876543210") == 1
    assert sum(len(c["pods"]) for c in claims) == 8
