"""The `daiku` command: one Typer app; each subcommand lives in its own module.

Subcommand modules register themselves here with one line each, so that adding a command
never touches another command's module.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="daiku",
    help="daiku (大工): a just-in-time node autoscaler for Kubernetes on AWS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """daiku (大工): a just-in-time node autoscaler for Kubernetes on AWS."""


# Subcommand registrations (one line each; keep alphabetical):
from daiku_cli import catalog as _catalog  # noqa: E402, F401  (daiku catalog)
from daiku_cli import convert as _convert  # noqa: E402, F401  (daiku convert)
from daiku_cli import explain as _explain  # noqa: E402, F401  (daiku explain)
from daiku_cli import plan as _plan  # noqa: E402, F401  (daiku plan)
from daiku_cli import up as _up  # noqa: E402, F401  (daiku up)
