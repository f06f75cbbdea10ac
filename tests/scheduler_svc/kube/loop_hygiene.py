"""Close the event loop looptime's pytest hook leaves behind around sync tests.

looptime asks the loop policy for a loop even around sync tests, which creates one nobody
closes; its ResourceWarning then fails a later async test (warnings are errors). Same fix as
tests/localcloud/ec2/conftest.py; a repo-wide tests/conftest.py would be the better home.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def close_event_loop_left_by_sync_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a sync test, close the loop the policy created for it (if any)."""
    yield
    if inspect.iscoroutinefunction(request.function):
        return
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # no loop set: nothing leaked
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)
