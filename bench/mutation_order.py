"""A pytest plugin for mutation runs only (bench/mutation_run.py loads it with ``-p``): run the
tests mutmut gave a mutant fastest first.

mutmut runs a mutant's tests with ``-x`` in the order of a set, so a killed mutant often waits
for the slowest tests of its module (the disruption waves tests take seconds each) before a
fast one fails. Sorted by the durations mutmut recorded (``mutmut-stats.json`` in the working
directory; a test it has no duration for counts as instant), the first failing test comes
sooner. The verdicts are the same: a survivor still runs every test, a killed mutant fails
some test either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

STATS = Path("mutmut-stats.json")


def _durations() -> dict[str, float]:
    """Seconds per test id, as mutmut recorded them (empty outside a mutant's run)."""
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", "") or not STATS.is_file():
        return {}
    recorded: dict[str, float] = json.loads(STATS.read_text()).get("duration_by_test", {})
    return recorded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    durations = _durations()
    if durations:
        items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
