"""`daiku convert`: Karpenter manifests in, daiku manifests out (the logic is daiku_cli.conversion).

Reads one YAML or JSON file (several documents allowed; `-` reads standard input), writes the
converted objects to standard output and one line per field it could not carry to standard
error. Exit status (`daiku_cli.exit_codes`): 0 when converted (even with warnings), 2 when the
input cannot be read or converted; the error names the file, object and field.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from daiku_cli import exit_codes
from daiku_cli.conversion import ConversionError
from daiku_cli.conversion import convert as convert_documents
from daiku_cli.main import DaikuCommand, app


class OutputFormat(StrEnum):
    """How the converted objects are written."""

    yaml = "yaml"
    json = "json"


@app.command(name="convert", cls=DaikuCommand)
def convert(
    filename: Annotated[
        str,
        typer.Option(
            "--filename",
            "-f",
            help="Karpenter manifest (YAML or JSON, several documents allowed); - for stdin.",
        ),
    ],
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Output format.")
    ] = OutputFormat.yaml,
    cluster_name: Annotated[
        str | None,
        typer.Option(
            "--cluster-name",
            help="Cluster name for generated EC2NodeClasses whose source has no subnet or "
            "security group selector or node role (karpenter.sh/discovery tag, "
            "KarpenterNodeRole-<name>).",
        ),
    ] = None,
) -> None:
    """Convert Karpenter manifests (v1, v1beta1, v1alpha5) into daiku.dev/v1 objects.

    Karpenter v1/v1beta1 NodePools and EC2NodeClasses and v1alpha5 Provisioners and
    AWSNodeTemplates are converted; a warning on stderr names every field that is not carried.
    """
    try:
        text = sys.stdin.read() if filename == "-" else Path(filename).read_text(encoding="utf-8")
    except OSError as error:
        typer.echo(f"error: {filename}: {error.strerror}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from error
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        typer.echo(f"error: {filename}: not valid YAML or JSON: {error}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from error
    try:
        result = convert_documents(documents, cluster_name=cluster_name)
    except ConversionError as error:
        typer.echo(f"error: {filename}: {error}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from error
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(_render(list(result.objects), output), nl=False)


def _render(objects: list[dict[str, Any]], output: OutputFormat) -> str:
    if output is OutputFormat.json:
        # Several objects become a v1 List, as `kubectl get -o json` prints them.
        document: Any = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump_all(objects, sort_keys=False, allow_unicode=True, explicit_start=True)
