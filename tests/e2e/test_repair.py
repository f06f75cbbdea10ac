"""Node repair end to end: the EC2 emulator fails an instance's status checks, localcloud's
kubelet on it stops posting status (Ready Unknown), and with `--node-repair` the scheduler
replaces the node 30 minutes later on its (frozen, test-moved) clock: replacement first, then
the broken NodeClaim goes with a bounded drain. More than 20 % of a NodePool broken: no repair,
a `NodeRepairBlocked` Event instead."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler_svc.disruption import DisruptionControllerSettings
from scheduler_svc.disruption.replacement import ReplacementSettings
from scheduler_svc.kube.resources import NODES
from scheduler_svc.kube.writer import parse_timestamp
from scheduler_svc.nodeclass import NodeClassStatusSettings
from scheduler_svc.service import ServiceOptions
from tests.e2e.conftest import (
    FAST_TERMINATION,
    ON_DEMAND_SMALL,
    FrozenClock,
    RunningScheduler,
    Stack,
)
from tests.e2e.test_interruption import web_pods_running
from tests.e2e.test_termination import events_about, metric
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def start(stack: Stack, clock: FrozenClock) -> RunningScheduler:
    """A scheduler with node repair on, its disruption and repair passes reading `clock`."""
    options = ServiceOptions(
        lifecycle=FAST_TERMINATION,
        disruption=DisruptionControllerSettings(
            interval_seconds=0.2, min_interval_seconds=0.05, poll_seconds=0.05
        ),
        replacement=ReplacementSettings(
            interval_seconds=0.2, min_interval_seconds=0.05, poll_seconds=0.05
        ),
        disruption_clock=clock,
        nodeclass=NodeClassStatusSettings(),
    )
    return await stack.start_scheduler(options=options, node_repair=True)


def ready(node: dict[str, Any]) -> str:
    return next(
        (c["status"] for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"),
        "Unknown",
    )


def is_initialized(claim: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Initialized" and c["status"] == "True"
        for c in claim.get("status", {}).get("conditions", [])
    )


async def impair_all(stack: Stack, scheduler: RunningScheduler) -> None:
    """Fail every running instance's status checks; until the scheduler sees them Unknown."""
    for instance in stack.running_instances():
        stack.cloud.ec2.impair_instance(instance["InstanceId"])
    mirror = scheduler.service.mirror

    def all_unknown() -> bool:
        nodes = list(mirror.objects(NODES).values())
        return bool(nodes) and all(ready(n) == "Unknown" for n in nodes)

    await until(all_unknown, timeout_seconds=15)


async def test_an_unready_node_is_replaced_after_thirty_minutes_replacement_first(
    stack: Stack,
) -> None:
    clock = FrozenClock()
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await start(stack, clock)
    await stack.create_deployment(2, memory="256Mi")
    placed = await until(lambda: web_pods_running(stack, 2), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    broken_node = claim["status"]["nodeName"]
    assert set(placed.values()) == {broken_node}
    await impair_all(stack, scheduler)
    [node] = await stack.objects("nodes")
    since = parse_timestamp(
        next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"]
    )
    assert since is not None
    controller = scheduler.service.replacement
    assert controller is not None

    # One second short of the 30-minute toleration: nothing happens.
    clock.set(max(clock.now, since) + timedelta(minutes=30) - timedelta(seconds=1))
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 5)
    assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
        claim["metadata"]["name"]
    ]

    clock.set(since + timedelta(minutes=30))
    name = claim["metadata"]["name"]

    async def deleting() -> dict[str, Any] | None:
        current = await stack.store.get("nodeclaims", name)
        return current if current["metadata"].get("deletionTimestamp") else None

    going = await until(deleting, timeout_seconds=40)
    # Replacement first: when the broken claim is deleted its replacement is already up.
    others = [c for c in await stack.objects("nodeclaims") if c["metadata"]["name"] != name]
    assert len(others) == 1
    assert is_initialized(others[0])
    stamped = going["metadata"]["annotations"]["daiku.dev/nodeclaim-termination-timestamp"]
    assert parse_timestamp(stamped) == clock.now + timedelta(seconds=300)

    async def moved() -> dict[str, str]:
        running = await web_pods_running(stack, 2)
        return running if running and broken_node not in running.values() else {}

    await until(moved, timeout_seconds=40)
    disrupting = [m for r, m in await events_about(stack, name) if r == "Disrupting"]
    assert disrupting
    assert disrupting[0].startswith("Unhealthy: Ready Unknown for 30m (toleration 30m)")
    repaired = (
        'daiku_scheduler_nodeclaims_unhealthy_disrupted_total{condition="Ready",nodepool="default"}'
    )
    # Counted once the claim's delete returned (the controller's task, racing this check).
    await until(lambda: metric(scheduler, repaired) == 1)


async def test_no_repair_when_more_than_twenty_percent_of_the_nodepool_is_unhealthy(
    stack: Stack,
) -> None:
    """Both nodes of a two-node NodePool broken (100 % > ceil(20 % of 2) = 1): neither is
    repaired; each gets a NodeRepairBlocked Event naming the count."""
    clock = FrozenClock()
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await start(stack, clock)
    await stack.create_deployment(2, cpu="1500m", memory="256Mi")
    await until(lambda: web_pods_running(stack, 2), timeout_seconds=30)
    claims = await stack.objects("nodeclaims")
    assert len(claims) == 2
    await impair_all(stack, scheduler)
    clock.set(clock.now + timedelta(minutes=31))

    async def blocked() -> bool:
        for claim in claims:
            reasons = [m for r, m in await events_about(stack, claim["metadata"]["name"])]
            if not any("2 of 2 nodes of NodePool default are unhealthy" in m for m in reasons):
                return False
        return True

    await until(blocked, timeout_seconds=20)
    controller = scheduler.service.replacement
    assert controller is not None
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 5)
    current = await stack.objects("nodeclaims")
    assert sorted(c["metadata"]["name"] for c in current) == sorted(
        c["metadata"]["name"] for c in claims
    )
    assert not any(c["metadata"].get("deletionTimestamp") for c in current)
