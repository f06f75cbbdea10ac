"""The live catalog: instance types, zones and prices from the cloud, refreshed periodically.

On-demand prices come from the Pricing API when it answers, else from the bundled price list
(`actuator_svc/data/ec2-on-demand-prices.json`); spot prices from DescribeSpotPriceHistory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import structlog

from actuator_svc.cloud.provider import CloudProvider
from actuator_svc.core.allocatable import DEFAULT_ROOT_VOLUME_BYTES, KubeletSettings
from actuator_svc.core.catalog import CatalogInstanceType, architecture_of, build_catalog
from actuator_svc.core.offerings import RESERVED, RESERVED_PRICE_DIVISOR, SPOT, OfferingKey
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.errors import CloudError

log = structlog.get_logger("actuator_svc.catalog")


def bundled_on_demand_prices(region: str) -> dict[str, float]:
    """The bundled Linux on-demand prices of `region` (empty when the region is not in it)."""
    text = resources.files("actuator_svc").joinpath("data/ec2-on-demand-prices.json").read_text()
    regions: Mapping[str, Mapping[str, float]] = json.loads(text)["regions"]
    return {k: float(v) for k, v in regions.get(region, {}).items()}


@dataclass(frozen=True)
class RefreshIntervals:
    """How often each part of the catalog is fetched again."""

    instance_types_seconds: float = 3600.0
    on_demand_prices_seconds: float = 12 * 3600.0
    spot_prices_seconds: float = 300.0


class Catalog:
    """Cached cloud facts behind ListInstanceTypes and launch pricing."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        region: str,
        unavailable: UnavailableOfferings,
        clock: Callable[[], float],
        intervals: RefreshIntervals | None = None,
    ) -> None:
        self._cloud = cloud
        self._region = region
        self._unavailable = unavailable
        self._clock = clock
        self._intervals = intervals or RefreshIntervals()
        self._descriptions: dict[str, dict[str, Any]] = {}
        self._zones: dict[str, list[str]] = {}
        self._on_demand: dict[str, float] = {}
        self._spot: dict[tuple[str, str], float] = {}
        self._fetched_at: dict[str, float] = {}
        self.on_demand_price_source = ""

    def _stale(self, part: str, interval: float) -> bool:
        fetched = self._fetched_at.get(part)
        return fetched is None or self._clock() - fetched >= interval

    async def refresh(self, *, force: bool = False) -> None:
        """Fetch whatever part is older than its interval (everything when `force`)."""
        now = self._clock()
        if force or self._stale("types", self._intervals.instance_types_seconds):
            self._descriptions = await self._cloud.describe_instance_types()
            self._zones = await self._cloud.instance_type_zones()
            self._fetched_at["types"] = now
        if force or self._stale("on_demand", self._intervals.on_demand_prices_seconds):
            try:
                prices = await self._cloud.on_demand_prices()
                source = "pricing-api"
            except CloudError as exc:
                log.info("on_demand_prices_bundled", reason=str(exc))
                prices, source = {}, ""
            if not prices:
                prices, source = bundled_on_demand_prices(self._region), "bundled"
            self._on_demand, self.on_demand_price_source = prices, source
            self._fetched_at["on_demand"] = now
        if force or self._stale("spot", self._intervals.spot_prices_seconds):
            try:
                self._spot = await self._cloud.spot_prices()
            except CloudError as exc:
                log.warning("spot_prices_unavailable", reason=str(exc))
            self._fetched_at["spot"] = now

    async def _ensure_loaded(self) -> None:
        """Fetch once if never fetched; afterwards `run()` keeps the data fresh off the hot path."""
        if "types" not in self._fetched_at:
            await self.refresh()

    async def run(self, check_every_seconds: float = 60.0) -> None:
        """Refresh stale parts periodically; a failed refresh keeps the old data (logged)."""
        while True:
            await asyncio.sleep(check_every_seconds)
            try:
                await self.refresh()
            except CloudError as exc:
                log.warning("catalog_refresh_failed", error=str(exc))

    async def instance_types(
        self, kubelet: KubeletSettings | None = None, root_volume_bytes: int = 0
    ) -> list[CatalogInstanceType]:
        """The catalog under the given kubelet settings, with current availability."""
        await self._ensure_loaded()
        types, problems = build_catalog(
            descriptions=self._descriptions,
            zones=self._zones,
            on_demand_prices=self._on_demand,
            spot_prices=self._spot,
            unavailable=self._unavailable.active(self._clock()),
            kubelet=kubelet,
            root_volume_bytes=root_volume_bytes or DEFAULT_ROOT_VOLUME_BYTES,
        )
        for problem in problems:
            log.debug("instance_type_skipped", problem=problem)
        return types

    async def architecture(self, instance_type: str) -> str | None:
        """x86_64 or arm64; None for a type the region does not have."""
        await self._ensure_loaded()
        description = self._descriptions.get(instance_type)
        if description is None:
            return None
        try:
            return architecture_of(description)
        except ValueError:
            return None

    def is_offered(self, instance_type: str, zone: str) -> bool:
        """True when EC2 offers the type in the zone (per DescribeInstanceTypeOfferings)."""
        return zone in self._zones.get(instance_type, ())

    def price(self, key: OfferingKey) -> float:
        """USD/hour of an offering (0.0 when unknown)."""
        if key.capacity_type == SPOT:
            return self._spot.get((key.instance_type, key.zone), 0.0)
        if key.capacity_type == RESERVED:
            return self._on_demand.get(key.instance_type, 0.0) / RESERVED_PRICE_DIVISOR
        return self._on_demand.get(key.instance_type, 0.0)
