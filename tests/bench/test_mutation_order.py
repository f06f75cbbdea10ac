"""bench/mutation_order.py runs a mutant's tests fastest first, by mutmut's recorded
durations, and only in a mutant's run; bench/mutation_run.py loads it through pytest's own
addopts, leaving mutmut's arguments (whose change would drop every verdict) as they are."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from bench import mutation_order
from bench.mutation_run import ORDER_PLUGIN, ROOT, TARGETS, _pyproject_for

MUTANT = "scheduler_svc.core.pricing.x_cost__mutmut_2"


@dataclass
class FakeItem:
    nodeid: str


def _collected() -> list[FakeItem]:
    return [FakeItem("t.py::slow"), FakeItem("t.py::new"), FakeItem("t.py::fast")]


def _ordered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant: str | None) -> list[str]:
    stats = {"duration_by_test": {"t.py::slow": 5.0, "t.py::fast": 0.1}}
    (tmp_path / "mutmut-stats.json").write_text(json.dumps(stats))
    monkeypatch.chdir(tmp_path)
    if mutant is None:
        monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    else:
        monkeypatch.setenv("MUTANT_UNDER_TEST", mutant)
    items = _collected()
    mutation_order.pytest_collection_modifyitems(cast(list[Any], items))
    return [item.nodeid for item in items]


def test_a_mutants_tests_run_fastest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test mutmut has no duration for (written since its stats) counts as instant."""
    order = _ordered(tmp_path, monkeypatch, MUTANT)
    assert order == ["t.py::new", "t.py::fast", "t.py::slow"]


@pytest.mark.parametrize("mutant", [None, "stats"], ids=["plain-run", "mutmut-stats-run"])
def test_other_runs_keep_the_collected_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant: str | None
) -> None:
    assert _ordered(tmp_path, monkeypatch, mutant) == ["t.py::slow", "t.py::new", "t.py::fast"]


def test_the_plugin_is_loaded_by_pytests_addopts_not_mutmuts_arguments() -> None:
    generated = tomllib.loads(_pyproject_for(TARGETS["disruption"]))["tool"]
    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    assert generated["pytest"]["ini_options"]["addopts"] == (
        f"{repository['pytest']['ini_options']['addopts']} {ORDER_PLUGIN}"
    )
    assert generated["mutmut"]["pytest_add_cli_args"] == repository["mutmut"]["pytest_add_cli_args"]


def test_a_target_may_allow_more_time_before_a_timeout() -> None:
    """The launcher's tests start the emulator in-process: its mutants get 30 s more than the
    recorded test time; a target that sets no constant keeps pyproject.toml's."""
    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    launcher = tomllib.loads(_pyproject_for(TARGETS["launcher"]))["tool"]["mutmut"]
    requirements = tomllib.loads(_pyproject_for(TARGETS["requirements"]))["tool"]["mutmut"]
    assert TARGETS["requirements"].timeout_constant is None
    assert launcher["timeout_constant"] == 30.0
    assert requirements["timeout_constant"] == repository["timeout_constant"]
