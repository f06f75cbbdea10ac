"""The pure cores read no clock: what import-linter cannot see (it checks modules, and
`datetime` stays importable for its types) is checked here on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORES = ("scheduler_svc/core", "actuator_svc/core")
CLOCK_READS = {"now", "utcnow", "today"}


def clock_reads(source: str) -> list[int]:
    """Lines calling `<anything>.now()`, `.utcnow()` or `.today()`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCK_READS
    ]


def test_the_check_sees_a_clock_read() -> None:
    """`datetime.now(UTC)` and `date.today()` are found (so the scan below can fail)."""
    assert clock_reads("from datetime import UTC, date, datetime\nx = datetime.now(UTC)\n") == [2]
    assert clock_reads("import datetime\ny = datetime.date.today()\n") == [2]
    assert clock_reads("def f(now):\n    return now\n") == []


@pytest.mark.parametrize("core", CORES)
def test_no_core_module_reads_the_clock(core: str) -> None:
    """No module of a pure core calls now(), utcnow() or today(): `now` is an argument."""
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / core).rglob("*.py"))
        if (lines := clock_reads(path.read_text(encoding="utf-8")))
    }
    assert found == {}
