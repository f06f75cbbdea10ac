"""`daiku plan` on what issue 19 left for the edge: ``--explain`` naming the preferences a placed
pod lost, Namespace objects whose labels a ``namespaceSelector`` selects, and the
``topology.k8s.aws/zone-id`` label. Bundled us-east-1 catalog; each test cites the upstream
test or document it follows.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from daiku_cli.main import app

from .test_plan import deployment, nodepool, write

ZONE = "topology.kubernetes.io/zone"


def test_explain_names_the_preferences_a_placed_pod_lost(tmp_path: Path) -> None:
    """A pod preferring zone mars-1 (weight 100, no offering there) and us-east-1c (weight 50)
    lands in us-east-1c, and ``--explain`` says the mars-1 term was relaxed (Karpenter logs
    "relaxing soft constraints for pod since it previously failed to schedule, removing: ...",
    kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/preferences.go Relax); a
    pod that kept its preferences says none."""
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["mars-1"]}]
                    },
                },
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {"key": ZONE, "operator": "In", "values": ["us-east-1c"]}
                        ]
                    },
                },
            ]
        }
    }
    manifests = write(
        tmp_path,
        "m.yaml",
        nodepool(),
        deployment("picky", 1, {"cpu": "500m"}, affinity=prefer),
        deployment("plain", 1, {"cpu": "500m"}),
    )

    def explain(pod: str) -> str:
        result = CliRunner().invoke(app, ["plan", "-f", str(manifests), "--explain", pod])
        assert result.exit_code == 0, result.output
        return result.stdout

    picky, plain = explain("picky-0"), explain("plain-0")

    assert "Pod default/picky-0: placed on new NodeClaim" in picky
    assert (
        f"Preferences relaxed: preferred node affinity (weight 100): {ZONE} In [mars-1]\n" in picky
    )
    assert "Preferences relaxed: none\n" in plain
