"""Seed 000's scale-down walk-through on the whole stack (LocalCloud kube API + EC2 emulator +
actuator + scheduler), with the disruption controller's clock moved by the test the way the
seed's half hour passes.

The seed: a Provisioner allowing spot and on-demand, `limits.cpu: 100`, empty nodes removed
30 s after their last pod, nodes expiring after 1800 s; Deployment pods requesting 500m/512Mi
scaled 5 -> 20 -> 10 -> 5 -> 0. Node1 (born at 5 replicas) expires first and its pods move to
Node2, which has room; Node2 (born at 20 replicas, oversized for what is left at 5) expires and
comes back as a smaller node; at 0 replicas every node the autoscaler launched is gone 30 s
later. Here the NodePool says the same in Karpenter v1 terms (`WhenEmpty`, `consolidateAfter:
30s`, `expireAfter: 1800s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler_svc.kube.writer import parse_timestamp
from tests.e2e.conftest import (
    ApiWatch,
    FrozenClock,
    RunningScheduler,
    Stack,
    api_server_clock,
    emulator_price,
    mirror_saw_pods_leave,
    mirror_saw_pods_on,
    start_with_disruption_clock,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

DEPLOYMENT = "inflate"
POOL_LABEL = "daiku.dev/nodepool"
# Replacement pods must find a place at once: a drain starts only when the pods it evicts fit
# (elsewhere or on an Initialized replacement), so none waits for a launch.
PLACED_WITHIN_SECONDS = 5.0


async def apply_seed_pool(stack: Stack) -> None:
    """The seed's Provisioner as a NodePool (its EC2NodeClass finds subnets and security groups
    by `karpenter.sh/discovery: <cluster>`, as the seed's `provider` does)."""
    await stack.apply_pool(
        limits={"cpu": 100},
        requirements=[
            {
                "key": "karpenter.sh/capacity-type",
                "operator": "In",
                "values": ["spot", "on-demand"],
            },
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
        ],
    )
    (node_class,) = await stack.objects("ec2nodeclasses")
    discovery = {"karpenter.sh/discovery": stack.cloud.cluster_name}
    assert node_class["spec"]["subnetSelectorTerms"] == [{"tags": discovery}]
    assert node_class["spec"]["securityGroupSelectorTerms"] == [{"tags": discovery}]
    await stack.store.patch(
        "nodepools",
        "default",
        {
            "spec": {
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
                "template": {"spec": {"expireAfter": "1800s"}},
            }
        },
    )


