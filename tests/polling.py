"""Wait for a condition with a bound, instead of sleeping a guessed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def until(
    check: Callable[[], Awaitable[Any] | Any],
    timeout_seconds: float = 15.0,
    interval_seconds: float = 0.01,
) -> Any:
    """Poll `check` (sync or async) until it returns something truthy, and return that;
    AssertionError naming the last result after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_seconds}s (last: {result!r})")
        await asyncio.sleep(interval_seconds)


class SteppedSleep:
    """A sleep that records each delay and returns only when the test steps it."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._steps: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await self._steps.get()

    def step(self) -> None:
        self._steps.put_nowait(None)
