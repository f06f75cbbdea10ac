"""Wait for a condition with a bound, instead of sleeping a guessed time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], timeout_seconds: float = 5.0) -> None:
    """Poll `condition` until true; raise TimeoutError after `timeout_seconds`."""
    async with asyncio.timeout(timeout_seconds):
        # Polling is the point: the conditions are plain reads of state another task changes.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.005)
