"""`daiku plan` starts fast: it imports neither other commands' libraries nor the I/O stack."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY_MODULES = ("aiohttp", "moto", "grpc", "structlog", "botocore")


def _modules_loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    probe = f"{statement}; import json, sys; print(json.dumps(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(completed.stdout))


def _packages(modules: set[str]) -> set[str]:
    return {name.partition(".")[0] for name in modules}


def test_importing_plan_loads_no_io_or_other_command_libraries() -> None:
    """`daiku plan`'s modules (with `daiku_cli.catalog`, which it reads the bundled catalog
    through) load no aiohttp, moto, gRPC, structlog or botocore: those belong to the API
    client, the EC2 emulator, `explain` and `up`."""
    loaded = _packages(_modules_loaded_by("import daiku_cli.plan, daiku_cli.catalog"))

    assert "daiku_cli" in loaded
    assert loaded.isdisjoint(HEAVY_MODULES), sorted(loaded & set(HEAVY_MODULES))


def test_resolving_the_plan_command_imports_only_plan() -> None:
    """Resolving `daiku plan` through the root group imports `daiku_cli.plan` and no other
    subcommand module."""
    probe = (
        "import typer; from daiku_cli.main import app; "
        "group = typer.main.get_command(app); "
        "assert group.get_command(group.make_context('daiku', ['plan', '--help'], "
        "resilient_parsing=True), 'plan') is not None"
    )
    loaded = _modules_loaded_by(probe)

    assert "daiku_cli.plan" in loaded
    others = {"daiku_cli.catalog", "daiku_cli.convert", "daiku_cli.explain", "daiku_cli.up"}
    assert loaded.isdisjoint(others), sorted(loaded & others)
    assert _packages(loaded).isdisjoint(HEAVY_MODULES)


def test_root_help_imports_no_subcommand() -> None:
    """`daiku --help` lists every command without importing their modules (importing them all
    took about 2 s)."""
    probe = (
        "import contextlib, io; from daiku_cli.main import app; "
        "out = io.StringIO(); ctx = contextlib.redirect_stdout(out); ctx.__enter__(); "
        "app(['--help'], standalone_mode=False); ctx.__exit__(None, None, None); "
        "assert all(n in out.getvalue() for n in ('catalog', 'convert', 'explain', 'plan', 'up'))"
    )
    loaded = _modules_loaded_by(probe)

    subcommands = {"daiku_cli.catalog", "daiku_cli.convert", "daiku_cli.explain"}
    assert loaded.isdisjoint(subcommands | {"daiku_cli.plan", "daiku_cli.up"})
    assert _packages(loaded).isdisjoint(HEAVY_MODULES)


def test_the_help_listed_for_each_command_is_its_docstrings_first_sentence() -> None:
    """The help lines `daiku --help` shows without importing match the commands' own help."""
    import typer

    from daiku_cli.main import SUBCOMMAND_HELP, SUBCOMMAND_MODULES, LazyCommandGroup, app

    group = typer.main.get_command(app)
    assert isinstance(group, LazyCommandGroup)
    context = group.make_context("daiku", ["plan", "--help"], resilient_parsing=True)
    assert set(SUBCOMMAND_HELP) == set(SUBCOMMAND_MODULES)
    for name, listed in SUBCOMMAND_HELP.items():
        command = group.get_command(context, name)
        assert command is not None
        assert " ".join((command.help or "").split()).startswith(listed), name
