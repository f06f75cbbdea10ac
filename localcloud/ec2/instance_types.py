"""Instance type facts the emulator (and the offline catalog) read from bundled data.

moto ships AWS's DescribeInstanceTypes output and the per-zone instance type offerings of every
region; the on-demand prices come from the project's shared price list, which the actuator owns
(`actuator_svc/data/ec2-on-demand-prices.json`). All three are read once and cached: they are
immutable package data.
"""

from __future__ import annotations

import ast
import functools
import gzip
import importlib.util
import json
from importlib import resources
from pathlib import Path
from typing import Any, cast


@functools.cache
def _moto_ec2_resources() -> Path:
    """moto's ec2/resources directory, found without importing moto (`import moto` takes
    seconds, and `daiku plan`/`daiku catalog` only read its data files)."""
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("moto is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def _read_moto_json_gz(relative_path: str) -> Any:
    with gzip.open(_moto_ec2_resources() / relative_path) as unzipped:
        return json.load(unzipped)


@functools.cache
def describe_instance_types() -> dict[str, dict[str, Any]]:
    """Every instance type moto knows, by name, each shaped like a DescribeInstanceTypes item."""
    return cast("dict[str, dict[str, Any]]", _read_moto_json_gz("instance_types.json.gz"))


@functools.cache
def instance_type_zones(region: str) -> dict[str, list[str]]:
    """Instance type name -> sorted availability zones of `region` that offer it."""
    try:
        offerings = _read_moto_json_gz(
            f"instance_type_offerings/availability-zone/{region}.json.gz"
        )
    except FileNotFoundError as error:
        raise ValueError(
            f"region {region!r} has no instance type offerings in moto's data"
        ) from error
    zones: dict[str, set[str]] = {}
    for offering in offerings:
        zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return {name: sorted(locations) for name, locations in sorted(zones.items())}


@functools.cache
def zone_ids(region: str) -> dict[str, str]:
    """Zone name -> zone id (``us-east-1a`` -> ``use1-az6``) as the emulator reports them
    (DescribeAvailabilityZones, subnets' AvailabilityZoneId): moto's zone table, read from its
    source without importing moto (empty for a region it does not list)."""
    source = _moto_ec2_resources().parent / "models" / "availability_zones_and_regions.py"
    ids: dict[str, str] = {}
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Zone":
            fields = {
                k.arg: k.value.value
                for k in node.keywords
                if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
            }
            if fields.get("region_name") == region and "name" in fields and "zone_id" in fields:
                ids[fields["name"]] = fields["zone_id"]
    return ids


@functools.cache
def _price_document() -> dict[str, Any]:
    resource = resources.files("actuator_svc") / "data" / "ec2-on-demand-prices.json"
    return cast("dict[str, Any]", json.loads(resource.read_text(encoding="utf-8")))


def priced_regions() -> list[str]:
    """The regions the shared on-demand price list covers, sorted."""
    return sorted(_price_document()["regions"])


def on_demand_prices(region: str) -> dict[str, float]:
    """Instance type name -> Linux on-demand hourly USD price in `region` (the shared list)."""
    regions = _price_document()["regions"]
    if region not in regions:
        raise ValueError(f"region {region!r} is not in the on-demand price list")
    return {name: float(price) for name, price in regions[region].items()}


# The shared list may hold only some regions; the emulator prices the others like this one.
FALLBACK_PRICE_REGION = "us-east-1"


def emulated_on_demand_prices(region: str) -> dict[str, float]:
    """`on_demand_prices(region)`, or those of FALLBACK_PRICE_REGION when the list lacks `region`.

    Only the emulator uses this: it must price every region it serves, real or not.
    """
    try:
        return on_demand_prices(region)
    except ValueError:
        return on_demand_prices(FALLBACK_PRICE_REGION)
