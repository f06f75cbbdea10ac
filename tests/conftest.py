"""Suite-wide fixtures.

Close the event loop looptime's pytest hook leaves behind after a synchronous test.

looptime's `pytest_pyfunc_call` asks the policy for the event loop even for synchronous tests;
when no loop is set, the policy creates one that nobody closes. Its ResourceWarning, raised
whenever the garbage collector gets to it, becomes an error under `filterwarnings = error`
(seen as a SystemError from a compile() that the collection interrupted).
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _close_event_loop_left_by_sync_test(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if inspect.iscoroutinefunction(request.function):
        return  # pytest-asyncio owns and closes the loop of async tests
    policy = asyncio.get_event_loop_policy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # get_event_loop without a loop
            loop = policy.get_event_loop()
    except RuntimeError:
        return  # no loop set (set_event_loop(None) was called): nothing was left behind
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)
