"""The store's clock can be moved for a block, as tests that move a scheduler's clock need."""

from __future__ import annotations

from datetime import UTC, datetime

from localcloud.kube.store import Store

EARLY = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LATE = datetime(2026, 1, 5, 10, 30, tzinfo=UTC)


async def test_objects_are_stamped_from_the_block_clock_then_from_the_store_clock() -> None:
    """Inside `using_clock` creation times come from that clock; after it, from the store's."""
    store = Store(clock=lambda: EARLY)
    with store.using_clock(lambda: LATE):
        inside = await store.create("nodes", {"metadata": {"name": "inside"}})
    after = await store.create("nodes", {"metadata": {"name": "after"}})
    assert inside["metadata"]["creationTimestamp"] == "2026-01-05T10:30:00Z"
    assert after["metadata"]["creationTimestamp"] == "2026-01-05T09:00:00Z"
