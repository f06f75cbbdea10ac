"""Disruption budgets end to end (LocalCloud + actuator + scheduler, the disruption clock moved
by the test): a budget caps how many of a NodePool's nodes are disrupted at once, as a count or
a percentage; a budget naming `Empty` holds empty nodes only; a scheduled budget holds only
inside its window. What is disrupting is observed through the API server's watch (a node
tainted `daiku.dev/disrupted` or being deleted, or its NodeClaim being deleted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY
from tests.e2e.conftest import (
    ApiWatch,
    FrozenClock,
    RunningScheduler,
    Stack,
    api_server_clock,
    mirror_saw_pods_leave,
    mirror_saw_pods_on,
    start_with_disruption_clock,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

POOL = "default"
POOL_LABEL = "daiku.dev/nodepool"
# One 3-CPU pod per c5.xlarge: a node per pod.
ONE_POD_PER_NODE = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.xlarge"]},
]


class Disruptions:
    """From watches on Nodes and NodeClaims: which of the pool's nodes are being disrupted
    now (keyed by node name, or claim name before it has a node), and the most at once."""

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.nodes: dict[str, bool] = {}  # node -> tainted or deleting
        self.claims: dict[str, tuple[str, bool]] = {}  # claim -> (unit, deleting)
        self.most = 0
        self.ever: set[str] = set()

    def on_node(self, kind: str, node: dict[str, Any]) -> None:
        if node["metadata"].get("labels", {}).get(POOL_LABEL) != self.pool:
            return
        name = node["metadata"]["name"]
        if kind == "DELETED":
            self.nodes.pop(name, None)
        else:
            taints = node.get("spec", {}).get("taints") or []
            self.nodes[name] = bool(node["metadata"].get("deletionTimestamp")) or any(
                t.get("key") == DISRUPTED_TAINT_KEY for t in taints
            )
        self._count()

    def on_claim(self, kind: str, claim: dict[str, Any]) -> None:
        if claim["metadata"].get("labels", {}).get(POOL_LABEL) != self.pool:
            return
        name = claim["metadata"]["name"]
        if kind == "DELETED":
            self.claims.pop(name, None)
        else:
            unit = claim.get("status", {}).get("nodeName") or name
            self.claims[name] = (unit, bool(claim["metadata"].get("deletionTimestamp")))
        self._count()

    def now(self) -> set[str]:
        units = {name for name, busy in self.nodes.items() if busy}
        return units | {unit for unit, deleting in self.claims.values() if deleting}

    def _count(self) -> None:
        units = self.now()
        self.ever |= units
        self.most = max(self.most, len(units))


def watches(stack: Stack, seen: Disruptions) -> tuple[ApiWatch, ApiWatch]:
    return (
        ApiWatch(stack.cloud, "/api/v1/nodes", seen.on_node),
        ApiWatch(stack.cloud, "/apis/daiku.dev/v1/nodeclaims", seen.on_claim),
    )


async def apply_pool(stack: Stack, disruption: dict[str, Any], expire_after: str) -> None:
    await stack.apply_pool(requirements=ONE_POD_PER_NODE)
    await stack.store.patch(
        "nodepools",
        POOL,
        {
            "spec": {
                "disruption": {"consolidationPolicy": "WhenEmpty", **disruption},
                "template": {"spec": {"expireAfter": expire_after}},
            }
        },
    )


async def nodes_for(stack: Stack, pods: list[str]) -> dict[str, str]:
    """Until each pod runs; pod -> its node."""

    async def placed() -> dict[str, str] | None:
        found = {
            p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in await stack.objects("pods", "default")
            if p.get("status", {}).get("phase") == "Running"
        }
        return found if set(pods) <= set(found) else None

    found: dict[str, str] = await until(placed, timeout_seconds=30)
    return {p: found[p] for p in pods}


async def delete_pods(stack: Stack, pods: list[str]) -> None:
    for name in pods:
        await stack.store.delete("pods", name, "default", grace_period_seconds=0)

    async def gone() -> bool:
        left = {p["metadata"]["name"] for p in await stack.objects("pods", "default")}
        return not left & set(pods)

    await until(gone)


async def node_names(stack: Stack) -> set[str]:
    return {n["metadata"]["name"] for n in await stack.objects("nodes")}


async def passes(scheduler: RunningScheduler, count: int) -> None:
    controller = scheduler.service.disruption
    assert controller is not None
    start = controller.passes
    await until(lambda: controller.passes >= start + count)


async def event_messages(stack: Stack, reason: str, involved: str) -> list[str]:
    return [
        e["message"]
        for e in await stack.objects("events", "default")
        if e.get("reason") == reason and e["involvedObject"]["name"] == involved
    ]


@pytest.mark.parametrize(("nodes", "allowed"), [("1", 1), ("33%", 1), ("100%", 3)])
async def test_a_budget_caps_how_many_empty_nodes_go_at_once(
    stack: Stack, nodes: str, allowed: int
) -> None:
    """Three nodes empty at the same moment under a budget of `nodes` (1; 33 % of 3, rounded
    up as Karpenter does; 100 %) are disrupted at most `allowed` at a time, as the API
    server's watch shows, and all go."""
    clock = FrozenClock()
    await apply_pool(stack, {"consolidateAfter": "30s", "budgets": [{"nodes": nodes}]}, "Never")
    seen = Disruptions(POOL)
    node_watch, claim_watch = watches(stack, seen)
    # The API server stamps node ages from the same frozen clock: with its real clock, a node
    # made more than a second after the clock was read was not yet 30 s old at +31 s.
    with api_server_clock(stack, clock):
        scheduler = await start_with_disruption_clock(stack, clock)
        async with node_watch, claim_watch:
            pods = await stack.create_pods(3, cpu="3", memory="1Gi")
            placed = await nodes_for(stack, pods)
            assert len(set(placed.values())) == 3
            await mirror_saw_pods_on(scheduler, set(placed.values()))
            await delete_pods(stack, pods)
            await mirror_saw_pods_leave(scheduler, set(placed.values()))
            await passes(scheduler, 3)
            assert not seen.ever  # quiet for 0 s on the clock: nothing goes yet
            clock.set(clock.now + timedelta(seconds=31))

            async def all_gone() -> bool:
                return not await stack.objects("nodeclaims") and not await node_names(stack)

            await until(all_gone, timeout_seconds=60)
            node_watch.check()
            claim_watch.check()
    assert seen.ever >= set(placed.values())
    assert seen.most == allowed
    assert not stack.running_instances()


