"""The catalog's inputs from AWS: instance types, their zones, on-demand and spot prices."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from actuator_svc.cloud.aws_calls import AwsCalls
from actuator_svc.errors import CloudUnavailableError


class Ec2CatalogCalls(AwsCalls):
    """DescribeInstanceTypes, DescribeInstanceTypeOfferings, GetProducts and spot price history."""

    async def describe_instance_types(self) -> dict[str, dict[str, Any]]:
        """Every instance type of the region, keyed by name."""
        result: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeInstanceTypes", self._ec2.describe_instance_types, **kwargs
            )
            for item in page.get("InstanceTypes", []):
                result[item["InstanceType"]] = item
            token = page.get("NextToken")
            if not token:
                return result

    async def instance_type_zones(self) -> dict[str, list[str]]:
        """The zones each type is offered in."""
        zones: dict[str, list[str]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"LocationType": "availability-zone", "MaxResults": 1000}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeInstanceTypeOfferings",
                self._ec2.describe_instance_type_offerings,
                **kwargs,
            )
            for item in page.get("InstanceTypeOfferings", []):
                zones.setdefault(item["InstanceType"], []).append(item["Location"])
            token = page.get("NextToken")
            if not token:
                return zones

    async def on_demand_prices(self) -> dict[str, float]:
        """Linux on-demand prices from the Pricing API; CloudUnavailableError when not reachable."""
        if self._pricing is None:
            raise CloudUnavailableError("GetProducts", "NoPricingApi", "no Pricing API configured")
        prices: dict[str, float] = {}
        filters = [
            {"Type": "TERM_MATCH", "Field": k, "Value": v}
            for k, v in {
                "regionCode": self.region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "licenseModel": "No License required",
            }.items()
        ]
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters}
            if token:
                kwargs["NextToken"] = token
            page = await self._call("GetProducts", self._pricing.get_products, **kwargs)
            for text in page.get("PriceList", []):
                product = json.loads(text)
                name = product.get("product", {}).get("attributes", {}).get("instanceType")
                for term in product.get("terms", {}).get("OnDemand", {}).values():
                    for dimension in term.get("priceDimensions", {}).values():
                        usd = float(dimension.get("pricePerUnit", {}).get("USD", 0) or 0)
                        if name and usd > 0:
                            prices[name] = usd
            token = page.get("NextToken")
            if not token:
                return prices

    async def spot_prices(self) -> dict[tuple[str, str], float]:
        """The latest Linux spot price per (type, zone)."""
        latest: dict[tuple[str, str], tuple[datetime, float]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
                "StartTime": datetime.now(tz=UTC),
                "MaxResults": 1000,
            }
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeSpotPriceHistory",
                self._ec2.describe_spot_price_history,
                **kwargs,
            )
            for item in page.get("SpotPriceHistory", []):
                key = (item["InstanceType"], item["AvailabilityZone"])
                stamp = item.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
                if key not in latest or stamp >= latest[key][0]:
                    latest[key] = (stamp, float(item["SpotPrice"]))
            token = page.get("NextToken")
            if not token:
                return {k: price for k, (_, price) in latest.items()}
