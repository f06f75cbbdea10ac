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


def test_a_ttl_under_a_second_is_a_ttl() -> None:
    cache = UnavailableOfferings(ttl_seconds=0.5)
    cache.mark(KEY, "InsufficientInstanceCapacity", now_seconds=10.0)
    assert cache.get(KEY, now_seconds=10.4) is not None
    assert cache.get(KEY, now_seconds=10.5) is None


def test_active_expires_entries_at_their_end_as_get_does() -> None:
    """At exactly until_seconds an entry is gone for active() as for get() (read first here)."""
    cache = UnavailableOfferings(ttl_seconds=10)
    cache.mark(KEY, "InsufficientInstanceCapacity", now_seconds=0.0)
    assert list(cache.active(9.9)) == [KEY]
    assert cache.active(10.0) == {}


def test_unavailable_among_answers_only_for_the_keys_asked_and_unexpired() -> None:
    other = OfferingKey("c5.large", "us-east-1b", "on-demand")
    old = OfferingKey("r5.large", "us-east-1c", "spot")
    cache = UnavailableOfferings(ttl_seconds=10)
    cache.mark(old, "InsufficientInstanceCapacity", now_seconds=0.0)
    cache.mark(KEY, "InsufficientInstanceCapacity", now_seconds=5.0)
    cache.mark(other, "UnfulfillableCapacity", now_seconds=5.0)
    found = cache.unavailable_among([KEY, old], now_seconds=12.0)
    assert {key: entry.reason for key, entry in found.items()} == {
        KEY: "InsufficientInstanceCapacity"
    }
    assert cache.unavailable_among([], now_seconds=12.0) == {}
