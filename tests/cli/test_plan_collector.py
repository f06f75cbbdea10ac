"""`daiku plan` runs with few cyclic-garbage collections: a plan's objects all live to its end,
and collecting every 700 allocations cost about a quarter of a 20k-pod plan's CPU."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import daiku_cli.plan
from scheduler_svc.core import SchedulingInput, SchedulingResult, solve
from tests.cli.test_plan import deployment, nodepool, plan_json, write


def test_plan_solves_with_a_raised_collection_threshold_and_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real_solve = solve

    def recording_solve(problem: SchedulingInput, **kwargs: Any) -> SchedulingResult:
        seen.append(gc.get_threshold()[0])
        return real_solve(problem, **kwargs)

    monkeypatch.setattr(daiku_cli.plan, "solve", recording_solve)
    before = gc.get_threshold()
    manifests = write(
        tmp_path, "m.yaml", nodepool(), deployment("web", 3, {"cpu": "1", "memory": "1Gi"})
    )

    plan = plan_json("-f", str(manifests))

    assert sum(len(c["pods"]) for c in plan["nodeClaims"]) == 3
    assert seen
    assert seen[0] >= 100_000
    assert gc.get_threshold() == before
