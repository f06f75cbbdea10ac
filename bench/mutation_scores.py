"""Print mutmut's result per module: mutants detected / checked and the score, from the
``mutants/**/*.py.meta`` files ``mutmut run`` leaves (``make mutation`` runs both).

A mutant counts as detected when the tests failed (killed), timed out or crashed; "no tests"
and "survived" count as missed. Mutants listed in ``bench/mutation_equivalents/<module>.toml``
behave exactly as the original code (no test could tell them apart), so they are left out of
the score and counted in the ``equivalent`` column. Run from the repository root.

One module at a time, e.g.::

    nice mutmut run "scheduler_svc.core.requirements.*" && python -m bench.mutation_scores
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
MISSED = {"survived", "no tests"}
# One file per module (``scheduler_svc.core.packing.toml``), so work on two modules never
# edits the same file.
EQUIVALENTS_DIR = Path(__file__).with_name("mutation_equivalents")


def equivalent_mutants(directory: Path = EQUIVALENTS_DIR) -> dict[str, str]:
    """Mutant name -> why it behaves as the original (one line)."""
    table: dict[str, str] = {}
    for path in sorted(directory.glob("*.toml")):
        table.update(tomllib.loads(path.read_text())["equivalent"])
    return table


def score_rows(
    root: Path, equivalents: dict[str, str]
) -> list[tuple[str, int, int, int, int, int]]:
    """(module, detected, checked, timeouts, equivalent, unchecked) for every module with
    checked mutants; ``checked`` leaves the equivalent mutants out, ``detected`` counts the
    timeouts (on a busy machine a slow survivor can time out: the column shows how many)."""
    rows = []
    # Only the mutated code: mutmut's copy of bench/ holds the kept results (mutation_run.py).
    for meta in sorted(
        m for m in root.rglob("*.py.meta") if m.relative_to(root).parts[0] != "bench"
    ):
        exit_codes: dict[str, int | None] = json.loads(meta.read_text()).get("exit_code_by_key", {})
        statuses: Counter[str] = Counter()
        equivalent = 0
        for name, code in exit_codes.items():
            status = status_by_exit_code[code]
            if name in equivalents and status != "not checked":
                equivalent += 1
                continue
            statuses[status] += 1
        detected = sum(statuses[s] for s in DETECTED)
        checked = detected + sum(statuses[s] for s in MISSED)
        if checked:
            module = str(meta.relative_to(root)).removesuffix(".meta")
            timeouts = statuses["timeout"]
            rows.append((module, detected, checked, timeouts, equivalent, statuses["not checked"]))
    return rows


def print_scores(root: Path) -> None:
    """One line per module with checked mutants under ``root`` (a ``mutants`` directory)."""
    rows = score_rows(root, equivalent_mutants())
    print(
        f"{'module':<48} {'detected':>8} {'checked':>8} {'score':>7} {'timeouts':>8} "
        f"{'equivalent':>10} {'unchecked':>9}"
    )
    for module, detected, checked, timeouts, equivalent, unchecked in rows:
        print(
            f"{module:<48} {detected:>8} {checked:>8} {detected / checked:>7.1%} {timeouts:>8} "
            f"{equivalent:>10} {unchecked:>9}"
        )


def main() -> None:
    print_scores(Path("mutants"))


if __name__ == "__main__":
    main()
