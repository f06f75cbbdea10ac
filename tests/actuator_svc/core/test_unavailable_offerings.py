"""The unavailable-offerings cache expires entries by the caller's clock."""

import pytest

from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.unavailable_offerings import UnavailableOfferings

KEY = OfferingKey("m5.large", "us-east-1a", "spot")


def test_entry_lasts_exactly_the_ttl() -> None:
    """A marked offering is unavailable until now + TTL and available from then on."""
    cache = UnavailableOfferings(ttl_seconds=180)
    cache.mark(KEY, "InsufficientInstanceCapacity", now_seconds=1000.0)
    entry = cache.get(KEY, now_seconds=1179.9)
    assert entry is not None
    assert entry.reason == "InsufficientInstanceCapacity"
    assert entry.until_seconds == 1180.0
    assert cache.get(KEY, now_seconds=1180.0) is None
    assert cache.active(1180.0) == {}


def test_a_new_failure_extends_the_entry() -> None:
    """Marking again restarts the TTL from the new failure."""
    cache = UnavailableOfferings(ttl_seconds=10)
    cache.mark(KEY, "InsufficientInstanceCapacity", now_seconds=0.0)
    cache.mark(KEY, "UnfulfillableCapacity", now_seconds=8.0)
    entry = cache.get(KEY, now_seconds=15.0)
    assert entry is not None
    assert entry.reason == "UnfulfillableCapacity"


def test_ttl_must_be_positive() -> None:
    """A zero TTL is refused."""
    with pytest.raises(ValueError, match="ttl_seconds"):
        UnavailableOfferings(ttl_seconds=0)
