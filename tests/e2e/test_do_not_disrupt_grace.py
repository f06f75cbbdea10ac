"""A do-not-disrupt hold with an end, end to end, with the injected clock.

- Karpenter v1.12: an expired node whose pod says `karpenter.sh/do-not-disrupt: "1h"` stays,
  with a `DisruptionBlocked` Event naming the pod and the end of its hold; once the clock passes
  the pod's start time plus one hour, expiry proceeds and the node is replaced.
- daiku's NodePool `spec.disruption.doNotDisruptGracePeriod` (issue 15 item 4): a pod saying
  `"true"` holds an expired node for at most that long after it expired; then the node is
  replaced and the drain evicts the pod.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler_svc.disruption import DisruptionControllerSettings
from scheduler_svc.kube.writer import parse_timestamp
from scheduler_svc.service import ServiceOptions
from tests.e2e.conftest import (
    FAST_TERMINATION,
    FrozenClock,
    Stack,
    api_server_clock,
    pause_pod_spec,
)
from tests.e2e.test_disruption import apply_pool, created_at, events, running_is
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def test_expiry_waits_for_a_timed_do_not_disrupt_and_then_proceeds(stack: Stack) -> None:
    clock = FrozenClock()
    await apply_pool(
        stack, consolidationPolicy="WhenEmpty", consolidateAfter="30s", expireAfter="1800s"
    )
    with api_server_clock(stack, clock):
        await stack.start_scheduler(options=_options(clock))
        await _expiry_waits_for_the_hold(stack, clock)


def _options(clock: FrozenClock) -> ServiceOptions:
    # One clock for the cluster, as in a real one: the disruption controller decides, the
    # terminator drains (the hold ends for both at once) and the API server stamps ages by it.
    return ServiceOptions(
        lifecycle=FAST_TERMINATION,
        disruption=DisruptionControllerSettings(
            interval_seconds=0.2, min_interval_seconds=0.05, poll_seconds=0.05
        ),
        disruption_clock=clock,
        wall_clock=clock,
    )


async def _create_web(stack: Stack, hold: str) -> None:
    """One `web` pod annotated `karpenter.sh/do-not-disrupt: hold`."""
    template = {
        "metadata": {
            "labels": {"app": "web"},
            "annotations": {"karpenter.sh/do-not-disrupt": hold},
        },
        "spec": pause_pod_spec("500m", "512Mi"),
    }
    await stack.store.create(
        "deployments",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template,
            },
        },
        "default",
    )


async def _expiry_waits_for_the_hold(stack: Stack, clock: FrozenClock) -> None:
    await _create_web(stack, "1h")
    try:
        await until(lambda: running_is(stack, 1), timeout_seconds=30)
        (claim,) = await stack.objects("nodeclaims")
        (pod,) = await stack.objects("pods", "default")
        started = parse_timestamp(pod["status"]["startTime"])
        assert started is not None
        held_until = started + timedelta(hours=1)
        clock.set(max(clock.now, created_at(claim) + timedelta(seconds=1801)))

        async def held() -> list[dict[str, Any]]:
            return [
                e
                for e in await events(stack, "DisruptionBlocked")
                if e["involvedObject"]["name"] == claim["metadata"]["name"]
                and "do-not-disrupt pod default/" in e["message"]
                and f"until {held_until.isoformat(timespec='seconds')}" in e["message"]
            ]

        await until(held, timeout_seconds=30)
        assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
            claim["metadata"]["name"]
        ]
        clock.set(max(clock.now, held_until))

        async def replaced() -> bool:
            names = [c["metadata"]["name"] for c in await stack.objects("nodeclaims")]
            return claim["metadata"]["name"] not in names

        await until(replaced, timeout_seconds=60)
        expired = [
            e
            for e in await events(stack, "Disrupting")
            if e["involvedObject"]["name"] == claim["metadata"]["name"]
        ]
        assert expired
        assert expired[0]["message"].startswith("Expired: ")
    finally:
        await stack.delete_workloads()


async def test_the_nodepool_grace_period_ends_a_do_not_disrupt_hold_on_an_expired_node(
    stack: Stack,
) -> None:
    """expireAfter 30m, doNotDisruptGracePeriod 30m, a pod saying "true": held from 30 min to
    1 h (Event names the end), replaced at 1 h with the pod evicted by the drain."""
    clock = FrozenClock()
    await apply_pool(
        stack,
        consolidationPolicy="WhenEmpty",
        consolidateAfter="30s",
        doNotDisruptGracePeriod="30m",
        expireAfter="1800s",
    )
    with api_server_clock(stack, clock):
        await stack.start_scheduler(options=_options(clock))
        await _create_web(stack, "true")
        try:
            await until(lambda: running_is(stack, 1), timeout_seconds=30)
            (claim,) = await stack.objects("nodeclaims")
            (pod,) = await stack.objects("pods", "default")
            name = claim["metadata"]["name"]
            grace_ends = created_at(claim) + timedelta(hours=1)
            clock.set(max(clock.now, created_at(claim) + timedelta(seconds=1801)))

            async def held() -> bool:
                return any(
                    e["involvedObject"]["name"] == name
                    and "do-not-disrupt pod default/" in e["message"]
                    and "doNotDisruptGracePeriod 30m ends "
                    f"{grace_ends.isoformat(timespec='seconds')}"
                    in e["message"]
                    for e in await events(stack, "DisruptionBlocked")
                )

            await until(held, timeout_seconds=30)
            assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [name]
            clock.set(max(clock.now, grace_ends))

            async def replaced() -> bool:
                names = [c["metadata"]["name"] for c in await stack.objects("nodeclaims")]
                return name not in names

            await until(replaced, timeout_seconds=60)
            (disrupting,) = [
                e
                for e in await events(stack, "Disrupting")
                if e["involvedObject"]["name"] == name
                and e["involvedObject"].get("kind") == "NodeClaim"
            ]
            assert disrupting["message"].startswith("Expired: ")
            assert "no longer hold it (doNotDisruptGracePeriod 30m ended" in disrupting["message"]
            # The drain evicted the "true" pod: its ReplicaSet's new pod runs elsewhere.
            names = [p["metadata"]["name"] for p in await stack.objects("pods", "default")]
            assert pod["metadata"]["name"] not in names
        finally:
            await stack.delete_workloads()
