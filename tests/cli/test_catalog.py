"""`daiku catalog` lists sizes in natural order and names the regions it has."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from daiku_cli.catalog import natural_order_key
from daiku_cli.main import app


def test_sizes_sort_the_way_ec2_grows_them() -> None:
    """Within a family: nano < micro < small < medium < large < xlarge < 2xlarge < 12xlarge
    < metal < metal-24xl; families in natural order (c5 before c5a before c6g)."""
    expected = [
        "c5.large",
        "c5.xlarge",
        "c5.2xlarge",
        "c5.12xlarge",
        "c5.metal",
        "c5a.large",
        "c6g.medium",
        "m7i.48xlarge",
        "m7i.metal-24xl",
        "m7i.metal-48xl",
        "t3.nano",
        "t3.micro",
        "t3.small",
        "t3.medium",
        "t3.large",
    ]
    shuffled = sorted(expected, key=lambda name: name[::-1])
    assert sorted(shuffled, key=natural_order_key) == expected


@pytest.mark.parametrize("output", ["json", "table"])
def test_cli_lists_c5_sizes_in_natural_order(output: str) -> None:
    """Both outputs list c5's sizes large, xlarge, 2xlarge, 4xlarge, 9xlarge, 12xlarge,
    18xlarge, 24xlarge, metal, in that order."""
    result = CliRunner().invoke(app, ["catalog", "-o", output])
    assert result.exit_code == 0, result.output
    if output == "json":
        names = [t["name"] for t in json.loads(result.stdout)["instanceTypes"]]
    else:
        names = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    c5 = [name.removeprefix("c5.") for name in names if name.startswith("c5.")]
    assert c5 == [
        "large",
        "xlarge",
        "2xlarge",
        "4xlarge",
        "9xlarge",
        "12xlarge",
        "18xlarge",
        "24xlarge",
        "metal",
    ]


def test_table_columns_stay_apart_for_the_largest_types() -> None:
    """Every table row splits into its eight columns, even u7in-32tb.224xlarge's (896 vCPUs,
    30 TiB)."""
    result = CliRunner().invoke(app, ["catalog", "-o", "table"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert rows
    assert all(len(row) == 8 for row in rows), [row for row in rows if len(row) != 8][:3]


def test_a_region_without_data_is_refused_naming_the_regions_there_are() -> None:
    """--region eu-west-1 exits 2 (bad input) saying the bundled catalog has us-east-1."""
    result = CliRunner().invoke(app, ["catalog", "--region", "eu-west-1"])
    assert result.exit_code == 2  # exit_codes.BAD_INPUT
    assert (
        "no bundled data for region 'eu-west-1'; the bundled catalog has: us-east-1"
        in result.stderr
    )
