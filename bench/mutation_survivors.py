"""The mutants a target's run left alive, with their diffs, and a quick check of new tests
against them (without a whole ``mutmut run``).

    python -m bench.mutation_survivors list solver                      # every survivor
    python -m bench.mutation_survivors list solver scheduler_svc/core/topology.py
    python -m bench.mutation_survivors check solver tests/scheduler_svc/core/test_x.py NAME...

``list`` prints each surviving (or untested) mutant that is not listed as equivalent, with
``mutmut show``'s diff. ``check`` copies the test files into the target's ``mutants/`` tree and
runs them once per named mutant with that mutant switched on (mutmut's ``MUTANT_UNDER_TEST``),
printing ``killed`` or ``ALIVE`` for each; ``mutmut run NAME...`` in ``.mutation/<target>/``
then records the verdicts. Do not ``check`` a test that fails on the code a running
``mutmut run`` copied (one written for a fix made since): the copy lands in the tree that run
reads, and a test it already maps to a function would then kill every later mutant of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mutmut.stats import status_by_exit_code

from bench.mutation_scores import MISSED, equivalent_mutants

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"


def survivors(target: str, module: str | None = None) -> list[str]:
    """Names of the mutants of ``target`` (of ``module`` when given) that no test detected."""
    mutants = WORK / target / "mutants"
    pattern = f"{module}.meta" if module else "**/*.py.meta"
    equivalents = equivalent_mutants()
    names = []
    for meta in sorted(mutants.glob(pattern)):
        if meta.relative_to(mutants).parts[0] == "bench":
            continue
        codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        names += [
            name
            for name, code in sorted(codes.items())
            if status_by_exit_code[code] in MISSED and name not in equivalents
        ]
    return names


def show(target: str, name: str) -> str:
    mutmut = Path(sys.executable).with_name("mutmut")
    shown = subprocess.run(
        [str(mutmut), "show", name], cwd=WORK / target, capture_output=True, text=True, check=False
    )
    return "\n".join(line for line in shown.stdout.splitlines() if line[:1] in {"-", "+", "@"})


def _run(mutants: Path, tests: list[str], mutant: str | None) -> subprocess.CompletedProcess[str]:
    """``tests`` run in the ``mutants`` tree with ``mutant`` switched on (None: none is)."""
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    if mutant is not None:
        env["MUTANT_UNDER_TEST"] = mutant
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=mutants,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def check(target: str, tests: list[str], names: list[str]) -> None:
    """Print whether ``tests`` kill each mutant of ``names``; exits first when they fail with
    no mutant switched on (a helper they import newer than the tree's copy, say): every mutant
    would look killed."""
    mutants = WORK / target / "mutants"
    for test in tests:
        copy = mutants / test
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / test, copy)
    baseline = _run(mutants, tests, None)
    if baseline.returncode != 0:
        sys.exit(
            f"the tests fail in {mutants} with no mutant switched on, so they would kill every "
            f"mutant (copy what they import there too):\n{baseline.stdout[-2000:]}"
        )
    for name in names:
        ran = _run(mutants, tests, name)
        print(f"{'killed' if ran.returncode != 0 else 'ALIVE '} {name}")


def main() -> None:
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "list":
        for name in survivors(args[1], args[2] if len(args) > 2 else None):
            print(f"## {name}\n{show(args[1], name)}\n")
    elif len(args) >= 4 and args[0] == "check":
        tests = [a for a in args[2:] if a.endswith(".py") or "::" in a]
        check(args[1], tests, [a for a in args[2:] if a not in tests])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
