"""Run mutmut on one target (a core module or group) against the unit tests that check it,
then print its score (bench/mutation_scores.py).

mutmut reads its configuration from ``pyproject.toml`` in the working directory, and runs
every test that reaches a mutated function. Run over all targets with the whole core suite,
each surviving mutant of a widely used module (requirements) ran minutes of solver tests, so a
run took hours. Each target here gets its own directory, ``.mutation/<target>/``: links to the
repository's code and tests and a ``pyproject.toml`` whose ``[tool.mutmut]`` mutates that
target only and selects its tests. Its ``mutants/`` stays there, so re-running a target
re-checks only what changed.

    nice python -m bench.mutation_run requirements      # one target
    nice python -m bench.mutation_run                    # all of them (slow)
    python -m bench.mutation_run --save solver            # keep what a stopped run checked
    nice python -m bench.mutation_run --recheck solver   # check the survivors again (new tests)

A whole target takes hours (each mutant runs the tests that reach it), more than one sitting
and more than one machine: each target's verdicts are kept in ``bench/mutation_results/<target>/``
(per module: the verdict of every mutant and the hash of every function) and put back before
a run. mutmut keeps a verdict while its function's hash is unchanged and checks again the
mutants of any function edited since, so a run goes on where the last one stopped. A verdict
kept this way is not checked again when only the tests change: ``--recheck`` marks the
survivors and timeouts (less the listed equivalents) unchecked and drops mutmut's map of which
tests reach which function, so the run checks them again with the tests written since.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mutmut.stats import status_by_exit_code

from bench.mutation_scores import MISSED, equivalent_mutants, print_scores

# A timeout counts as detected, but on a loaded machine a slow survivor times out too: checked
# again with the survivors, a real one (a loop that never ends) times out again.
RECHECKED = frozenset({*MISSED, "timeout"})
ORDER_PLUGIN = "-p bench.mutation_order"

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
RESULTS = ROOT / "bench" / "mutation_results"
SOURCE_PATHS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"][
    "source_paths"
]
SOLVER_CORE_TESTS = [
    "tests/scheduler_svc/core",
    "--ignore=tests/scheduler_svc/core/disruption",
    # Property, cost and liveness sweeps (~110 of ~125 s): every surviving mutant would run
    # them all. They stay in `make test`.
    "--ignore=tests/scheduler_svc/core/test_cost.py",
    "--ignore=tests/scheduler_svc/core/test_liveness.py",
    "--ignore=tests/scheduler_svc/core/test_catalog_cache.py",
    "--ignore=tests/scheduler_svc/core/test_solver_never_raises.py",
    "--ignore=tests/scheduler_svc/core/test_properties.py",
]


@dataclass(frozen=True)
class Target:
    mutate: list[str]
    tests: list[str]
    # Seconds added to a mutant's recorded test time before it counts as a timeout (None:
    # pyproject.toml's). mutmut records only the tests' call phase, not their fixtures, and
    # limits CPU time: a target whose fixtures do real work in-process needs more.
    timeout_constant: float | None = None


TARGETS = {
    "requirements": Target(
        ["scheduler_svc/core/requirements.py"],
        [
            "tests/scheduler_svc/core/test_requirements.py",
            "tests/scheduler_svc/core/test_requirements_reading.py",
            "tests/scheduler_svc/core/test_requirement_oracle.py",
            "tests/scheduler_svc/core/test_solver.py",
            "tests/scheduler_svc/core/test_karpenter_parity.py",
        ],
    ),
    "allocatable": Target(["actuator_svc/core/allocatable.py"], ["tests/actuator_svc/core"]),
    "unavailable_offerings": Target(
        ["actuator_svc/core/unavailable_offerings.py"],
        [
            "tests/actuator_svc/core",
            "tests/actuator_svc/test_launcher.py",
            "tests/actuator_svc/test_launcher_http.py",
        ],
        timeout_constant=30.0,  # the launcher's HTTP tests start the emulator, as below
    ),
    "launcher": Target(
        ["actuator_svc/launcher.py"],
        [
            "tests/actuator_svc/test_launcher.py",
            "tests/actuator_svc/test_launcher_http.py",
            "tests/actuator_svc/test_subnet_addresses.py",
            "tests/actuator_svc/test_capacity_reservations.py",
            "tests/actuator_svc/test_launch_templates.py",
        ],
        # Each test module starts the EC2 emulator (moto) in-process and fetches the catalog
        # through it: about 60 s of CPU that no recorded test time shows. With the default
        # 4 s every surviving mutant of launch() "timed out" and counted as detected.
        timeout_constant=30.0,
    ),
    "solver": Target(
        [
            "scheduler_svc/core/solver*.py",
            "scheduler_svc/core/instance_fit.py",
            "scheduler_svc/core/topology.py",
            "scheduler_svc/core/pricing.py",
            "scheduler_svc/core/packing.py",
            "scheduler_svc/core/repacking.py",
        ],
        SOLVER_CORE_TESTS,
        # With 4 s, mutants as inert as zip(strict=True) -> strict=False "timed out".
        timeout_constant=30.0,
    ),
    "disruption": Target(
        ["scheduler_svc/core/disruption/*"], ["tests/scheduler_svc/core/disruption"]
    ),
}


def _pyproject_for(target: Target) -> str:
    """The repository's pyproject.toml with ``[tool.mutmut]`` narrowed to ``target``, and
    pytest loading ``bench.mutation_order`` (fastest tests first). The plugin goes in pytest's
    ``addopts``, not mutmut's ``pytest_add_cli_args``: a change there makes mutmut drop every
    verdict it has."""
    text = (ROOT / "pyproject.toml").read_text()
    text, added = re.subn(
        r'^addopts = "(.*)"$', rf'addopts = "\1 {ORDER_PLUGIN}"', text, count=1, flags=re.M
    )
    if not added:
        raise RuntimeError("pyproject.toml: no [tool.pytest.ini_options] addopts line")
    base = tomllib.loads(text)["tool"]["mutmut"]
    start = text.index("[tool.mutmut]")
    following = text.find("\n[", start + 1)
    rest = "" if following < 0 else text[following:]
    settings = {
        **base,
        "only_mutate": target.mutate,
        "pytest_add_cli_args_test_selection": target.tests,
    }
    if target.timeout_constant is not None:
        settings["timeout_constant"] = target.timeout_constant
    # JSON strings and arrays of strings are valid TOML values.
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return text[:start] + "[tool.mutmut]\n" + "\n".join(lines) + "\n" + rest


def _prepare(name: str, target: Target) -> Path:
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    for entry in [*config["source_paths"], *config["also_copy"], "tests", "uv.lock"]:
        link = work / entry
        if not link.is_symlink():
            link.symlink_to(ROOT / entry)
    (work / "pyproject.toml").write_text(_pyproject_for(target))
    return work


def _mutated_modules(mutants: Path) -> list[Path]:
    """mutmut's ``.meta`` files of the mutated code (not the copies of ``bench/`` it makes,
    which hold the kept results)."""
    return sorted(meta for top in SOURCE_PATHS for meta in (mutants / top).rglob("*.py.meta"))


def restore_results(name: str, work: Path, results: Path = RESULTS) -> None:
    """Put the kept verdicts of ``name`` where mutmut reads them (a module mutmut has results
    for already is left alone)."""
    for kept in sorted((results / name).rglob("*.py.meta")):
        meta = work / "mutants" / kept.relative_to(results / name)
        if meta.exists():
            continue
        meta.parent.mkdir(parents=True, exist_ok=True)
        verdicts = json.loads(kept.read_text())
        meta.write_text(
            json.dumps(
                {
                    **verdicts,
                    "type_check_error_by_key": {},
                    "durations_by_key": {},
                    "estimated_durations_by_key": {},
                }
            )
        )


def save_results(name: str, work: Path, results: Path = RESULTS) -> None:
    """Keep the verdicts and function hashes of ``name``'s run (timings left out: they are
    this machine's), one mutant per line so that a change reads as the verdicts it changed."""
    for meta in _mutated_modules(work / "mutants"):
        data = json.loads(meta.read_text())
        kept = results / name / meta.relative_to(work / "mutants")
        kept.parent.mkdir(parents=True, exist_ok=True)
        verdicts = {
            "exit_code_by_key": dict(sorted(data["exit_code_by_key"].items())),
            "hash_by_function_name": dict(sorted(data["hash_by_function_name"].items())),
        }
        kept.write_text(json.dumps(verdicts, indent=0, ensure_ascii=False) + "\n")


