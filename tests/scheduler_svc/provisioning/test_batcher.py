"""The batch window closes after the idle window without triggers, or at the max window."""

from __future__ import annotations

import asyncio

import pytest

from scheduler_svc.provisioning.batcher import Batcher

pytestmark = pytest.mark.looptime


async def test_a_single_trigger_closes_after_the_idle_window() -> None:
    """One trigger opens a batch that closes idle_seconds later."""
    batcher = Batcher(idle_seconds=1.0, max_seconds=10.0)
    batcher.trigger()
    window = await batcher.wait()
    assert window.duration_seconds == pytest.approx(1.0)
    assert window.triggers == 1
    assert not window.hit_max


async def test_triggers_within_the_idle_window_keep_the_batch_open() -> None:
    """Triggers every 0.5 s extend a 1 s idle window; the batch closes 1 s after the last."""
    batcher = Batcher(idle_seconds=1.0, max_seconds=10.0)

    async def feed() -> None:
        for _ in range(4):
            batcher.trigger()
            await asyncio.sleep(0.5)

    feeder = asyncio.create_task(feed())
    window = await batcher.wait()
    await feeder
    assert window.duration_seconds == pytest.approx(2.5)  # last trigger at 1.5 s, + 1 s idle
    assert window.triggers == 4


async def test_a_steady_stream_is_cut_at_the_max_window() -> None:
    """Triggers that never pause still get a batch closed max_seconds after it opened."""
    batcher = Batcher(idle_seconds=1.0, max_seconds=3.0)

    async def feed() -> None:
        while True:
            batcher.trigger()
            await asyncio.sleep(0.2)

    feeder = asyncio.create_task(feed())
    window = await batcher.wait()
    feeder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await feeder
    assert window.duration_seconds == pytest.approx(3.0)
    assert window.hit_max


async def test_wait_blocks_until_the_first_trigger() -> None:
    """No trigger, no batch: wait() does not return on its own."""
    batcher = Batcher(idle_seconds=1.0, max_seconds=3.0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(60):
            await batcher.wait()


def test_windows_must_be_ordered() -> None:
    """An idle window longer than the max window is refused."""
    with pytest.raises(ValueError, match="idle_seconds"):
        Batcher(idle_seconds=5.0, max_seconds=1.0)


async def test_pending_pods_open_a_batch_after_the_recheck_time_without_a_trigger() -> None:
    """With pods pending and no trigger, a batch opens recheck_seconds after the last one and
    closes an idle window later, marked as a recheck."""
    batcher = Batcher(
        idle_seconds=1.0, max_seconds=10.0, recheck_seconds=15.0, has_pending=lambda: True
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    window = await batcher.wait()
    assert window.opened_at - started == pytest.approx(15.0)
    assert window.closed_at - started == pytest.approx(16.0)
    assert window.recheck
    assert window.triggers == 0


async def test_no_recheck_batch_while_nothing_is_pending() -> None:
    """The recheck timer opens no batch when no pod is pending; a pod pending later is picked up
    at the next recheck time."""
    pending = False
    batcher = Batcher(
        idle_seconds=1.0, max_seconds=10.0, recheck_seconds=15.0, has_pending=lambda: pending
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.create_task(batcher.wait())
    await asyncio.sleep(40.0)
    assert not waiting.done()
    pending = True
    window = await waiting
    assert window.opened_at - started == pytest.approx(45.0)
    assert window.recheck


async def test_a_trigger_before_the_recheck_time_opens_a_normal_batch() -> None:
    """A trigger within the recheck time opens the batch at once, not marked as a recheck."""
    batcher = Batcher(
        idle_seconds=1.0, max_seconds=10.0, recheck_seconds=15.0, has_pending=lambda: True
    )

    async def later() -> None:
        await asyncio.sleep(2.0)
        batcher.trigger()

    trigger = asyncio.create_task(later())
    loop = asyncio.get_running_loop()
    started = loop.time()
    window = await batcher.wait()
    await trigger
    assert window.opened_at - started == pytest.approx(2.0)
    assert not window.recheck
    assert window.triggers == 1


def test_the_recheck_time_must_be_positive() -> None:
    """A recheck time of zero is refused."""
    with pytest.raises(ValueError, match="recheck_seconds"):
        Batcher(idle_seconds=1.0, max_seconds=10.0, recheck_seconds=0.0)
