"""Prices served by the emulator: spot price history and the Pricing API."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from localcloud.ec2 import Ec2Emulator
from localcloud.ec2.instance_types import instance_type_zones, on_demand_prices

from .conftest import SESSION, pricing_client

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client


def test_spot_price_history_is_below_on_demand_for_every_zone(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """DescribeSpotPriceHistory returns one price per offering zone, each below on-demand."""
    history = ec2.describe_spot_price_history(InstanceTypes=["m5.large", "c6g.large"])[
        "SpotPriceHistory"
    ]

    on_demand = on_demand_prices("us-east-1")
    zones = instance_type_zones("us-east-1")
    assert {(h["InstanceType"], h["AvailabilityZone"]) for h in history} == {
        (t, z) for t in ("m5.large", "c6g.large") for z in zones[t]
    }
    for entry in history:
        assert 0 < float(entry["SpotPrice"]) < on_demand[entry["InstanceType"]]


def test_spot_price_history_paginates_over_all_offerings(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """The paginator walks every priced offering of the region exactly once."""
    paginator = ec2.get_paginator("describe_spot_price_history")
    seen = [
        (h["InstanceType"], h["AvailabilityZone"])
        for page in paginator.paginate(
            Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}]
        )
        for h in page["SpotPriceHistory"]
    ]

    priced = on_demand_prices("us-east-1")
    expected = {
        (t, "us-east-1a")
        for t, z in instance_type_zones("us-east-1").items()
        if "us-east-1a" in z and t in priced
    }
    assert len(seen) == len(set(seen))
    assert set(seen) == expected
    assert len(expected) > 1000  # more than one page


def test_pricing_get_products_returns_the_shared_on_demand_price(emulator: Ec2Emulator) -> None:
    """GetProducts for m5.large in us-east-1 returns one Linux product priced as the shared list."""
    pricing = pricing_client(emulator)
    response = pricing.get_products(
        ServiceCode="AmazonEC2",
        Filters=[
            {"Type": "TERM_MATCH", "Field": "instanceType", "Value": "m5.large"},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"},
            {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        ],
    )

    (item,) = [json.loads(p) for p in response["PriceList"]]
    assert item["product"]["attributes"]["instanceType"] == "m5.large"
    (offer,) = item["terms"]["OnDemand"].values()
    (dimension,) = offer["priceDimensions"].values()
    assert float(dimension["pricePerUnit"]["USD"]) == on_demand_prices("us-east-1")["m5.large"]


def test_regions_missing_from_the_price_list_are_priced_like_us_east_1() -> None:
    """An emulator in us-west-2 (absent from the shared list) still serves spot prices."""
    with Ec2Emulator(region="us-west-2") as emulator:
        ec2 = SESSION.client("ec2", endpoint_url=emulator.endpoint_url, region_name="us-west-2")
        history = ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]

    assert {h["AvailabilityZone"] for h in history} == set(
        instance_type_zones("us-west-2")["m5.large"]
    )
    assert all(float(h["SpotPrice"]) < on_demand_prices("us-east-1")["m5.large"] for h in history)
