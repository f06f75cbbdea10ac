"""The e2e fixture fails a test during which a scheduler crashed, instead of stopping it
quietly with everything else."""

from __future__ import annotations

import asyncio

import pytest

from tests.e2e.conftest import Stack
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def test_a_scheduler_that_crashed_fails_the_reset(shared_stack: Stack) -> None:
    """A scheduler whose run ends with an error (here: its kubeconfig is missing) makes the
    stack's reset fail with the error, after emptying the stack all the same."""
    shared_stack.crash_watch.start(asyncio.get_running_loop())
    missing = shared_stack.tmp_path / "no-such-kubeconfig"
    scheduler = await shared_stack.start_scheduler(kubeconfig=missing, wait_ready=False)
    await until(scheduler.task.done)
    with pytest.raises(pytest.fail.Exception, match="a service crashed during the test") as failed:
        await shared_stack.reset()
    assert "no-such-kubeconfig" in str(failed.value)
    assert shared_stack.schedulers == []
    await shared_stack.reset()  # nothing crashed since: a clean reset passes
