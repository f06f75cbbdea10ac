"""Disruption end to end: the scheduler service (with its disruption controller on a frozen,
test-moved clock) on LocalCloud + the actuator. Empty nodes go `consolidateAfter` after their
last pod, expired nodes are replaced, a changed EC2NodeClass drifts its nodes out, three
underutilized nodes merge into one, PDBs and budgets block with Events."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest

from scheduler_svc.kube.writer import parse_timestamp
from scheduler_svc.lifecycle.controller import LifecycleSettings
from tests.e2e.conftest import (
    FrozenClock,
    RunningScheduler,
    Stack,
    start_with_disruption_clock,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def start(stack: Stack, clock: FrozenClock) -> RunningScheduler:
    return await start_with_disruption_clock(
        stack, clock, lifecycle=LifecycleSettings(tick_seconds=0.5)
    )


async def apply_pool(stack: Stack, **disruption: Any) -> None:
    await stack.apply_pool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        ]
    )
    patch: dict[str, Any] = {"spec": {"disruption": disruption}}
    if "expireAfter" in disruption:
        expire = disruption.pop("expireAfter")
        patch = {"spec": {"disruption": disruption, "template": {"spec": {"expireAfter": expire}}}}
    await stack.store.patch("nodepools", "default", patch)


def conditions(claim: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in claim.get("status", {}).get("conditions", [])}


def is_initialized(claim: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Initialized" and c["status"] == "True"
        for c in claim.get("status", {}).get("conditions", [])
    )


async def running(stack: Stack) -> int:
    pods = await stack.objects("pods", "default")
    return sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")


async def events(stack: Stack, reason: str) -> list[dict[str, Any]]:
    return [e for e in await stack.objects("events", "default") if e.get("reason") == reason]


def created_at(obj: dict[str, Any]) -> datetime:
    moment = parse_timestamp(obj["metadata"]["creationTimestamp"])
    assert moment is not None
    return moment


async def test_empty_nodes_go_consolidate_after_their_last_pod_and_not_before(
    stack: Stack,
) -> None:
    """Nodes whose pods left stay while the clock is short of consolidateAfter (30 s) and are
    all removed once it passes, each with a `Disrupting` Event saying Empty."""
    clock = FrozenClock()
    await apply_pool(stack, consolidationPolicy="WhenEmpty", consolidateAfter="30s")
    scheduler = await start(stack, clock)
    names = await stack.create_pods(3, cpu="3", memory="1Gi")
    await until(lambda: _equals(running(stack), len(names)), timeout_seconds=30)
    claims = await stack.objects("nodeclaims")
    assert len(claims) >= 2
    for name in names:
        await stack.store.delete("pods", name, "default", grace_period_seconds=0)
    await until(lambda: _equals(running(stack), 0))
    controller = scheduler.service.disruption
    assert controller is not None
    passes = controller.passes
    await until(lambda: controller.passes >= passes + 5)
    assert len(await stack.objects("nodeclaims")) == len(claims)  # 0 s quiet: all stay

    async def marked_empty() -> bool:
        # Empty is added next to the lifecycle's conditions, never in their place.
        return all(
            conditions(c).get("Empty") == "True" and conditions(c).get("Initialized") == "True"
            for c in await stack.objects("nodeclaims")
        )

    await until(marked_empty)

    newest = max(created_at(c) for c in claims)
    clock.set(max(newest, clock.now) + timedelta(seconds=31))

    async def all_gone() -> bool:
        return not await stack.objects("nodeclaims") and not await stack.objects("nodes")

    await until(all_gone, timeout_seconds=30)
    disrupting = await events(stack, "Disrupting")
    claim_names = {c["metadata"]["name"] for c in claims}
    assert claim_names <= {e["involvedObject"]["name"] for e in disrupting}
    assert all(e["message"].startswith("Empty: ") for e in disrupting)
    assert not stack.running_instances()


async def test_an_expired_node_is_replaced_and_its_pods_move(stack: Stack) -> None:
    """Past expireAfter (1800 s on the clock) a node is replaced: the replacement claim is
    Initialized before the old one goes, and the Deployment's pod runs on the new node."""
    clock = FrozenClock()
    await apply_pool(
        stack, consolidationPolicy="WhenEmpty", consolidateAfter="30s", expireAfter="1800s"
    )
    await start(stack, clock)
    try:
        await stack.create_deployment(1)
        await until(lambda: _equals(running(stack), 1), timeout_seconds=30)
        (old,) = await stack.objects("nodeclaims")
        born = created_at(old)
        # The replacement must be born at least a second (creationTimestamp resolution) later.
        await until(lambda: time.time() > born.timestamp() + 2.5, timeout_seconds=5)
        clock.set(born + timedelta(seconds=1801))

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return [c for c in claims if is_initialized(c)]

        (new,) = await until(replaced, timeout_seconds=45)
        await until(lambda: _equals(running(stack), 1), timeout_seconds=30)
        pods = await stack.objects("pods", "default")
        assert pods[0]["spec"]["nodeName"] == new["status"]["nodeName"]
        disrupting = [
            e
            for e in await events(stack, "Disrupting")
            if e["involvedObject"]["name"] == old["metadata"]["name"]
        ]
        assert disrupting
        assert disrupting[0]["message"].startswith("Expired: ")
        assert new["metadata"]["name"] in disrupting[0]["message"]
    finally:
        await stack.delete_workloads()


