"""Every command's help: flags show no value type, options that take a value still do."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from daiku_cli.main import SUBCOMMAND_MODULES, app

COMMANDS = [[], *([name] for name in sorted(SUBCOMMAND_MODULES)), ["explain", "node"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "daiku")
def test_help_shows_no_type_after_a_plain_flag(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=100)

    assert result.exit_code == 0, result.output
    assert "--help" in result.output
    assert "<bool>" not in result.output


def test_options_that_take_a_value_still_show_its_type() -> None:
    result = CliRunner().invoke(app, ["up", "--help"], terminal_width=100)

    flag_line = next(line for line in result.output.splitlines() if "--exit-when-settled" in line)
    valued_line = next(line for line in result.output.splitlines() if "--boot-seconds" in line)
    assert "<" not in flag_line
    assert "<float>" in valued_line
