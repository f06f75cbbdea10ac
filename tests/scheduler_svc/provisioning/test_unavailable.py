"""Exhausted offerings stay out of solves for the TTL, measured on the injected clock."""

from __future__ import annotations

from scheduler_svc.core.model import UnavailableOffering
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache


def test_offerings_expire_after_the_ttl() -> None:
    """An offering marked at t=0 with a 180 s TTL is active at 179 s and gone at 180 s."""
    now = [0.0]
    cache = UnavailableOfferingsCache(ttl_seconds=180, clock=lambda: now[0])
    offering = UnavailableOffering("c5.large", "us-east-1a", "spot")
    cache.mark([offering])
    now[0] = 179.0
    assert cache.active() == frozenset({offering})
    now[0] = 180.0
    assert cache.active() == frozenset()


def test_marking_again_extends_the_ttl() -> None:
    """A second failure restarts the offering's TTL."""
    now = [0.0]
    cache = UnavailableOfferingsCache(ttl_seconds=10, clock=lambda: now[0])
    offering = UnavailableOffering("c5.large", "us-east-1a", "spot")
    cache.mark([offering])
    now[0] = 9.0
    cache.mark([offering])
    now[0] = 18.0
    assert offering in cache.active()
