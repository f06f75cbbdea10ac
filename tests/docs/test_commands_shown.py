"""The commands the README and docs show work as written after the README's two set-up commands.

`make up` / `make test` install the locked environment into `.venv/` (uv itself goes to `.tools/`,
which is not on PATH), so every other command is shown as `.venv/bin/daiku …` or
`.venv/bin/python -m …`.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOWN_IN = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "deploy" / "README.md",
]
DAIKU = Path(sys.executable).parent / "daiku"


def _text() -> str:
    return "\n".join(path.read_text() for path in SHOWN_IN if path.exists())


def _daiku_subcommands() -> set[str]:
    return set(re.findall(r"\.venv/bin/daiku ([a-z][a-z-]*)", _text()))


def _python_modules() -> set[str]:
    return set(re.findall(r"\.venv/bin/python -m ([A-Za-z_][\w.]*)", _text()))


def test_no_command_needs_uv_on_path() -> None:
    """No shown command starts with `uv run`: uv is installed into .tools/, not on PATH."""
    offending = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SHOWN_IN
        if path.exists()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"(^|[`\s])uv run ", line)
    ]
    assert offending == []


def test_the_docs_show_daiku_and_python_commands() -> None:
    """The docs do show commands of both kinds, so the two checks below check something."""
    assert {"up", "plan", "catalog", "convert"} <= _daiku_subcommands()
    assert "bench.scheduling" in _python_modules()


@pytest.mark.parametrize("subcommand", sorted(_daiku_subcommands()))
def test_every_daiku_subcommand_shown_exists(subcommand: str) -> None:
    """Each `.venv/bin/daiku SUB` shown in the docs is a real subcommand (its --help exits 0)."""
    done = subprocess.run(
        [str(DAIKU), subcommand, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", sorted(_python_modules()))
def test_every_python_module_shown_exists(module: str) -> None:
    """Each `.venv/bin/python -m MODULE` shown in the docs names a module that can be run."""
    assert importlib.util.find_spec(module) is not None
