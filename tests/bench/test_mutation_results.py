"""bench/mutation_run.py keeps each target's mutmut verdicts in the repository and puts them
back before a run, so a run on another machine goes on where the last one stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mutmut.mutation.data import SourceFileMutationData

from bench.mutation_run import mark_survivors_unchecked, restore_results, save_results

MODULE = Path("scheduler_svc/core/pricing.py")
KILLED, SURVIVED, TIMEOUT = 1, 0, 36
META = {
    "exit_code_by_key": {
        "scheduler_svc.core.pricing.x_cost__mutmut_2": SURVIVED,
        "scheduler_svc.core.pricing.x_cost__mutmut_1": KILLED,
        "scheduler_svc.core.pricing.x_cost__mutmut_3": None,
    },
    "hash_by_function_name": {"x_cost": "29bfffbb8bda"},
    "type_check_error_by_key": {},
    "durations_by_key": {"scheduler_svc.core.pricing.x_cost__mutmut_1": 0.12},
    "estimated_durations_by_key": {"scheduler_svc.core.pricing.x_cost__mutmut_1": 0.01},
}


def _write_meta(work: Path, meta: dict[str, object]) -> Path:
    path = work / "mutants" / f"{MODULE}.meta"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(meta))
    return path


def test_saved_verdicts_come_back_as_mutmut_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run decided (and which mutants it had not checked) and the function hashes
    survive a save and a restore into an empty work directory; timings are not kept."""
    results, first, second = tmp_path / "results", tmp_path / "first", tmp_path / "second"
    _write_meta(first, META)

    save_results("solver", first, results)
    restore_results("solver", second, results)

    kept = json.loads((results / "solver" / f"{MODULE}.meta").read_text())
    assert set(kept) == {"exit_code_by_key", "hash_by_function_name"}
    assert list(kept["exit_code_by_key"]) == sorted(META["exit_code_by_key"])  # type: ignore[call-overload]
    monkeypatch.chdir(second)
    restored = SourceFileMutationData(path=MODULE)
    restored.load()
    assert restored.exit_code_by_key == META["exit_code_by_key"]
    assert restored.hash_by_function_name == META["hash_by_function_name"]
    assert restored.durations_by_key == {}


def test_a_module_the_work_directory_has_results_for_is_not_overwritten(tmp_path: Path) -> None:
    """A restore never replaces verdicts mutmut already holds on this machine (newer ones)."""
    results, work = tmp_path / "results", tmp_path / "work"
    _write_meta(tmp_path / "old", {**META, "exit_code_by_key": {"k": KILLED}})
    save_results("solver", tmp_path / "old", results)
    local = _write_meta(work, META)

    restore_results("solver", work, results)

    assert json.loads(local.read_text()) == META


def test_recheck_marks_survivors_and_timeouts_not_listed_equivalent_unchecked(
    tmp_path: Path,
) -> None:
    """A survivor and a timeout go back to unchecked (so the run tries them against the newer
    tests, and on a quiet machine); a listed equivalent, a killed mutant and mutmut's stale
    test map do not come back."""
    equivalent = "scheduler_svc.core.pricing.x_cost__mutmut_4"
    timed_out = "scheduler_svc.core.pricing.x_cost__mutmut_5"
    codes = {**META["exit_code_by_key"], equivalent: SURVIVED, timed_out: TIMEOUT}  # type: ignore[dict-item]
    meta = _write_meta(tmp_path, {**META, "exit_code_by_key": codes})
    stats = tmp_path / "mutants" / "mutmut-stats.json"
    stats.write_text("{}")

    marked = mark_survivors_unchecked(tmp_path, {equivalent: "same behaviour"})

    assert marked == 2
    assert json.loads(meta.read_text())["exit_code_by_key"] == {
        "scheduler_svc.core.pricing.x_cost__mutmut_2": None,
        "scheduler_svc.core.pricing.x_cost__mutmut_1": KILLED,
        "scheduler_svc.core.pricing.x_cost__mutmut_3": None,
        equivalent: SURVIVED,
        timed_out: None,
    }
    assert not stats.exists()