async def test_an_empty_only_budget_of_zero_holds_empty_nodes_not_expired_or_drifted(
    stack: Stack,
) -> None:
    """Under `budgets: [{nodes: "0", reasons: [Empty]}]` an empty node stays (DisruptionBlocked
    naming the budget) while an expired node is replaced and, after an EC2NodeClass change, a
    drifted node is too: expiry and drift are not Empty."""
    clock = FrozenClock()
    start = clock.now
    await apply_pool(
        stack,
        {"consolidateAfter": "30s", "budgets": [{"nodes": "0", "reasons": ["Empty"]}]},
        "30m",
    )
    with api_server_clock(stack, clock):
        scheduler = await start_with_disruption_clock(stack, clock)
        try:
            # Minute 0: the web pod's node. Minute 10: a node for a pod that then leaves.
            await stack.create_deployment(1, cpu="3", memory="1Gi")
            ((_, old),) = (await nodes_for(stack, [await web_pod(stack)])).items()
            clock.set(start + timedelta(minutes=10))
            (filler,) = await stack.create_pods(1, cpu="3", memory="1Gi", prefix="filler")
            empty = (await nodes_for(stack, [filler]))[filler]
            await mirror_saw_pods_on(scheduler, {empty})
            await delete_pods(stack, [filler])
            await mirror_saw_pods_leave(scheduler, {empty})

            # Minute 20: empty for 10 minutes, held by the budget.
            clock.set(start + timedelta(minutes=20))

            async def held() -> list[str]:
                return [
                    m
                    for m in await event_messages(stack, "DisruptionBlocked", empty)
                    if "budget nodes: 0 for Empty of NodePool default allows 0 more Empty" in m
                ]

            await until(held)
            await passes(scheduler, 5)
            assert await node_names(stack) == {old, empty}

            # Minute 30: the web pod's node expires; its pod moves (to the empty node's room).
            clock.set(start + timedelta(minutes=30, seconds=1))

            async def expired_gone() -> bool:
                return old not in await node_names(stack)

            await until(expired_gone, timeout_seconds=40)
            (message,) = await event_messages(stack, "Disrupting", old)
            assert message.startswith("Expired: ")
            await nodes_for(stack, [await web_pod(stack)])

            # A changed EC2NodeClass drifts the node now holding the pod: replaced as well.
            (holder,) = await node_names(stack)
            await stack.store.patch("ec2nodeclasses", "default", {"spec": {"tags": {"t": "1"}}})

            async def drifted_gone() -> bool:
                names = await node_names(stack)
                return holder not in names and len(names) == 1

            await until(drifted_gone, timeout_seconds=40)
            (message,) = await event_messages(stack, "Disrupting", holder)
            assert message.startswith("Drifted: ")
            await nodes_for(stack, [await web_pod(stack)])
        finally:
            await stack.store.delete("deployments", "web", "default")