def mark_survivors_unchecked(
    work: Path, equivalents: dict[str, str], statuses: frozenset[str] = RECHECKED
) -> int:
    """Set every mutant of ``statuses`` (missed or timed out) not in ``equivalents`` back to
    unchecked and remove mutmut's test map (``mutmut-stats.json``): mutmut runs only the
    tests it mapped at the start of a run, so a test written since would not run against the
    survivors it kills. Returns how many mutants were marked."""
    marked = 0
    for meta in _mutated_modules(work / "mutants"):
        data = json.loads(meta.read_text())
        codes: dict[str, int | None] = data["exit_code_by_key"]
        for key, code in codes.items():
            if status_by_exit_code[code] in statuses and key not in equivalents:
                codes[key] = None
                marked += 1
        meta.write_text(json.dumps(data))
    (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    return marked


def run(name: str, recheck: bool = False) -> int:
    work = _prepare(name, TARGETS[name])
    restore_results(name, work)
    if recheck:
        marked = mark_survivors_unchecked(work, equivalent_mutants())
        print(f"{name}: {marked} survivors to check again")
    mutmut = Path(sys.executable).with_name("mutmut")
    try:
        code = subprocess.call([str(mutmut), "run"], cwd=work, env={**os.environ})
    finally:
        save_results(name, work)
    print_scores(work / "mutants")
    return code


def main() -> None:
    args = sys.argv[1:]
    save_only = "--save" in args
    recheck = "--recheck" in args
    names = [a for a in args if a not in {"--save", "--recheck"}] or list(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        sys.exit(f"unknown target(s) {unknown}; known: {', '.join(TARGETS)}")
    if save_only:
        for name in names:
            save_results(name, WORK / name)
            print_scores(WORK / name / "mutants")
        return
    sys.exit(max(run(name, recheck) for name in names))


if __name__ == "__main__":
    main()
