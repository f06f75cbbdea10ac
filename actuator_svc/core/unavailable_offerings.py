"""The unavailable-offerings cache: offerings that recently failed for lack of capacity.

An offering that failed with InsufficientInstanceCapacity (or a code like it) is not tried again
until its TTL passes (3 minutes by default, as Karpenter). The cache never reads a clock: every
call takes `now_seconds` (epoch seconds) from the caller, so tests control time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from actuator_svc.core.offerings import OfferingKey

DEFAULT_TTL_SECONDS = 180.0


@dataclass(frozen=True)
class Unavailability:
    """Why an offering is unavailable and until when (epoch seconds)."""

    reason: str
    until_seconds: float


class UnavailableOfferings:
    """Offerings to skip, each until its own expiry. Not thread-safe; one event loop owns it."""

    def __init__(self, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        if ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        self.ttl_seconds = ttl_seconds
        self._entries: dict[OfferingKey, Unavailability] = {}

    def mark(self, key: OfferingKey, reason: str, now_seconds: float) -> Unavailability:
        """Record that `key` failed at `now_seconds`; a later failure extends the expiry."""
        entry = Unavailability(reason=reason, until_seconds=now_seconds + self.ttl_seconds)
        self._entries[key] = entry
        return entry

    def get(self, key: OfferingKey, now_seconds: float) -> Unavailability | None:
        """The entry for `key` if it has not expired at `now_seconds`."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.until_seconds <= now_seconds:
            del self._entries[key]
            return None
        return entry

    def unavailable_among(
        self, keys: Iterable[OfferingKey], now_seconds: float
    ) -> dict[OfferingKey, Unavailability]:
        """The subset of `keys` that is unavailable at `now_seconds`."""
        found = {}
        for key in keys:
            entry = self.get(key, now_seconds)
            if entry is not None:
                found[key] = entry
        return found

    def clear(self) -> None:
        """Forget every entry (capacity is known to be back, or a test starts afresh)."""
        self._entries.clear()

    def active(self, now_seconds: float) -> Mapping[OfferingKey, Unavailability]:
        """Every unexpired entry; expired ones are dropped on the way."""
        self._entries = {k: v for k, v in self._entries.items() if v.until_seconds > now_seconds}
        return dict(self._entries)
