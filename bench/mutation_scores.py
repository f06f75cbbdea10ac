"""Print mutmut's result per module: mutants killed / checked and the score, from the
``mutants/**/*.py.meta`` files ``mutmut run`` leaves (``make mutation`` runs both).

A mutant counts as detected when the tests failed (killed), timed out or crashed; "no tests"
and "survived" count as missed. Run from the repository root."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
MISSED = {"survived", "no tests"}


def main() -> None:
    rows = []
    for meta in sorted(Path("mutants").rglob("*.py.meta")):
        exit_codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        statuses = Counter(status_by_exit_code[code] for code in exit_codes.values())
        detected = sum(statuses[s] for s in DETECTED)
        checked = detected + sum(statuses[s] for s in MISSED)
        if checked:
            module = str(meta.relative_to("mutants")).removesuffix(".meta")
            rows.append((module, detected, checked, statuses["not checked"]))
    print(f"{'module':<48} {'detected':>8} {'checked':>8} {'score':>7} {'unchecked':>9}")
    for module, detected, checked, unchecked in rows:
        print(f"{module:<48} {detected:>8} {checked:>8} {detected / checked:>7.1%} {unchecked:>9}")


if __name__ == "__main__":
    main()
