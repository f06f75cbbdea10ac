"""The same manifests give the same plan in every process (issue 11 item 3: `daiku plan`, the
live scheduler and the disruption simulator run in different processes). The cores keep sets
of strings, and Python salts string hashes per process (PYTHONHASHSEED), so an answer that
leant on set order would differ between two runs of the same plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.plan_cli import catalog_document, manifests, write_manifests
from tests.cli.test_plan import write
from tests.cli.test_plan_zone_spread import _workload

DAIKU = Path(sys.executable).parent / "daiku"


def _plan(*args: str, hash_seed: int) -> dict[str, Any]:
    finished = subprocess.run(
        [str(DAIKU), "plan", *args, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
        timeout=120,
    )
    document: dict[str, Any] = json.loads(finished.stdout)
    document.pop("solveSeconds")
    return document


@pytest.mark.parametrize("workload", ["facts-mix", "zone-spread-web-tier"])
def test_two_processes_plan_the_same_claims(workload: str, tmp_path: Path) -> None:
    """FACTS §5's mix (spreads on zone and hostname, pod affinity and anti-affinity) at 400
    pods on its own catalog, and the zone-spread web tier on the bundled one: byte-identical
    plans under two hash seeds."""
    if workload == "facts-mix":
        catalog = tmp_path / "catalog.json"
        catalog.write_text(json.dumps(catalog_document()), encoding="utf-8")
        manifest = tmp_path / "pods.json"
        write_manifests(manifest, manifests(400, 1), as_yaml=False)
        args: tuple[str, ...] = ("--catalog", str(catalog), "-f", str(manifest))
    else:
        args = ("-f", str(write(tmp_path, "m.yaml", *_workload())))
    first, second = (_plan(*args, hash_seed=seed) for seed in (1, 2))
    assert first["nodeClaims"], "the plan bought nothing: the comparison would prove nothing"
    assert first == second