async def web_pod(stack: Stack) -> str:
    async def found() -> str | None:
        for pod in await stack.objects("pods", "default"):
            if pod["metadata"].get("labels", {}).get("app") == "web" and not pod["metadata"].get(
                "deletionTimestamp"
            ):
                return str(pod["metadata"]["name"])
        return None

    name: str = await until(found)
    return name


def next_utc(hour: int, minute: int) -> datetime:
    """The next wall-clock moment at hour:minute UTC: the lifecycle's timeouts read real time
    against the API server's stamps, which come from the test's clock, so that clock must not
    be behind real time (a claim stamped in the past would look overdue to register)."""
    now = datetime.now(UTC)
    moment = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return moment if moment > now else moment + timedelta(days=1)


async def test_a_scheduled_budget_holds_only_inside_its_window(stack: Stack) -> None:
    """A budget of 0 nodes scheduled daily at 09:00 UTC for 1h: a node emptied before 09:00
    goes at once, one emptied at 09:00 is held (the Event names the schedule) through 09:59:59
    and goes at 10:00."""
    clock = FrozenClock(next_utc(8, 59))
    budget = {"nodes": "0", "schedule": "0 9 * * *", "duration": "1h"}
    await apply_pool(stack, {"consolidateAfter": "30s", "budgets": [budget]}, "Never")
    # One clock: the API server stamps node and pod times from the frozen clock the disruption
    # controller reads (with its real clock, the nodes' ages were real time against a clock
    # set hours ahead, and the test rested on how the two happened to line up).
    with api_server_clock(stack, clock):
        scheduler = await start_with_disruption_clock(stack, clock)
        pods = await stack.create_pods(2, cpu="3", memory="1Gi")
        placed = await nodes_for(stack, pods)
        before, during = (placed[p] for p in pods)
        assert before != during

        # 08:59: the first node is emptied; at 08:59:31 it goes (no budget is active yet).
        await mirror_saw_pods_on(scheduler, {before, during})
        await delete_pods(stack, pods[:1])
        await mirror_saw_pods_leave(scheduler, {before})
        clock.set(clock.now + timedelta(seconds=31))

        async def first_gone() -> bool:
            return await node_names(stack) == {during}

        await until(first_gone, timeout_seconds=30)

        # 09:00: the second one is emptied; the window holds it until 10:00.
        clock.set(clock.now.replace(hour=9, minute=0, second=0))
        await delete_pods(stack, pods[1:])
        await mirror_saw_pods_leave(scheduler, {during})
        clock.set(clock.now.replace(minute=59, second=59))

        async def held() -> list[str]:
            return [
                m
                for m in await event_messages(stack, "DisruptionBlocked", during)
                if "schedule '0 9 * * *' for 1h" in m
            ]

        await until(held)
        await passes(scheduler, 5)
        assert await node_names(stack) == {during}
        clock.set(clock.now.replace(hour=10, minute=0, second=0))

        async def all_gone() -> bool:
            return not await node_names(stack) and not await stack.objects("nodeclaims")

        await until(all_gone, timeout_seconds=30)
        (message,) = await event_messages(stack, "Disrupting", during)
        assert message.startswith("Empty: ")