async def test_an_ec2nodeclass_change_drifts_its_nodes_out(stack: Stack) -> None:
    """After the EC2NodeClass's tags change, its node (stamped with the old hash) is marked
    Drifted and replaced by a node launched with the new class."""
    clock = FrozenClock()
    await apply_pool(stack, consolidationPolicy="WhenEmpty", consolidateAfter="30s")
    await start(stack, clock)
    try:
        await stack.create_deployment(1)
        await until(lambda: _equals(running(stack), 1), timeout_seconds=30)

        async def stamped() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            return [
                c
                for c in claims
                if "daiku.dev/ec2nodeclass-hash" in c["metadata"].get("annotations", {})
                and "daiku.dev/nodepool-hash" in c["metadata"].get("annotations", {})
            ]

        (old,) = await until(stamped)
        await stack.store.patch("ec2nodeclasses", "default", {"spec": {"tags": {"team": "web"}}})

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return [c for c in claims if is_initialized(c)]

        (new,) = await until(replaced, timeout_seconds=45)
        (new,) = await until(stamped)
        assert (
            new["metadata"]["annotations"]["daiku.dev/ec2nodeclass-hash"]
            != old["metadata"]["annotations"]["daiku.dev/ec2nodeclass-hash"]
        )
        disrupting = [
            e
            for e in await events(stack, "Disrupting")
            if e["involvedObject"]["name"] == old["metadata"]["name"]
        ]
        assert disrupting
        assert disrupting[0]["message"].startswith("Drifted: ")
        await until(lambda: _equals(running(stack), 1), timeout_seconds=30)
    finally:
        await stack.delete_workloads()


async def _equals(value: Any, expected: int) -> bool:
    return bool((await value) == expected)


SMALL_TYPES = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c5.large", "c5.xlarge"],
    },
]


