"""`daiku catalog`: the instance-type catalog a scheduler plans with, offline.

The document has one entry per current-generation instance type that has a price: capacity
(what the node reports, VM overhead removed), allocatable (FACTS §1) as Kubernetes quantity
strings, the labels NodePools select on, and every offering (zone x capacity type) with its
price. It is built from moto's DescribeInstanceTypes data, the bundled on-demand prices and the
emulator's deterministic spot prices, by the same pure builder the actuator's ListInstanceTypes
uses (`actuator_svc.core.catalog`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

import typer

from actuator_svc.core.allocatable import NodeResources
from actuator_svc.core.catalog import CatalogInstanceType, build_catalog
from actuator_svc.core.quantities import format_bytes, format_cpu
from daiku_cli import exit_codes
from daiku_cli.main import DaikuCommand, app
from localcloud.ec2.instance_types import (
    describe_instance_types,
    instance_type_zones,
    on_demand_prices,
    priced_regions,
    zone_ids,
)
from localcloud.ec2.spot_prices import spot_price


def resources_document(resources: NodeResources) -> dict[str, str]:
    """Resources as Kubernetes quantity strings ("2", "7577Mi", "29", "20Gi", extended)."""
    return {
        "cpu": format_cpu(resources.cpu_millis),
        "memory": format_bytes(resources.memory_bytes),
        "pods": str(resources.pods),
        "ephemeral-storage": format_bytes(resources.ephemeral_storage_bytes),
        **{name: str(count) for name, count in sorted(resources.extended.items())},
    }


def instance_type_document(
    item: CatalogInstanceType, zone_ids: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One catalog entry as JSON-ready data (offerings carry their zone's id, ``zoneID``, when
    ``zone_ids`` knows it)."""
    ids = zone_ids or {}
    return {
        "name": item.name,
        "capacity": resources_document(item.capacity),
        "allocatable": resources_document(item.allocatable),
        "labels": dict(sorted(item.labels.items())),
        "offerings": [
            {
                "zone": o.key.zone,
                **({"zoneID": ids[o.key.zone]} if o.key.zone in ids else {}),
                "capacityType": o.key.capacity_type,
                "price": o.price_per_hour,
                "available": o.available,
            }
            for o in item.offerings
        ],
    }


def bundled_catalog_document(region: str = "us-east-1") -> dict[str, Any]:
    """The catalog document of `region` from bundled data, with no network access.

    ValueError when the region is not in the bundled data."""
    od_prices = on_demand_prices(region)
    zones = instance_type_zones(region)
    spot = {
        (name, zone): spot_price(name, zone, od_prices[name])
        for name, type_zones in zones.items()
        if name in od_prices
        for zone in type_zones
    }
    types, _problems = build_catalog(
        descriptions=describe_instance_types(),
        zones=zones,
        on_demand_prices=od_prices,
        spot_prices=spot,
        unavailable={},
        current_generation_only=True,
    )
    ids = zone_ids(region)
    return {"instanceTypes": [instance_type_document(t, ids) for t in types]}


# Sizes in the order EC2 grows them; "Nxlarge" sits between xlarge and metal, ordered by N.
_SIZE_RANKS = {"nano": 0, "micro": 1, "small": 2, "medium": 3, "large": 4, "xlarge": 5}
_XLARGE_RANK, _METAL_RANK, _UNKNOWN_RANK = 5, 6, 7
_MULTIPLE_XLARGE = re.compile(r"(\d+)xlarge")
_SIZED_METAL = re.compile(r"metal(?:-(\d+)xl)?")
_DIGITS = re.compile(r"(\d+)")


def natural_order_key(name: str) -> tuple[tuple[str | int, ...], int, int, str]:
    """Sort key putting c5.2xlarge before c5.12xlarge and nano < micro < … < xlarge <
    2xlarge < … < metal within a family; families in natural order (c5 < c5a < c6g)."""
    family, _, size = name.partition(".")
    family_key = tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(family))
    if size in _SIZE_RANKS:
        return family_key, _SIZE_RANKS[size], 1, size
    if multiple := _MULTIPLE_XLARGE.fullmatch(size):
        return family_key, _XLARGE_RANK, int(multiple.group(1)), size
    if metal := _SIZED_METAL.fullmatch(size):
        return family_key, _METAL_RANK, int(metal.group(1) or 0), size
    return family_key, _UNKNOWN_RANK, 0, size


class OutputFormat(StrEnum):
    """How the catalog is printed."""

    json = "json"
    table = "table"


def _table(document: dict[str, Any]) -> str:
    header = f"{'NAME':<22}{'CPU':>6}{'MEMORY':>12}{'PODS':>6}{'ALLOC CPU':>11}"
    header += f"{'ALLOC MEMORY':>14}{'OD $/H':>10}{'SPOT MIN $/H':>14}"
    if any("overlays" in item for item in document["instanceTypes"]):
        header += "  OVERLAYS"
    lines = [header]
    for item in document["instanceTypes"]:
        prices: dict[str, list[float]] = {"on-demand": [], "spot": []}
        for offering in item["offerings"]:
            prices.setdefault(offering["capacityType"], []).append(offering["price"])
        od = f"{min(prices['on-demand']):.4f}" if prices["on-demand"] else "-"
        spot = f"{min(prices['spot']):.4f}" if prices["spot"] else "-"
        capacity, allocatable = item["capacity"], item["allocatable"]
        lines.append(
            f"{item['name']:<22}{capacity['cpu']:>6}{capacity['memory']:>12}"
            f"{capacity['pods']:>6}{allocatable['cpu']:>11}{allocatable['memory']:>14}"
            f"{od:>10}{spot:>14}  {','.join(item.get('overlays', []))}".rstrip()
        )
    return "\n".join(lines)


def _with_overlays(document: dict[str, Any], filenames: list[str]) -> dict[str, Any]:
    from daiku_cli.overlays import overlay_catalog_document
    from daiku_cli.plan import PlanInputError, instance_types_from_document, read_overlays

    try:
        overlays = read_overlays(filenames)
    except PlanInputError as exc:
        typer.echo(f"daiku catalog: {exc}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from None
    base = instance_types_from_document(document, "catalog")
    return overlay_catalog_document(document, base, overlays)


@app.command(name="catalog", cls=DaikuCommand)
def catalog(
    region: Annotated[str, typer.Option("--region", help="AWS region.")] = "us-east-1",
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="json or table.")
    ] = OutputFormat.json,
    filenames: Annotated[
        list[str] | None,
        typer.Option(
            "--filename",
            "-f",
            help="Manifests whose NodeOverlays are applied (repeatable; other kinds ignored).",
        ),
    ] = None,
) -> None:
    """Print the instance-type catalog (capacity, allocatable, labels, offerings), offline,
    sizes in natural order (c5.large, c5.xlarge, c5.2xlarge, …, c5.metal); with -f, as the
    NodeOverlays in those files change it."""
    if region not in (regions := priced_regions()):
        typer.echo(
            f"daiku catalog: no bundled data for region {region!r}; "
            f"the bundled catalog has: {', '.join(regions)}",
            err=True,
        )
        raise typer.Exit(exit_codes.BAD_INPUT)
    try:
        document = bundled_catalog_document(region)
    except ValueError as exc:
        typer.echo(f"daiku catalog: {exc}", err=True)
        raise typer.Exit(exit_codes.BAD_INPUT) from exc
    document["instanceTypes"].sort(key=lambda item: natural_order_key(item["name"]))
    if filenames:
        document = _with_overlays(document, filenames)
    typer.echo(json.dumps(document, indent=2) if output is OutputFormat.json else _table(document))
