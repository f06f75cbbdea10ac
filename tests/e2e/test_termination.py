"""Termination end to end: every removal cordons, drains through the Eviction API (PDBs and
do-not-disrupt honoured until terminationGracePeriod forces it on the injected clock: pods are
deleted their own grace period before the deadline), terminates the instance and removes the
finalizers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client import generate_latest

from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY, utc_now
from tests.e2e.conftest import FAST_TERMINATION, RunningScheduler, Stack, demo_object
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ON_DEMAND_XLARGE = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c5.xlarge", "m5.xlarge"],
    },
]


class ShiftedClock:
    """Wall time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return utc_now() + self.offset


async def apply_pool(stack: Stack, *, grace: str | None = None) -> None:
    pool = demo_object("nodepool.yaml")
    pool["spec"]["template"]["spec"]["requirements"] = ON_DEMAND_XLARGE
    if grace is not None:
        pool["spec"]["template"]["spec"]["terminationGracePeriod"] = grace
    await stack.store.create("ec2nodeclasses", demo_object("ec2nodeclass.yaml"))
    await stack.store.create("nodepools", pool)


async def create_pod(
    stack: Stack,
    name: str,
    *,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    grace_seconds: int = 0,
) -> None:
    await stack.store.create(
        "pods",
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": labels,
                "annotations": annotations or {},
            },
            "spec": {
                "terminationGracePeriodSeconds": grace_seconds,
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                    }
                ],
            },
        },
        "default",
    )


async def running(stack: Stack, names: list[str]) -> bool:
    pods = {p["metadata"]["name"]: p for p in await stack.objects("pods", "default")}
    return all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)


async def pod_names(stack: Stack) -> set[str]:
    return {p["metadata"]["name"] for p in await stack.objects("pods", "default")}


async def one_node(stack: Stack) -> tuple[dict[str, Any], dict[str, Any]]:
    """The single claim and its Node (the pods of these tests fit one xlarge)."""
    [claim] = await stack.objects("nodeclaims")
    [node] = await stack.objects("nodes")
    return claim, node


async def events_about(stack: Stack, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e.get("message", ""))
        for e in await stack.objects("events", "default")
        if e["involvedObject"].get("name") == name
    ]


async def all_gone(stack: Stack) -> bool:
    return (
        not await stack.objects("nodeclaims")
        and not await stack.objects("nodes")
        and not stack.running_instances()
    )


async def tainted(stack: Stack, node_name: str) -> bool:
    node = await stack.store.get("nodes", node_name)
    return any(t["key"] == DISRUPTED_TAINT_KEY for t in node["spec"].get("taints") or [])


def metric(scheduler: RunningScheduler, line_start: str) -> float:
    for line in generate_latest(scheduler.service.metrics.registry).decode().splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def provision(
    stack: Stack,
    pods: list[tuple[str, dict[str, str]]],
    *,
    grace: str | None = None,
    clock: Callable[[], datetime] | None = None,
) -> RunningScheduler:
    await apply_pool(stack, grace=grace)
    scheduler = await stack.start_scheduler(lifecycle=FAST_TERMINATION, wall_clock=clock)
    for name, pod_annotations in pods:
        await create_pod(stack, name, labels={"app": "web"}, annotations=pod_annotations)
    await until(lambda: running(stack, [n for n, _ in pods]), timeout_seconds=30)
    return scheduler


async def test_a_pdb_blocks_the_drain_until_it_allows_it(stack: Stack) -> None:
    """With a PDB allowing no disruption a deleted claim's node is cordoned but keeps its pods
    (event `DisruptionBlocked: pdb default/web`); relaxing the PDB lets the drain, instance
    termination and finalizer removal finish."""
    scheduler = await provision(stack, [("web-0", {}), ("web-1", {})])
    await stack.store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )
    claim, node = await one_node(stack)

    await stack.store.delete("nodeclaims", claim["metadata"]["name"])

    async def blocked() -> bool:
        return ("DisruptionBlocked", "pdb default/web") in await events_about(
            stack, node["metadata"]["name"]
        )

    await until(blocked, timeout_seconds=10)
    assert await tainted(stack, node["metadata"]["name"])
    # Several refused attempts later the pods are still there and the node still stands.
    await until(lambda: metric(scheduler, 'daiku_scheduler_evictions_total{result="blocked"}') >= 4)
    assert await pod_names(stack) == {"web-0", "web-1"}
    assert len(stack.running_instances()) == 1
    assert ("DisruptionBlocked", "pdb default/web") in await events_about(
        stack, claim["metadata"]["name"]
    )

    await stack.store.patch(
        "poddisruptionbudgets", "web", {"spec": {"minAvailable": 0}}, namespace="default"
    )
    await until(lambda: all_gone(stack), timeout_seconds=20)
    assert await pod_names(stack) == set()
    assert metric(scheduler, 'daiku_scheduler_evictions_total{result="evicted"}') == 2
    assert metric(scheduler, 'daiku_scheduler_nodes_terminated_total{nodepool="default"}') == 1
    await stack.store.delete("poddisruptionbudgets", "web", "default")


