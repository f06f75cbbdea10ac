"""`daiku report`: a `daiku up --report run.json` file drawn as a self-contained HTML page.

`daiku up --report run.html` draws the same page directly. Exit status (`daiku_cli.exit_codes`):
0 when written, 2 when the input is not a `daiku up` report (the message says why).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from daiku_cli import exit_codes
from daiku_cli.main import DaikuCommand, app
from daiku_cli.scenario.chart import render_html


class ReportError(ValueError):
    """The file is not a `daiku up` JSON report."""


def read_report(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ReportError(f"{path}: {error.strerror or error}") from error
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not JSON: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("timeline"), list):
        raise ReportError(
            f"{path}: not a `daiku up --report` file (no timeline[]; reports written before "
            "daiku recorded timelines cannot be drawn)"
        )
    return document


@app.command(name="report", cls=DaikuCommand)
def report(
    run_json: Annotated[Path, typer.Argument(help="a report written by `daiku up --report`")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the HTML page to write")] = Path(
        "run.html"
    ),
) -> None:
    """Draw a `daiku up` run (pods, nodes by capacity type, $/h, launches and disruptions)."""
    try:
        document = read_report(run_json)
    except ReportError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from error
    output.write_text(render_html(document))
    typer.echo(f"wrote {output}")
