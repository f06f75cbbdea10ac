"""The batch window: collect pending pods until the stream goes quiet, or too long has passed.

A batch opens at the first `trigger()` and closes when no trigger came for `idle_seconds`, or
`max_seconds` after it opened, whichever is first (Karpenter's 1 s / 10 s idea: a Deployment
scaled to 100 makes its pods pending over a few hundred milliseconds, and solving them together
packs them onto fewer, larger nodes than solving each as it comes).

With `recheck_seconds`, a batch also opens when that long has passed since the last one closed
without a trigger while `has_pending()` says pods still wait: triggers come only from changes
(a pod turning pending, a claim deleted, a NodePool edited), and a pod planned onto a new node
that then filled up, or one that waited out an exhausted offering, sees no change at all. Every
pending pod is so looked at again within `recheck_seconds` plus one idle window. Time is the
event loop's clock, so tests fast-forward it (looptime) instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchWindow:
    """One closed batch: when it opened and closed (loop time), how many triggers it took,
    whether the max window closed it, and whether the recheck timer (not a change) opened it."""

    opened_at: float
    closed_at: float
    triggers: int
    hit_max: bool
    recheck: bool = False

    @property
    def duration_seconds(self) -> float:
        return self.closed_at - self.opened_at


def _nothing_pending() -> bool:
    return False


class Batcher:
    """Idle/max batch windows over `trigger()` calls; `wait()` returns each closed batch."""

    def __init__(
        self,
        *,
        idle_seconds: float,
        max_seconds: float,
        recheck_seconds: float | None = None,
        has_pending: Callable[[], bool] = _nothing_pending,
    ) -> None:
        if idle_seconds <= 0 or max_seconds < idle_seconds:
            raise ValueError("need 0 < idle_seconds <= max_seconds")
        if recheck_seconds is not None and recheck_seconds <= 0:
            raise ValueError("recheck_seconds must be positive")
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.recheck_seconds = recheck_seconds
        self._has_pending = has_pending
        self._event = asyncio.Event()
        self._triggers = 0

    def trigger(self) -> None:
        """Something to provision appeared (or changed): open a batch, or keep it open."""
        self._triggers += 1
        self._event.set()

    async def _opened(self) -> bool:
        """Wait for a trigger, or for the recheck timer with pods pending; True for the
        timer."""
        while self.recheck_seconds is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.recheck_seconds):
                    await self._event.wait()
            if self._event.is_set():
                return False
            if self._has_pending():
                return True
        await self._event.wait()
        return False

    async def wait(self) -> BatchWindow:
        """Wait for a trigger (or a due recheck), then for the window to close; returns the
        closed window."""
        loop = asyncio.get_running_loop()
        recheck = await self._opened()
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
            opened_at=opened,
            closed_at=loop.time(),
            triggers=triggers,
            hit_max=hit_max,
            recheck=recheck and triggers == 0,
        )
