"""The nomination window end to end: with `consolidateAfter: 0s`, a node daiku launched for a
pod is not judged Empty while the default-scheduler has not bound that pod yet (the race the
image smoke test once hit: the node initialized, was deleted as Empty, and the bare pod was
evicted for good). The pod here names another scheduler, so the test decides when it binds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.conftest import FrozenClock, Stack, pause_pod_spec, start_with_disruption_clock
from tests.e2e.test_disruption import apply_pool, is_initialized
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def late_pod(stack: Stack, name: str) -> None:
    """A bare pod only a scheduler that is not running would bind, marked Unschedulable as
    kube-scheduler marks the pods it gives up on (so daiku provisions for it)."""
    spec = pause_pod_spec("1", "1Gi") | {"schedulerName": "late-scheduler"}
    await stack.store.create(
        "pods", {"metadata": {"name": name, "namespace": "default"}, "spec": spec}, "default"
    )
    status = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    }
    await stack.store.patch("pods", name, status, namespace="default", subresource="status")


async def pod(stack: Stack, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await stack.store.get("pods", name, "default")
    return found


async def test_a_node_whose_planned_pod_is_not_bound_yet_is_not_empty(stack: Stack) -> None:
    clock = FrozenClock()
    await apply_pool(stack, consolidationPolicy="WhenEmpty", consolidateAfter="0s")
    scheduler = await start_with_disruption_clock(stack, clock)
    controller = scheduler.service.disruption
    assert controller is not None
    await late_pod(stack, "late")

    async def initialized_claim() -> str | None:
        claims = [c for c in await stack.objects("nodeclaims") if is_initialized(c)]
        node = claims[0].get("status", {}).get("nodeName") if claims else None
        return node if isinstance(node, str) and node else None

    node = await until(initialized_claim, timeout_seconds=30)
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 5)
    # Before the nomination window, this pass deleted the node as Empty at once.
    assert [c["status"]["nodeName"] for c in await stack.objects("nodeclaims")] == [node]
    assert not (await pod(stack, "late"))["spec"].get("nodeName")
    blocked = [
        e
        for e in await stack.objects("events", "default")
        if e.get("reason") == "DisruptionBlocked" and "nominated" in e.get("message", "")
    ]
    assert blocked, "the node's Event says why it stays"

    await stack.store.bind("default", "late", node)  # the late scheduler binds it now
    await until(lambda: _running(stack, "late"), timeout_seconds=30)
    # Bound and running: the node is no longer empty, past the window too.
    clock.set(clock.now + timedelta(seconds=60))
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 5)
    assert len(await stack.objects("nodeclaims")) == 1
    assert (await pod(stack, "late"))["status"]["phase"] == "Running"


async def test_the_window_ends_when_the_pod_never_binds(stack: Stack) -> None:
    """A nominated pod that never binds holds its node only for the window (2 x the batch max
    duration, at least 10 s, from the node's initialization): then the node is Empty."""
    clock = FrozenClock()
    await apply_pool(stack, consolidationPolicy="WhenEmpty", consolidateAfter="0s")
    scheduler = await start_with_disruption_clock(stack, clock)
    controller = scheduler.service.disruption
    assert controller is not None
    await late_pod(stack, "never")
    await until(lambda: _any(stack.objects("nodeclaims"), is_initialized), timeout_seconds=30)
    (claim,) = [c["metadata"]["name"] for c in await stack.objects("nodeclaims")]
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 3)
    assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [claim]
    clock.set(clock.now + timedelta(seconds=10))

    async def gone() -> bool:
        return claim not in [c["metadata"]["name"] for c in await stack.objects("nodeclaims")]

    await until(gone, timeout_seconds=30)


async def _running(stack: Stack, name: str) -> bool:
    return bool((await pod(stack, name)).get("status", {}).get("phase") == "Running")


async def _any(objects: Any, check: Any) -> bool:
    return any(check(o) for o in await objects)
