"""Offerings the actuator reported exhausted, kept out of solves for a while.

The actuator retries the next offering itself within one launch; only when every offering of a
claim failed does the scheduler learn about them (RESOURCE_EXHAUSTED). They are then left out of
the next solves for `ttl_seconds` (Karpenter's ICE cache: 3 min), so the pods go to other
offerings instead of the same exhausted pools. `clock` is injected (seconds, monotonic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from scheduler_svc.core.model import UnavailableOffering

DEFAULT_TTL_SECONDS = 180.0


class UnavailableOfferingsCache:
    """Exhausted offerings with an expiry each."""

    def __init__(
        self,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_seconds = ttl_seconds
        self._clock = clock
        self._expiry: dict[UnavailableOffering, float] = {}

    def mark(self, offerings: Iterable[UnavailableOffering]) -> None:
        """Keep these out of solves for the TTL from now."""
        expiry = self._clock() + self._ttl_seconds
        for offering in offerings:
            self._expiry[offering] = expiry

    def active(self) -> frozenset[UnavailableOffering]:
        """The offerings still exhausted now (expired ones are forgotten)."""
        now = self._clock()
        for offering in [o for o, t in self._expiry.items() if t <= now]:
            del self._expiry[offering]
        return frozenset(self._expiry)
