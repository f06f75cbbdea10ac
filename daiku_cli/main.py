"""The `daiku` command: one Typer app; each subcommand lives in its own module.

Subcommand modules register themselves on `app` (``@app.command`` or ``app.add_typer``), so
adding a command never touches another command's module. They are imported only when their
command runs (or when help lists them): `daiku plan` must not pay for moto, aiohttp and gRPC,
which other commands need, before it reads a single manifest.
"""

from __future__ import annotations

import importlib

import typer

# Typer vendors its own Click; overriding its group's methods takes its Context and Command.
from typer import _click as click
from typer.core import TyperCommand, TyperGroup, TyperOption

# Subcommand name -> the module that registers it on `app` (keep alphabetical).
SUBCOMMAND_MODULES: dict[str, str] = {
    "catalog": "daiku_cli.catalog",
    "convert": "daiku_cli.convert",
    "explain": "daiku_cli.explain",
    "plan": "daiku_cli.plan",
    "report": "daiku_cli.report",
    "up": "daiku_cli.up",
    "viewer": "daiku_cli.viewer",
}

# What `daiku --help` lists for each subcommand: the start of its docstring, kept
# here so the list needs no import (every module together takes about 2 s to import;
# tests/cli/test_plan_startup.py checks these against the docstrings).
SUBCOMMAND_HELP: dict[str, str] = {
    "catalog": "Print the instance-type catalog (capacity, allocatable, labels, offerings), "
    "offline, sizes in natural order (c5.large, c5.xlarge, c5.2xlarge, …, c5.metal); with -f, "
    "as the NodeOverlays in those files change it.",
    "convert": "Convert Karpenter manifests (v1, v1beta1, v1alpha5) into daiku.dev/v1 objects.",
    "explain": "Explain daiku's decisions.",
    "plan": "Show which NodeClaims daiku would launch for these manifests, and why.",
    "report": "Draw a `daiku up` run (pods, nodes by capacity type, $/h, launches and "
    "disruptions).",
    "up": "Run daiku on a local cluster and EC2 emulator and play a scenario (default: inflate "
    "scaled 0 -> 5 -> 20).",
    "viewer": "Watch the cluster's nodes: by NodePool, with cpu/memory bars, prices and pending "
    "pods.",
}


def without_flag_types(params: list[click.Parameter]) -> list[click.Parameter]:
    """The parameters with no ``<bool>`` shown after plain flags in help.

    A flag takes no value, so it has no type to show, but Typer's rich help prints every option's
    type. An empty metavar is how a parameter says "nothing to show" there; Click uses a flag's
    metavar nowhere else.
    """
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    return params


class DaikuCommand(TyperCommand):
    """Every daiku subcommand's class (``@app.command(cls=DaikuCommand)``): no flag types."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return without_flag_types(super().get_params(ctx))


class DaikuGroup(TyperGroup):
    """A group of subcommands (``typer.Typer(cls=DaikuGroup)``): help without flag types."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return without_flag_types(super().get_params(ctx))


class LazyCommandGroup(DaikuGroup):
    """The root group: imports a subcommand's module the first time that command is asked for;
    the root's help lists every command from ``SUBCOMMAND_HELP`` without importing any."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(SUBCOMMAND_MODULES) | set(self.commands))

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if self._listing and cmd_name not in self.commands and cmd_name in SUBCOMMAND_HELP:
            # A stand-in that only carries the help line: running the command resolves it again.
            return TyperCommand(cmd_name, short_help=SUBCOMMAND_HELP[cmd_name])
        if cmd_name not in self.commands and cmd_name in SUBCOMMAND_MODULES:
            importlib.import_module(SUBCOMMAND_MODULES[cmd_name])
            # The module registered on `app`; rebuild the Click group from it to get the command.
            registered = typer.main.get_group(app).commands.get(cmd_name)
            if registered is not None:
                self.add_command(registered, cmd_name)
        return self.commands.get(cmd_name)


app = typer.Typer(
    name="daiku",
    help="daiku (大工): a just-in-time node autoscaler for Kubernetes on AWS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyCommandGroup,
)


@app.callback()
def main() -> None:
    """daiku (大工): a just-in-time node autoscaler for Kubernetes on AWS."""
