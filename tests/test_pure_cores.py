"""The pure cores read no clock and no environment: what import-linter cannot see (it checks
modules; `datetime` stays importable for its types, and builtins need no import) is checked
here on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORES = ("scheduler_svc/core", "actuator_svc/core")
CLOCK_READS = {"now", "utcnow", "today"}
# Builtins that read or write the world outside the arguments (files, the terminal) or import
# a module by name behind import-linter's back.
WORLD_BUILTINS = {"open", "input", "print", "breakpoint", "__import__", "exec", "eval"}


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


def world_calls(source: str) -> list[int]:
    """Lines calling one of WORLD_BUILTINS by its bare name."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in WORLD_BUILTINS
    ]


def test_the_check_sees_a_file_read() -> None:
    """`open(...)` and `__import__("os")` are found; a method named open is not."""
    assert world_calls("def f(p):\n    return open(p).read()\n") == [2]
    assert world_calls("e = __import__('os').environ\n") == [1]
    assert world_calls("def f(door):\n    return door.open()\n") == []


@pytest.mark.parametrize("core", CORES)
def test_no_core_module_reads_files_or_the_terminal(core: str) -> None:
    """No module of a pure core opens a file, prints, reads input or imports by name: what it
    needs comes in as arguments and goes out as results."""
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / core).rglob("*.py"))
        if (lines := world_calls(path.read_text(encoding="utf-8")))
    }
    assert found == {}