async def test_three_underutilized_nodes_merge_into_one_cheaper_node(stack: Stack) -> None:
    """Three c5.xlarge nodes left with one 500m pod each are replaced by one c5.large after
    the validation wait (clock), the replacement Initialized first; the merged node, which no
    cheaper type could replace, then gets `Unconsolidatable: would cost more`."""
    clock = FrozenClock()
    await stack.apply_pool(requirements=SMALL_TYPES)
    await stack.store.patch(
        "nodepools",
        "default",
        {
            "spec": {
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "30s",
                    "budgets": [{"nodes": "100%"}],
                }
            }
        },
    )
    scheduler = await start(stack, clock)
    try:
        await stack.create_deployment(0)
        # Each round: a 3-CPU filler takes a new c5.xlarge, then one more 500m replica fits
        # only beside it (the other nodes are full).
        for i in range(3):
            await stack.create_pods(1, cpu="3", memory="512Mi", prefix=f"filler{i}")
            await until(partial(running_is, stack, 2 * i + 1), timeout_seconds=30)
            await stack.store.patch(
                "deployments", "web", {"spec": {"replicas": i + 1}}, namespace="default"
            )
            await until(partial(running_is, stack, 2 * i + 2), timeout_seconds=30)
        old = await stack.objects("nodeclaims")
        assert len(old) == 3
        for i in range(3):
            await stack.store.delete("pods", f"filler{i}-0", "default", grace_period_seconds=0)
        await until(lambda: _equals(running(stack), 3))

        async def fillers_gone() -> bool:
            pods = await stack.objects("pods", "default")
            return not any(p["metadata"]["name"].startswith("filler") for p in pods)

        await until(fillers_gone)
        controller = scheduler.service.disruption
        assert controller is not None
        passes = controller.passes
        await until(lambda: controller.passes >= passes + 3)  # the mirror saw them go
        newest = max(created_at(c) for c in old)
        decided = max(newest, clock.now) + timedelta(seconds=60)
        clock.set(decided)

        async def consolidatable() -> bool:
            claims = await stack.objects("nodeclaims")
            return len(claims) == 3 and all(
                conditions(c).get("Consolidatable") == "True" for c in claims
            )

        await until(consolidatable, timeout_seconds=30)
        assert len(await stack.objects("nodeclaims")) == 3  # waiting for validation
        clock.set(decided + timedelta(seconds=16))
        old_names = {c["metadata"]["name"] for c in old}

        async def merged() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] in old_names for c in claims):
                return []
            return [c for c in claims if is_initialized(c)]

        (new,) = await until(merged, timeout_seconds=45)
        await until(lambda: _equals(running(stack), 3), timeout_seconds=30)
        node = next(
            n
            for n in await stack.objects("nodes")
            if n["metadata"]["name"] == new["status"]["nodeName"]
        )
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c5.large"
        disrupting = [
            e for e in await events(stack, "Disrupting") if e["involvedObject"]["name"] in old_names
        ]
        assert {e["involvedObject"]["name"] for e in disrupting} == old_names
        assert all(e["message"].startswith("Underutilized: ") for e in disrupting)

        clock.set(decided + timedelta(seconds=16 + 31))

        async def unconsolidatable() -> list[dict[str, Any]]:
            return [
                e
                for e in await events(stack, "Unconsolidatable")
                if e["involvedObject"]["name"] == new["metadata"]["name"]
                and "would cost more" in e["message"]
            ]

        await until(unconsolidatable, timeout_seconds=30)
        assert len(await stack.objects("nodeclaims")) == 1
    finally:
        await stack.delete_workloads()


async def test_a_pdb_and_a_zero_budget_block_disruption_with_events(stack: Stack) -> None:
    """An expired node whose pod a PDB (0 disruptions allowed) covers stays, with
    `DisruptionBlocked` naming the PDB on its Node and NodeClaim; without the PDB, a budget of
    0 nodes blocks it, and the Event names the budget."""
    clock = FrozenClock()
    await apply_pool(
        stack, consolidationPolicy="WhenEmpty", consolidateAfter="30s", expireAfter="1800s"
    )
    await start(stack, clock)
    try:
        await stack.create_deployment(1)
        await until(lambda: _equals(running(stack), 1), timeout_seconds=30)
        await stack.store.create(
            "poddisruptionbudgets",
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
            },
            "default",
        )

        async def pdb_counted() -> bool:
            (pdb,) = await stack.objects("poddisruptionbudgets", "default")
            return bool(pdb.get("status", {}).get("disruptionsAllowed") == 0)

        await until(pdb_counted)
        (claim,) = await stack.objects("nodeclaims")
        node_name = claim["status"]["nodeName"]
        clock.set(created_at(claim) + timedelta(seconds=1801))

        async def blocked(word: str) -> set[str]:
            return {
                e["involvedObject"]["name"]
                for e in await events(stack, "DisruptionBlocked")
                if word in e["message"]
            }

        wanted = {node_name, claim["metadata"]["name"]}
        await until(lambda: _superset(blocked("pdb default/web"), wanted))
        await stack.store.patch(
            "nodepools", "default", {"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}
        )
        await stack.store.delete("poddisruptionbudgets", "web", "default")
        await until(lambda: _superset(blocked("budget"), wanted))
        assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
            claim["metadata"]["name"]
        ]
    finally:
        await stack.delete_workloads()
        for pdb in await stack.objects("poddisruptionbudgets", "default"):
            await stack.store.delete("poddisruptionbudgets", pdb["metadata"]["name"], "default")


async def _superset(value: Any, wanted: set[str]) -> bool:
    found: set[str] = await value
    return wanted <= found


async def running_is(stack: Stack, count: int) -> bool:
    return bool(await running(stack) == count)
