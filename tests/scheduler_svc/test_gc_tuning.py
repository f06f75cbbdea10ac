"""The service tunes Python's cyclic garbage collector at start-up (GC_THRESHOLDS: young
collections rarer, full ones still every few hundred thousand allocations) and freezes the
start-up's objects out of full collections (decision 0010)."""

from __future__ import annotations

import gc

from scheduler_svc.__main__ import GC_THRESHOLDS, tune_garbage_collector


def test_collections_are_rarer_and_start_up_objects_are_frozen() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > frozen_before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_full_collections_stay_frequent() -> None:
    """A full collection at most every ~500,000 allocations: (50,000, 10, 10), ~5 M, let
    cyclic garbage grow the scheduler past 300 MB in bench.reaction --rss."""
    young, middle, old = GC_THRESHOLDS
    assert young * middle * old <= 500_000
