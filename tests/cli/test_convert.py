"""`daiku convert` reads a file or stdin, prints daiku objects, warns on stderr, fails clearly."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

FIXTURES = Path(__file__).resolve().parents[1] / "deploy" / "fixtures"
SEED_000 = FIXTURES / "seed000_provisioner.yaml"


def test_converts_a_seed_provisioner_to_yaml_with_warnings_on_stderr() -> None:
    """The seed-000 Provisioner becomes a NodePool and an EC2NodeClass on stdout, and the
    missing instance profile is a warning on stderr naming the object and field."""
    result = CliRunner().invoke(app, ["convert", "-f", str(SEED_000), "--cluster-name", "mz"])
    assert result.exit_code == 0, result.stderr
    objects = list(yaml.safe_load_all(result.stdout))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("NodePool", "default"),
        ("EC2NodeClass", "default"),
    ]
    assert all(o["apiVersion"] == "daiku.dev/v1" for o in objects)
    assert "warning: Provisioner/default: spec.provider.instanceProfile:" in result.stderr
    assert "warning" not in result.stdout


def test_json_output_is_one_object_or_a_list() -> None:
    """-o json prints a single object as itself and several as a v1 List."""
    runner = CliRunner()
    several = runner.invoke(app, ["convert", "-f", str(SEED_000), "-o", "json"])
    assert several.exit_code == 0, several.stderr
    listed = json.loads(several.stdout)
    assert listed["kind"] == "List"
    assert [item["kind"] for item in listed["items"]] == ["NodePool", "EC2NodeClass"]

    one = runner.invoke(
        app,
        ["convert", "-f", "-", "-o", "json"],
        input=(FIXTURES / "karpenter_v1.yaml").read_text().split("\n---\n")[0],
    )
    assert one.exit_code == 0, one.stderr
    assert json.loads(one.stdout)["kind"] == "NodePool"


def test_missing_file_fails_naming_it(tmp_path: Path) -> None:
    """A file that does not exist exits 2 (bad input) with an error naming the file."""
    missing = tmp_path / "nope.yaml"
    result = CliRunner().invoke(app, ["convert", "-f", str(missing)])
    assert result.exit_code == 2  # exit_codes.BAD_INPUT
    assert f"error: {missing}:" in result.stderr
    assert result.stdout == ""


def test_invalid_yaml_fails(tmp_path: Path) -> None:
    """Input that is not YAML exits 2 (bad input) with an error naming the file."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("values:\n  - 'a', 'b'\n")
    result = CliRunner().invoke(app, ["convert", "-f", str(broken)])
    assert result.exit_code == 2  # exit_codes.BAD_INPUT
    assert f"error: {broken}: not valid YAML or JSON" in result.stderr


def test_unconvertible_field_fails_naming_object_and_field(tmp_path: Path) -> None:
    """A Provisioner whose TTL is not an integer exits 2 (bad input) naming the Provisioner
    and the field."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: web}\n"
        "spec: {ttlSecondsAfterEmpty: 30s}\n"
    )
    result = CliRunner().invoke(app, ["convert", "-f", str(bad)])
    assert result.exit_code == 2  # exit_codes.BAD_INPUT
    assert "Provisioner/web: spec.ttlSecondsAfterEmpty:" in result.stderr


def test_json_input_is_read_like_yaml(tmp_path: Path) -> None:
    """A JSON manifest converts exactly like the same manifest in YAML."""
    as_json = tmp_path / "nodepool.json"
    (nodepool_yaml,) = [
        d
        for d in yaml.safe_load_all((FIXTURES / "karpenter_v1.yaml").read_text())
        if d["kind"] == "NodePool"
    ]
    as_json.write_text(json.dumps(nodepool_yaml))
    runner = CliRunner()
    from_json = runner.invoke(app, ["convert", "-f", str(as_json)])
    from_yaml = runner.invoke(
        app, ["convert", "-f", "-"], input=yaml.safe_dump(nodepool_yaml, sort_keys=False)
    )
    assert from_json.exit_code == 0, from_json.stderr
    assert from_json.stdout == from_yaml.stdout
    assert yaml.safe_load(from_json.stdout)["apiVersion"] == "daiku.dev/v1"


def test_unknown_operator_is_a_warning_on_stderr(tmp_path: Path) -> None:
    """A NodePool requirement with operator Frob converts (exit 0, kept in the output) with a
    warning on stderr naming the NodePool and the operator field."""
    manifest = tmp_path / "frob.yaml"
    manifest.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: web}\n"
        "spec:\n  template:\n    spec:\n      nodeClassRef: {name: x}\n"
        "      requirements: [{key: team, operator: Frob, values: [a]}]\n"
    )
    result = CliRunner().invoke(app, ["convert", "-f", str(manifest)])
    assert result.exit_code == 0, result.stderr  # exit_codes.OK: converted, with warnings
    assert (
        "warning: NodePool/web: spec.template.spec.requirements[0].operator: "
        "unknown operator 'Frob'" in result.stderr
    )
    assert "operator: Frob" in result.stdout


def test_balanced_consolidation_carries_over(tmp_path: Path) -> None:
    """Karpenter v1.14's `consolidationPolicy: Balanced` and `consolidationThreshold` pass
    through `daiku convert` unchanged, with no warning (they used to be dropped)."""
    (nodepool,) = [
        d
        for d in yaml.safe_load_all((FIXTURES / "karpenter_v1.yaml").read_text())
        if d["kind"] == "NodePool"
    ]
    nodepool["spec"]["disruption"] = {
        "consolidationPolicy": "Balanced",
        "consolidationThreshold": 3,
        "consolidateAfter": "30s",
    }
    source = tmp_path / "nodepool.yaml"
    source.write_text(yaml.safe_dump(nodepool))
    result = CliRunner().invoke(app, ["convert", "-f", str(source)])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"]["disruption"] == nodepool["spec"]["disruption"]
    assert "consolidationThreshold" not in result.stderr