async def test_a_do_not_disrupt_pod_holds_the_node_until_the_grace_period(stack: Stack) -> None:
    """A do-not-disrupt pod is not evicted (its neighbour is) and holds the node until the
    NodePool's terminationGracePeriod has passed on the scheduler's clock; then it is deleted
    (its own grace period is 0 s) and the node is terminated."""
    clock = ShiftedClock()
    scheduler = await provision(
        stack,
        [("keep", {"karpenter.sh/do-not-disrupt": "true"}), ("other", {})],
        grace="10m",
        clock=clock,
    )
    claim, node = await one_node(stack)
    assert claim["spec"]["terminationGracePeriod"] == "10m"

    await stack.store.delete("nodeclaims", claim["metadata"]["name"])

    async def only_keep_left() -> bool:
        return await pod_names(stack) == {"keep"}

    await until(only_keep_left, timeout_seconds=10)
    messages = await events_about(stack, node["metadata"]["name"])
    assert ("DisruptionBlocked", "pod default/keep has a do-not-disrupt annotation") in messages
    lifecycle = scheduler.service.lifecycle
    assert lifecycle is not None
    passes = lifecycle.terminator.drain_passes
    # Several drain passes later the pod still holds the node (the clock has not moved).
    await until(lambda: lifecycle.terminator.drain_passes >= passes + 5)
    assert await pod_names(stack) == {"keep"}
    assert len(await stack.objects("nodes")) == 1

    clock.offset = timedelta(minutes=10, seconds=1)
    await until(lambda: all_gone(stack), timeout_seconds=20)
    assert await pod_names(stack) == set()
    assert metric(scheduler, 'daiku_scheduler_evictions_total{result="forced"}') == 1
    reasons = [r for r, _ in await events_about(stack, claim["metadata"]["name"])]
    assert "TerminationGracePeriodExpiring" in reasons


async def test_a_pdb_blocked_pod_is_deleted_its_grace_period_before_the_deadline(
    stack: Stack,
) -> None:
    """With a PDB allowing no disruption and a 10 min terminationGracePeriod, a pod whose own
    grace period is 120 s is not deleted at 7 min 50 s after the claim's deletion and is
    deleted (PDB bypassed, event TerminationGracePeriodExpiring) at 8 min 10 s, after which the
    node goes away before the deadline."""
    clock = ShiftedClock()
    await apply_pool(stack, grace="10m")
    scheduler = await stack.start_scheduler(lifecycle=FAST_TERMINATION, wall_clock=clock)
    await create_pod(stack, "slow", labels={"app": "slow"}, grace_seconds=120)
    await until(lambda: running(stack, ["slow"]), timeout_seconds=30)
    await stack.store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "slow", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "slow"}}},
        },
        "default",
    )
    claim, node = await one_node(stack)
    claim_name = claim["metadata"]["name"]
    await stack.store.delete("nodeclaims", claim_name)

    async def blocked() -> bool:
        return ("DisruptionBlocked", "pdb default/slow") in await events_about(stack, claim_name)

    await until(blocked, timeout_seconds=10)
    blocked_metric = 'daiku_scheduler_evictions_total{result="blocked"}'
    clock.offset = timedelta(minutes=7, seconds=50)
    seen = metric(scheduler, blocked_metric)
    await until(lambda: metric(scheduler, blocked_metric) >= seen + 3)  # drain passes at 7m50s
    assert await pod_names(stack) == {"slow"}
    assert metric(scheduler, 'daiku_scheduler_evictions_total{result="forced"}') == 0
    assert len(await stack.objects("nodes")) == 1

    clock.offset = timedelta(minutes=8, seconds=10)
    await until(lambda: all_gone(stack), timeout_seconds=20)
    assert await pod_names(stack) == set()
    assert metric(scheduler, 'daiku_scheduler_evictions_total{result="forced"}') == 1
    events = await events_about(stack, node["metadata"]["name"])
    [message] = [m for r, m in events if r == "TerminationGracePeriodExpiring"]
    assert message.startswith("deleted 1 pods (PDBs and do-not-disrupt bypassed)")
    assert message.endswith(": default/slow")
    assert "TerminationGracePeriodExpired" not in [r for r, _ in events]
    await stack.store.delete("poddisruptionbudgets", "slow", "default")


async def test_kubectl_delete_node_drains_and_terminates(stack: Stack) -> None:
    """`kubectl delete node` drains the node through evictions, terminates its instance and
    removes the Node and its NodeClaim, with Draining and Terminating events."""
    scheduler = await provision(stack, [("web-0", {})])
    claim, node = await one_node(stack)
    [instance] = stack.running_instances()

    process = await asyncio.create_subprocess_exec(
        "/usr/bin/kubectl",
        f"--kubeconfig={stack.cloud.kubeconfig_path}",
        "delete",
        "node",
        node["metadata"]["name"],
        "--wait=false",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await process.communicate()
    assert process.returncode == 0, err.decode()

    await until(lambda: all_gone(stack), timeout_seconds=20)
    state = stack.ec2_client().describe_instances(InstanceIds=[instance["InstanceId"]])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] in (
        "shutting-down",
        "terminated",
    )
    assert metric(scheduler, 'daiku_scheduler_evictions_total{result="evicted"}') == 1
    reasons = [r for r, _ in await events_about(stack, claim["metadata"]["name"])]
    assert "Draining" in reasons
    assert "Terminating" in reasons
