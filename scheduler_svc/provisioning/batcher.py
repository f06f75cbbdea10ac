"""The batch window: collect pending pods until the stream goes quiet, or too long has passed.

A batch opens at the first `trigger()` and closes when no trigger came for `idle_seconds`, or
`max_seconds` after it opened, whichever is first (Karpenter's 1 s / 10 s idea: a Deployment
scaled to 100 makes its pods pending over a few hundred milliseconds, and solving them together
packs them onto fewer, larger nodes than solving each as it comes). Time is the event loop's
clock, so tests fast-forward it (looptime) instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchWindow:
    """One closed batch: when it opened and closed (loop time), how many triggers it took,
    and whether the max window closed it."""

    opened_at: float
    closed_at: float
    triggers: int
    hit_max: bool

    @property
    def duration_seconds(self) -> float:
        return self.closed_at - self.opened_at


class Batcher:
    """Idle/max batch windows over `trigger()` calls; `wait()` returns each closed batch."""

    def __init__(self, *, idle_seconds: float, max_seconds: float) -> None:
        if idle_seconds <= 0 or max_seconds < idle_seconds:
            raise ValueError("need 0 < idle_seconds <= max_seconds")
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self._event = asyncio.Event()
        self._triggers = 0

    def trigger(self) -> None:
        """Something to provision appeared (or changed): open a batch, or keep it open."""
        self._triggers += 1
        self._event.set()

    async def wait(self) -> BatchWindow:
        """Wait for a trigger, then for the window to close; returns the closed window."""
        loop = asyncio.get_running_loop()
        await self._event.wait()
        opened = loop.time()
        self._event.clear()
        triggers, self._triggers = self._triggers, 0
        last = opened
        hit_max = False
        while True:
            now = loop.time()
            deadline = min(last + self.idle_seconds, opened + self.max_seconds)
            if now >= deadline:
                hit_max = opened + self.max_seconds < last + self.idle_seconds
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(deadline - now):
                    await self._event.wait()
            if self._event.is_set():
                self._event.clear()
                triggers += self._triggers
                self._triggers = 0
                last = loop.time()
        return BatchWindow(
            opened_at=opened, closed_at=loop.time(), triggers=triggers, hit_max=hit_max
        )
