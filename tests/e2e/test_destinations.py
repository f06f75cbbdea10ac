"""consolidateAfter on destinations, end to end with the injected clock (issue 15 item 3,
Karpenter v1.14): a node that just received a pod restarts its quiet time, so it is not
consolidated before its own consolidateAfter even when its pods would fit elsewhere.

Node `room` keeps a bare 3-cpu filler (never consolidated) with room for a 500m pod. Node
`dest` is emptied at C1; at C1 + 9m a `web` pod (preferring `dest`) arrives there. At
C1 + 10m1s `dest` is empty-quiet past consolidateAfter counted from the departure, but only
1m1s from the arrival: it stays (`pods changed 1m1s ago`). At arrival + 10m it is
consolidated and `web` moves to `room`."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from tests.e2e.conftest import FrozenClock, Stack, pause_pod_spec
from tests.e2e.test_disruption import (
    SMALL_TYPES,
    conditions,
    created_at,
    events,
    running_is,
    start,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def node_of(stack: Stack, pod_name: str) -> str:
    pod = next(
        p for p in await stack.objects("pods", "default") if p["metadata"]["name"] == pod_name
    )
    return str(pod["spec"]["nodeName"])


async def web_pods(stack: Stack) -> list[dict[str, Any]]:
    return [
        p
        for p in await stack.objects("pods", "default")
        if p["metadata"].get("labels", {}).get("app") == "web"
        and p.get("status", {}).get("phase") == "Running"
    ]


async def test_a_node_that_just_received_a_pod_waits_its_own_consolidate_after(
    stack: Stack,
) -> None:
    clock = FrozenClock()
    await stack.apply_pool(requirements=SMALL_TYPES)
    disruption = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "10m",
        "budgets": [{"nodes": "100%"}],
    }
    await stack.store.patch("nodepools", "default", {"spec": {"disruption": disruption}})
    scheduler = await start(stack, clock)
    controller = scheduler.service.disruption
    assert controller is not None
    try:
        await stack.create_pods(1, cpu="3", memory="512Mi", prefix="filler")
        await until(partial(running_is, stack, 1), timeout_seconds=30)
        await stack.create_pods(1, cpu="3", memory="512Mi", prefix="pin")
        await until(partial(running_is, stack, 2), timeout_seconds=30)
        room, dest = await node_of(stack, "filler-0"), await node_of(stack, "pin-0")
        assert room != dest
        claims = await stack.objects("nodeclaims")
        clock.set(max(clock.now, *(created_at(c) for c in claims)) + timedelta(hours=1))
        await stack.store.delete("pods", "pin-0", "default", grace_period_seconds=0)
        await until(partial(running_is, stack, 1))
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)  # the mirror saw it leave
        departed = clock.now
        clock.set(departed + timedelta(minutes=9))
        arrived = clock.now
        spec = pause_pod_spec("500m", "512Mi")
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [dest],
                                }
                            ]
                        },
                    }
                ]
            }
        }
        await stack.store.create(
            "deployments",
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec},
                },
            },
            "default",
        )
        (web,) = await until(partial(web_pods, stack), timeout_seconds=30)
        assert web["spec"]["nodeName"] == dest
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)  # the mirror saw it arrive
        clock.set(departed + timedelta(minutes=10, seconds=1))

        async def waits() -> bool:
            return any(
                e["involvedObject"]["name"] == dest
                and e["message"] == "pods changed 1m1s ago (consolidateAfter 10m)"
                for e in await events(stack, "Unconsolidatable")
            )

        await until(waits, timeout_seconds=30)
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)
        assert [p["spec"]["nodeName"] for p in await web_pods(stack)] == [dest]

        clock.set(arrived + timedelta(minutes=10))

        async def consolidatable() -> bool:
            return any(
                c.get("status", {}).get("nodeName") == dest
                and conditions(c).get("Consolidatable") == "True"
                for c in await stack.objects("nodeclaims")
            )

        await until(consolidatable, timeout_seconds=30)  # decided; validation waits 15 s
        clock.set(arrived + timedelta(minutes=10, seconds=16))

        async def moved() -> bool:
            return [p["spec"]["nodeName"] for p in await web_pods(stack)] == [room]

        await until(moved, timeout_seconds=60)
    finally:
        await stack.delete_workloads()
