"""NodeOverlays offline: `daiku plan` solves with them, `--explain` names them, `daiku catalog
-f` shows them, `daiku convert` carries Karpenter's karpenter.sh/v1alpha1 spelling."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from daiku_cli.main import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capacity" / "nodeoverlay.yaml"


def _without_overlays(tmp_path: Path) -> Path:
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d["kind"] != "NodeOverlay"]
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


def _plan(*args: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, ["plan", *args, "-o", "json"])
    assert result.exit_code in (0, 1), result.output
    plan: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return plan


def test_plan_uses_the_overlays(tmp_path: Path) -> None:
    """Without overlays the FUSE pod is unschedulable and web goes to list-priced types; with
    them the FUSE pod gets a c6i and the m5 claims are priced 30 % under the list."""
    plain = _plan("-f", str(_without_overlays(tmp_path)))
    assert [u["pod"] for u in plain["unschedulable"]] == ["default/fuse-user"]
    overlaid = _plan("-f", str(EXAMPLE))
    assert overlaid["unschedulable"] == []
    by_pod = {p: c for c in overlaid["nodeClaims"] for p in c["pods"]}
    assert by_pod["default/fuse-user"]["instanceType"].startswith("c6i.")
    m5 = [c for c in overlaid["nodeClaims"] if c["instanceType"] == "m5.large"]
    assert m5
    assert all(abs(c["price"] - 0.096 * 0.7) < 1e-9 for c in m5)


def test_explain_names_the_overlays() -> None:
    result = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLE), "--explain", "fuse-user"])
    assert result.exit_code == 0, result.output
    assert "capacity +smarter-devices/fuse=1 (NodeOverlay fuse-device-plugin)" in result.stdout
    result = CliRunner().invoke(app, ["plan", "-f", str(EXAMPLE), "--explain", "web-0"])
    assert "0.0960 -> 0.0672 (NodeOverlay savings-plan-m5: priceAdjustment -30%)" in result.stdout


def test_catalog_shows_the_overlays() -> None:
    result = CliRunner().invoke(app, ["catalog", "-f", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    types = {t["name"]: t for t in json.loads(result.stdout)["instanceTypes"]}
    m5 = types["m5.large"]
    assert m5["overlays"] == ["savings-plan-m5"]
    on_demand = [o for o in m5["offerings"] if o["capacityType"] == "on-demand"]
    assert all(o["basePrice"] == 0.096 and o["overlay"] == "savings-plan-m5" for o in on_demand)
    spot = [o for o in m5["offerings"] if o["capacityType"] == "spot"]
    assert all("overlay" not in o for o in spot)
    assert types["c6i.large"]["allocatable"]["smarter-devices/fuse"] == "1"
    assert "overlays" not in types["c5.large"]
    table = CliRunner().invoke(app, ["catalog", "-f", str(EXAMPLE), "-o", "table"]).stdout
    assert "OVERLAYS" in table.splitlines()[0]


def test_a_bad_overlay_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "daiku.dev/v1alpha1",
                "kind": "NodeOverlay",
                "metadata": {"name": "both"},
                "spec": {"price": "0.1", "priceAdjustment": "-10%"},
            }
        )
    )
    for command in (["plan", "-f", str(bad)], ["catalog", "-f", str(bad)]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2
        assert "NodeOverlay both: field spec: cannot set both 'price' and 'priceAdjustment'" in (
            result.stderr
        )


def test_convert_carries_karpenter_nodeoverlays(tmp_path: Path) -> None:
    source = tmp_path / "karpenter.yaml"
    overlay = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "sp"},
        "spec": {
            "weight": 5,
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                }
            ],
            "priceAdjustment": "-20%",
            "capacity": {"hugepages-2Mi": "100Mi"},
        },
    }
    source.write_text(yaml.safe_dump(overlay))
    result = CliRunner().invoke(app, ["convert", "-f", str(source)])
    assert result.exit_code == 0, result.output
    (converted,) = yaml.safe_load_all(result.stdout)
    assert converted == {**overlay, "apiVersion": "daiku.dev/v1alpha1"}
    assert "warning" not in result.stderr


def test_plan_leaves_a_conflicting_overlay_out_and_says_so(tmp_path: Path) -> None:
    """A second weight-10 overlay pricing m5 on-demand flat conflicts with savings-plan-m5
    (Karpenter's ValidationSucceeded=False, Conflict): it is left out (m5 stays at -30 %), and
    plan notes why on stderr."""
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    documents.append(
        {
            "apiVersion": "daiku.dev/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": "a-flat-m5"},
            "spec": {
                "weight": 10,
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
                ],
                "price": "0.01",
            },
        }
    )
    path = tmp_path / "conflict.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert (
        "note: NodeOverlay a-flat-m5 is left out: conflicts with NodeOverlay savings-plan-m5"
        in (result.stderr)
    )
    m5 = [c for c in json.loads(result.stdout)["nodeClaims"] if c["instanceType"] == "m5.large"]
    assert m5
    assert all(abs(c["price"] - 0.096 * 0.7) < 1e-9 for c in m5)
