"""Balanced consolidation end to end (Karpenter v1.14): a c5.xlarge left with one 500m pod could
be replaced by a c5.large, saving half its price for all of its pool's disruption (score about
0.5). `consolidationThreshold: 1` (pass at 1.0) refuses it with an `Unconsolidatable` Event
stating the score, the saving and the disruption; `consolidationThreshold: 3` (pass at 0.33)
makes it, and the `Disrupting` Event states the same figures."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from tests.e2e.conftest import FrozenClock, Stack
from tests.e2e.test_disruption import (
    SMALL_TYPES,
    conditions,
    created_at,
    events,
    is_initialized,
    running_is,
    start,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def test_balanced_refuses_a_move_below_its_threshold_and_makes_it_above(
    stack: Stack,
) -> None:
    clock = FrozenClock()
    await stack.apply_pool(requirements=SMALL_TYPES)
    disruption = {
        "consolidationPolicy": "Balanced",
        "consolidationThreshold": 1,
        "consolidateAfter": "30s",
        "budgets": [{"nodes": "100%"}],
    }
    await stack.store.patch("nodepools", "default", {"spec": {"disruption": disruption}})
    scheduler = await start(stack, clock)
    controller = scheduler.service.disruption
    assert controller is not None
    try:
        await stack.create_pods(1, cpu="3", memory="512Mi", prefix="filler")
        await until(partial(running_is, stack, 1), timeout_seconds=30)
        await stack.create_deployment(1)  # 500m, beside the filler on its c5.xlarge
        await until(partial(running_is, stack, 2), timeout_seconds=30)
        (old,) = await stack.objects("nodeclaims")
        await stack.store.delete("pods", "filler-0", "default", grace_period_seconds=0)
        await until(partial(running_is, stack, 1))
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)  # the mirror saw it go
        decided = max(created_at(old), clock.now) + timedelta(seconds=60)
        clock.set(decided)

        async def refused() -> list[dict[str, Any]]:
            return [
                e
                for e in await events(stack, "Unconsolidatable")
                if e["involvedObject"]["name"] == old["metadata"]["name"]
                and e["message"].startswith("Balanced score 0.5")
            ]

        (event,) = (await until(refused, timeout_seconds=30))[:1]
        assert "< 1.00 (consolidationThreshold 1)" in event["message"]
        assert "(50% of $" in event["message"]
        assert "disrupts 1 pod(s) (cost 2.0, 100% of 2.0)" in event["message"]
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)
        assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
            old["metadata"]["name"]
        ]

        disruption["consolidationThreshold"] = 3
        await stack.store.patch("nodepools", "default", {"spec": {"disruption": disruption}})

        async def consolidatable() -> bool:
            claims = await stack.objects("nodeclaims")
            return [conditions(c).get("Consolidatable") for c in claims] == ["True"]

        await until(consolidatable, timeout_seconds=30)  # decided; waiting for validation
        clock.set(decided + timedelta(seconds=16))

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return [c for c in claims if is_initialized(c)]

        (new,) = await until(replaced, timeout_seconds=45)
        await until(partial(running_is, stack, 1), timeout_seconds=30)
        disrupting = [
            e
            for e in await events(stack, "Disrupting")
            if e["involvedObject"]["name"] == old["metadata"]["name"]
        ]
        assert disrupting
        assert "Balanced score 0.5" in disrupting[0]["message"]
        assert ">= 0.33 (consolidationThreshold 3)" in disrupting[0]["message"]
        assert new["metadata"]["name"] != old["metadata"]["name"]
    finally:
        await stack.delete_workloads()
