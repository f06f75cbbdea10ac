"""The emulator's spot price model: deterministic, always below on-demand.

Real spot prices move with demand; the emulator needs prices that are stable across runs (so
tests and benchmarks are reproducible), differ between instance types and zones (so a
`lowest-price` / `price-capacity-optimized` strategy has something to choose between), and sit
strictly below the on-demand price (as AWS caps spot at on-demand). A SHA-256 of the pool's
name gives a fraction between 30 % and 70 % of on-demand, which has all three properties.
"""

from __future__ import annotations

import hashlib

MIN_DISCOUNT_FRACTION = 0.30
MAX_DISCOUNT_FRACTION = 0.70
# EC2 reports spot prices with six decimals.
PRICE_DECIMALS = 6


def spot_price_fraction(instance_type: str, zone: str) -> float:
    """Fraction of on-demand (in [0.30, 0.70]) the spot price of this pool is set to."""
    digest = hashlib.sha256(f"{instance_type}|{zone}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / float(2**64)
    return MIN_DISCOUNT_FRACTION + unit * (MAX_DISCOUNT_FRACTION - MIN_DISCOUNT_FRACTION)


def spot_price(instance_type: str, zone: str, on_demand_price: float) -> float:
    """Hourly spot price (USD) of `instance_type` in `zone`: 30-70 % of `on_demand_price`.

    Deterministic for a given (instance_type, zone, on_demand_price) and strictly below
    `on_demand_price`.
    """
    if not on_demand_price > 0:
        raise ValueError(
            f"on_demand_price for {instance_type} in {zone} must be positive, "
            f"got {on_demand_price!r}"
        )
    price = round(on_demand_price * spot_price_fraction(instance_type, zone), PRICE_DECIMALS)
    # Rounding could only reach on-demand for absurdly small prices; keep the guarantee anyway.
    if price >= on_demand_price or price <= 0:
        price = on_demand_price * spot_price_fraction(instance_type, zone)
    return price