class PodPlacement:
    """From the pods watch: when each Deployment pod appeared and when it got a node."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.placed: dict[str, float] = {}
        self.deleted: set[str] = set()

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        if (pod["metadata"].get("labels") or {}).get("app") != DEPLOYMENT:
            return
        uid = pod["metadata"]["uid"]
        self.created.setdefault(uid, time.monotonic())
        if pod["spec"].get("nodeName"):
            self.placed.setdefault(uid, time.monotonic())
        if kind == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            self.deleted.add(uid)

    def slowest_since(self, moment: float) -> float:
        """The longest a pod created after `moment` waited for a node (so far)."""
        now = time.monotonic()
        waits = [
            self.placed.get(uid, now) - born
            for uid, born in self.created.items()
            if born >= moment and (uid in self.placed or uid not in self.deleted)
        ]
        return max(waits, default=0.0)


async def scale(stack: Stack, replicas: int) -> None:
    await stack.store.patch(
        "deployments", DEPLOYMENT, {"spec": {"replicas": replicas}}, namespace="default"
    )


async def running_pods(stack: Stack) -> list[dict[str, Any]]:
    return [
        p
        for p in await stack.objects("pods", "default")
        if p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


async def settle(stack: Stack, replicas: int) -> list[dict[str, Any]]:
    """Until exactly `replicas` pods run and no other pod exists; those pods."""

    async def settled() -> list[dict[str, Any]] | bool:
        pods = await stack.objects("pods", "default")
        up = await running_pods(stack)
        return (len(up) == replicas and len(pods) == replicas and up) or (
            replicas == 0 and not pods
        )

    result = await until(settled, timeout_seconds=40)
    return result if isinstance(result, list) else []


async def daiku_nodes(stack: Stack) -> dict[str, dict[str, Any]]:
    return {
        n["metadata"]["name"]: n
        for n in await stack.objects("nodes")
        if POOL_LABEL in n["metadata"].get("labels", {})
    }


def created_at(obj: dict[str, Any]) -> datetime:
    moment = parse_timestamp(obj["metadata"]["creationTimestamp"])
    assert moment is not None
    return moment


def price(stack: Stack, node: dict[str, Any]) -> float:
    labels = node["metadata"]["labels"]
    return emulator_price(
        stack.cloud.region,
        labels["node.kubernetes.io/instance-type"],
        labels["topology.kubernetes.io/zone"],
        labels["karpenter.sh/capacity-type"],
    )


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def on_node(pods: list[dict[str, Any]], node: str) -> int:
    return sum(1 for p in pods if p["spec"].get("nodeName") == node)


async def disrupting_messages(stack: Stack, name: str) -> list[str]:
    return [
        e["message"]
        for e in await stack.objects("events", "default")
        if e.get("reason") == "Disrupting" and e["involvedObject"]["name"] == name
    ]


async def quiet_passes(scheduler: RunningScheduler, count: int) -> None:
    controller = scheduler.service.disruption
    assert controller is not None
    passes = controller.passes
    await until(lambda: controller.passes >= passes + count)


async def test_seed_000_scale_down_timeline(stack: Stack) -> None:
    """Seed 000 on its own timeline (one clock for the API server and the disruption
    controller): nodes emptied by the scale to 10 go 30 s after their pods and not at 29 s;
    at minute 30 the first nodes expire and at minute 40 the later ones, each replacement no
    dearer than the node it replaces, and at 5 replicas the cluster is right-sized and costs
    less than at 20; at 0 replicas the last nodes go after 30 s and no daiku node, claim or
    cluster instance is left. Every evicted pod got a place at once, and each removal's Event
    and NodeClaim condition name its reason (Empty, Expired)."""
    clock = FrozenClock()
    start = clock.now
    await apply_seed_pool(stack)
    scheduler = await start_with_disruption_clock(stack, clock)
    seen = Observed(PodPlacement())
    pods_watch = ApiWatch(stack.cloud, "/api/v1/namespaces/default/pods", seen.placement.on_event)
    claims_watch = ApiWatch(stack.cloud, "/apis/daiku.dev/v1/nodeclaims", seen.on_claim)
    try:
        with api_server_clock(stack, clock):
            async with pods_watch, claims_watch:
                await timeline(stack, scheduler, clock, start, seen)
                pods_watch.check()
                claims_watch.check()
    finally:
        await stack.store.delete("deployments", DEPLOYMENT, "default")


@dataclass
class Observed:
    """What the watches saw: pod placement, each NodeClaim's conditions that were ever True,
    and which NodeClaim each Node belonged to."""

    placement: PodPlacement
    conditions: dict[str, set[str]] = field(default_factory=dict)  # by NodeClaim
    claim_of: dict[str, str] = field(default_factory=dict)  # Node name -> NodeClaim name

    def on_claim(self, _kind: str, claim: dict[str, Any]) -> None:
        seen = self.conditions.setdefault(claim["metadata"]["name"], set())
        if claim.get("status", {}).get("nodeName"):
            self.claim_of[claim["status"]["nodeName"]] = claim["metadata"]["name"]
        for item in claim.get("status", {}).get("conditions", []):
            if item["status"] == "True":
                seen.add(item["type"])

    def had_condition(self, node: str, kind: str) -> bool:
        return kind in self.conditions.get(self.claim_of.get(node, ""), set())


async def timeline(
    stack: Stack,
    scheduler: RunningScheduler,
    clock: FrozenClock,
    start: datetime,
    seen: Observed,
) -> None:
    def at(minutes: float) -> datetime:
        return start + timedelta(minutes=minutes)

    # Minute 0: 5 replicas, the first nodes. Minute 10: 20 replicas, more nodes.
    await stack.create_deployment(0, name=DEPLOYMENT, cpu="500m", memory="512Mi")
    await scale(stack, 5)
    await settle(stack, 5)
    first = await daiku_nodes(stack)
    clock.set(at(10))
    await scale(stack, 20)
    pods = await settle(stack, 20)
    nodes = await daiku_nodes(stack)
    second = {k: v for k, v in nodes.items() if k not in first}
    assert second, "20 replicas need more nodes than 5"
    assert {created_at(n) for n in second.values()} == {at(10)}
    cost_at_20 = sum(price(stack, n) for n in nodes.values())

    # Minute 12: 10 replicas. Nodes left without pods stay 29 s and go at 31 s, as Empty.
    await mirror_saw_pods_on(scheduler, set(nodes))
    clock.set(at(12))
    await scale(stack, 10)
    pods = await settle(stack, 10)
    emptied = {n for n in nodes if not on_node(pods, n)}
    await mirror_saw_pods_leave(scheduler, emptied)
    clock.set(at(12) + timedelta(seconds=29))
    await quiet_passes(scheduler, 5)
    assert set(await daiku_nodes(stack)) == set(nodes)
    clock.set(at(12) + timedelta(seconds=31))

    async def only_busy_left() -> bool:
        return set(await daiku_nodes(stack)) == set(nodes) - emptied

    await until(only_busy_left, timeout_seconds=40)
    for name in emptied:
        assert_reason(await disrupting_messages(stack, name), "Empty: ")
        assert seen.had_condition(name, "Empty")

    # Minute 30: the first nodes expire (the later ones are 20 minutes old).
    before = await daiku_nodes(stack)
    clock.set(at(30) + timedelta(seconds=1))
    await expired_nodes_go(stack, seen, first, before, replicas=10)

    # Minute 33: 5 replicas. Minute 40: the later nodes expire; what is left is right-sized.
    clock.set(at(33))
    await scale(stack, 5)
    await settle(stack, 5)
    before = await daiku_nodes(stack)
    clock.set(at(40) + timedelta(seconds=1))
    await expired_nodes_go(stack, seen, second, before, replicas=5)
    nodes = await daiku_nodes(stack)
    pods = await settle(stack, 5)
    assert all(on_node(pods, n) for n in nodes)
    assert sum(price(stack, n) for n in nodes.values()) < cost_at_20
    # Right-sized, as the seed's c4.xlarge at 54 % CPU: the five pods fit, and no more than
    # as many again would.
    allocatable = sum(cpu_millis(n["status"]["allocatable"]["cpu"]) for n in nodes.values())
    assert 5 * 500 <= allocatable < 2 * 5 * 500

    # Minute 47: 0 replicas; the last nodes stay 29 s and are gone once 30 s have passed.
    last = set(nodes)
    await mirror_saw_pods_on(scheduler, last)
    clock.set(at(47))
    await scale(stack, 0)
    await settle(stack, 0)
    await mirror_saw_pods_leave(scheduler, last)
    clock.set(at(47) + timedelta(seconds=29))
    await quiet_passes(scheduler, 5)
    assert set(await daiku_nodes(stack)) == last

    async def all_gone() -> bool:
        return (
            not await daiku_nodes(stack)
            and not await stack.objects("nodeclaims")
            and not cluster_instances(stack)
        )

    clock.set(at(47) + timedelta(seconds=31))
    await until(all_gone, timeout_seconds=30)
    for name in last:
        assert_reason(await disrupting_messages(stack, name), "Empty: ")
        assert seen.had_condition(name, "Empty")


def assert_reason(messages: list[str], prefix: str) -> None:
    """One Event, saying its reason once ("Empty: no pods for 31s ...")."""
    assert len(messages) == 1, messages
    assert messages[0].startswith(prefix), messages
    assert messages[0].count(prefix) == 1, messages


async def expired_nodes_go(
    stack: Stack,
    seen: Observed,
    expired: dict[str, dict[str, Any]],
    before: dict[str, dict[str, Any]],
    *,
    replicas: int,
) -> None:
    """Just after the clock passed the `expired` nodes' expireAfter: until they are gone and
    the replicas run again, none of their pods having waited for a node. Each of them still
    there `before` went as Expired (Event and condition); a replacement named in its Event
    costs no more than it and holds pods."""
    started = time.monotonic()

    async def gone() -> bool:
        return not set(expired) & set(await daiku_nodes(stack))

    await until(gone, timeout_seconds=60)
    pods = await settle(stack, replicas)
    assert seen.placement.slowest_since(started) < PLACED_WITHIN_SECONDS
    node_of = {claim: node for node, claim in seen.claim_of.items()}
    now = await daiku_nodes(stack)
    for name, node in expired.items():
        if name not in before:
            continue
        assert seen.had_condition(name, "Expired")
        messages = await disrupting_messages(stack, name)
        assert_reason(messages, "Expired: ")
        message = messages[0]
        if "; replaced by " not in message:
            assert "its pods fit on other nodes" in message
            continue
        for claim in message.rsplit("; replaced by ", 1)[1].split(", "):
            replacement = node_of[claim]
            assert price(stack, now[replacement]) <= price(stack, node)
            assert on_node(pods, replacement)


def cluster_instances(stack: Stack) -> list[Any]:
    """Instances of this cluster (by its ownership tag) not yet terminated."""
    reservations = stack.ec2_client().describe_instances(
        Filters=[
            {
                "Name": "instance-state-name",
                "Values": ["pending", "running", "stopping", "stopped"],
            },
            {"Name": f"tag:kubernetes.io/cluster/{stack.cloud.cluster_name}", "Values": ["owned"]},
        ]
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]
