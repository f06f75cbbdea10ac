"""The emulator's spot price model."""

import pytest

from localcloud.ec2.spot_prices import spot_price


def test_spot_price_is_deterministic_and_within_30_to_70_percent_of_on_demand() -> None:
    """The same pool always gets the same price, between 30 % and 70 % of on-demand."""
    first = spot_price("m5.large", "us-east-1a", 0.096)
    assert first == spot_price("m5.large", "us-east-1a", 0.096)
    assert 0.096 * 0.30 <= first <= 0.096 * 0.70


def test_spot_price_varies_by_type_and_zone() -> None:
    """Different pools of the same on-demand price get different spot prices."""
    prices = {
        spot_price(instance_type, zone, 0.1)
        for instance_type in ("m5.large", "c5.large", "r5.large")
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c")
    }
    assert len(prices) == 9


def test_spot_price_is_strictly_below_tiny_on_demand_prices() -> None:
    """Even sub-cent on-demand prices yield a positive spot price strictly below them."""
    price = spot_price("t4g.nano", "us-east-1a", 0.0000001)
    assert 0 < price < 0.0000001


def test_spot_price_rejects_non_positive_on_demand() -> None:
    """A zero on-demand price is an error naming the pool."""
    with pytest.raises(ValueError, match=r"m5\.large in us-east-1a"):
        spot_price("m5.large", "us-east-1a", 0.0)
