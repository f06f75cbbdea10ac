"""`daiku catalog` and bundled_catalog_document: the offline catalog document."""

import json

from typer.testing import CliRunner

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.main import app


def test_bundled_document_has_m5_large_as_facts_say() -> None:
    """m5.large: capacity 2/7577Mi/29/20Gi, allocatable 1930m/6903Mi/29/17Gi, priced offerings."""
    document = bundled_catalog_document("us-east-1")
    types = {t["name"]: t for t in document["instanceTypes"]}
    m5 = types["m5.large"]
    assert m5["capacity"] == {
        "cpu": "2",
        "memory": "7577Mi",
        "pods": "29",
        "ephemeral-storage": "20Gi",
    }
    assert m5["allocatable"] == {
        "cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi",
    }  # fmt: skip
    on_demand = {o["price"] for o in m5["offerings"] if o["capacityType"] == "on-demand"}
    spot = [o["price"] for o in m5["offerings"] if o["capacityType"] == "spot"]
    assert on_demand == {0.096}
    assert spot
    assert all(0 < p < 0.096 for p in spot)
    assert "m4.large" not in types  # previous generation


def test_cli_prints_json_and_table() -> None:
    """`daiku catalog -o json` prints the document; `-o table` one line per type."""
    runner = CliRunner()
    result = runner.invoke(app, ["catalog", "-o", "json"])
    assert result.exit_code == 0, result.output
    names = [t["name"] for t in json.loads(result.output)["instanceTypes"]]
    assert "c5.large" in names
    table = runner.invoke(app, ["catalog", "-o", "table"])
    assert table.exit_code == 0
    assert any(line.startswith("m5.large ") for line in table.output.splitlines())


def test_unknown_region_fails_with_a_message() -> None:
    """A region without bundled data exits 1 and names the region."""
    result = CliRunner().invoke(app, ["catalog", "--region", "mars-1"])
    assert result.exit_code == 1
    assert "mars-1" in result.output
