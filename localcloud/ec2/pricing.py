"""The AWS Pricing API's GetProducts for EC2 on-demand Linux prices, from the shared price list.

Each product is returned the way the real API does: a JSON *string* per product, with
`product.attributes` (instanceType, regionCode, location, operatingSystem, tenancy,
preInstalledSw, capacitystatus, ...) and `terms.OnDemand.<sku>.<offer>.priceDimensions` holding
`pricePerUnit.USD`. Filters of type TERM_MATCH on any attribute are honoured.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from localcloud.ec2.instance_types import describe_instance_types, emulated_on_demand_prices

PAGE_SIZE = 100
# The Pricing API names regions by their console location.
REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-west-2": "EU (London)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}
_ON_DEMAND_OFFER_TERM = "JRTCKXETXF"
_HOURLY_RATE_CODE = "6YS6EN2CT7"


def _products(region: str) -> list[tuple[dict[str, str], float]]:
    """(attributes, hourly USD price) of every instance type priced in `region`."""
    shapes = describe_instance_types()
    products = []
    for instance_type, price in sorted(emulated_on_demand_prices(region).items()):
        shape = shapes.get(instance_type, {})
        attributes = {
            "servicecode": "AmazonEC2",
            "instanceType": instance_type,
            "instanceFamily": instance_type.split(".", 1)[0],
            "regionCode": region,
            "location": REGION_LOCATIONS.get(region, region),
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
            "licenseModel": "No License required",
            "marketoption": "OnDemand",
        }
        if shape:
            attributes["vcpu"] = str(shape["VCpuInfo"]["DefaultVCpus"])
            attributes["memory"] = f"{shape['MemoryInfo']['SizeInMiB'] / 1024:g} GiB"
        products.append((attributes, price))
    return products


def _price_list_item(attributes: Mapping[str, str], price: float) -> str:
    sku = hashlib.sha256(f"{attributes['regionCode']}|{attributes['instanceType']}".encode())
    sku_id = sku.hexdigest()[:16].upper()
    offer = f"{sku_id}.{_ON_DEMAND_OFFER_TERM}"
    dimension = f"{offer}.{_HOURLY_RATE_CODE}"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": dict(attributes),
                "sku": sku_id,
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    offer: {
                        "offerTermCode": _ON_DEMAND_OFFER_TERM,
                        "sku": sku_id,
                        "effectiveDate": "2026-07-01T00:00:00Z",
                        "priceDimensions": {
                            dimension: {
                                "unit": "Hrs",
                                "rateCode": dimension,
                                "description": f"${price} per On Demand Linux "
                                f"{attributes['instanceType']} Instance Hour",
                                "pricePerUnit": {"USD": f"{price:.10f}"},
                                "beginRange": "0",
                                "endRange": "Inf",
                                "appliesTo": [],
                            }
                        },
                        "termAttributes": {},
                    }
                }
            },
            "version": "20260701000000",
            "publicationDate": "2026-07-01T00:00:00Z",
        }
    )


def get_products(request: Mapping[str, Any]) -> dict[str, Any]:
    """The GetProducts response for `request` (the JSON body the SDK sends)."""
    service_code = request.get("ServiceCode")
    if service_code != "AmazonEC2":
        raise ValueError(f"ServiceCode {service_code!r} is not emulated (only AmazonEC2)")
    terms: dict[str, str] = {}
    for filter_ in request.get("Filters") or []:
        if filter_.get("Type", "TERM_MATCH") != "TERM_MATCH":
            raise ValueError(f"filter type {filter_.get('Type')!r} is not emulated")
        terms[str(filter_["Field"])] = str(filter_["Value"])
    region = terms.get("regionCode")
    if region is None and "location" in terms:
        by_location = {location: code for code, location in REGION_LOCATIONS.items()}
        region = by_location.get(terms["location"], terms["location"])
    if region is None:
        raise ValueError("a regionCode or location filter is required")
    products = _products(region)
    # The real API matches field names and values case-insensitively.
    wanted = {field.lower(): value.lower() for field, value in terms.items()}
    matching = [
        (attributes, price)
        for attributes, price in products
        if all(
            {k.lower(): v.lower() for k, v in attributes.items()}.get(field) == value
            for field, value in wanted.items()
        )
    ]
    page_size = int(request.get("MaxResults") or PAGE_SIZE)
    start = int(request.get("NextToken") or 0)
    result: dict[str, Any] = {
        "FormatVersion": "aws_v1",
        "PriceList": [_price_list_item(a, p) for a, p in matching[start : start + page_size]],
    }
    if start + page_size < len(matching):
        result["NextToken"] = str(start + page_size)
    return result
