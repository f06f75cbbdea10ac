"""Issue 14's capacity features on the stack: NodeOverlays (prices and extended resources the
solver assumes), static NodePools and headroom."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.e2e.conftest import ON_DEMAND_SMALL, Stack, pause_pod_spec
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

FUSE = "smarter-devices/fuse"


def overlay(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
            ],
            **spec,
        },
    }


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


async def test_nodeoverlays_price_and_extended_resources(stack: Stack) -> None:
    """A -30 % overlay on m5 makes m5.large (0.0672) beat c5.large (0.085) for a plain pod; a
    pod requesting smarter-devices/fuse, which only an overlay gives m5, gets one m5 claim
    that waits (Initialized stays False, no second claim) until the node reports the resource
    as a device plugin would, and then runs."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.store.create("nodeoverlays", overlay("savings-plan", priceAdjustment="-30%"))
    await stack.store.create("nodeoverlays", overlay("fuse", capacity={FUSE: "1"}))
    scheduler = await stack.start_scheduler()
    await stack.create_pods(1, cpu="1", memory="1Gi", prefix="plain")

    async def claims() -> list[dict[str, Any]]:
        return await stack.objects("nodeclaims")

    await until(lambda: _count(claims(), 1))
    (plain,) = await claims()
    await until(lambda: _launched(stack, plain["metadata"]["name"]))
    (plain,) = await claims()
    assert plain["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"

    spec = pause_pod_spec("1", "1Gi")
    spec["containers"][0]["resources"] = {
        "requests": {"cpu": "1", FUSE: "1"},
        "limits": {FUSE: "1"},
    }
    await stack.store.create(
        "pods", {"metadata": {"name": "fuse-user", "namespace": "default"}, "spec": spec}, "default"
    )
    await until(lambda: _count(claims(), 2))
    (fuse_claim,) = [
        c for c in await claims() if c["metadata"]["name"] != plain["metadata"]["name"]
    ]
    await until(lambda: _launched(stack, fuse_claim["metadata"]["name"]))
    launched = next(
        c for c in await claims() if c["metadata"]["name"] == fuse_claim["metadata"]["name"]
    )
    assert launched["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert launched["status"]["allocatable"][FUSE] == "1"

    async def node_ready() -> dict[str, Any] | None:
        current = next(
            c for c in await claims() if c["metadata"]["name"] == fuse_claim["metadata"]["name"]
        )
        name = current.get("status", {}).get("nodeName")
        node = next(
            (n for n in await stack.objects("nodes") if n["metadata"]["name"] == name), None
        )
        return node if node is not None and conditions(node).get("Ready") == "True" else None

    await until(node_ready)
    node = await node_ready()
    assert node is not None
    # The kubelet reports no FUSE device yet: the claim is not Initialized, the pod waits, and
    # the scheduler counts the promised device instead of launching a third claim.
    provisioner = scheduler.service.provisioner
    assert provisioner is not None
    rounds = provisioner.rounds
    provisioner.batcher.trigger()  # a round with the node up and the pod still pending
    await until(lambda: provisioner.rounds > rounds)
    current = next(
        c for c in await claims() if c["metadata"]["name"] == fuse_claim["metadata"]["name"]
    )
    assert conditions(current).get("Initialized") != "True"
    assert len(await claims()) == 2

    # The device plugin registers: the node reports the resource.
    status = node["status"]
    status["capacity"][FUSE] = "1"
    status["allocatable"][FUSE] = "1"
    await stack.store.update("nodes", node, subresource="status")

    async def fuse_pod_running() -> bool:
        pods = await stack.objects("pods", "default")
        return any(
            p["metadata"]["name"] == "fuse-user" and p.get("status", {}).get("phase") == "Running"
            for p in pods
        )

    await until(fuse_pod_running, timeout_seconds=30)
    await until(lambda: _initialized(claims(), fuse_claim["metadata"]["name"]), timeout_seconds=30)
    assert len(await claims()) == 2


async def _count(value: Any, expected: int) -> bool:
    return len(await value) >= expected


async def _launched(stack: Stack, name: str) -> bool:
    claim = next(
        (c for c in await stack.objects("nodeclaims") if c["metadata"]["name"] == name), None
    )
    return claim is not None and conditions(claim).get("Launched") == "True"


async def _initialized(value: Any, name: str) -> bool:
    claim = next((c for c in await value if c["metadata"]["name"] == name), None)
    return claim is not None and conditions(claim).get("Initialized") == "True"


def static_pool(replicas: int, *, nodes_limit: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "static"},
        "spec": {
            "replicas": replicas,
            "limits": {"nodes": nodes_limit},
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "daiku.dev",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": ON_DEMAND_SMALL,
                }
            },
        },
    }


async def static_claims(stack: Stack) -> list[dict[str, Any]]:
    return [
        c
        for c in await stack.objects("nodeclaims")
        if c["metadata"]["labels"].get("daiku.dev/nodepool") == "static"
        and not c["metadata"].get("deletionTimestamp")
    ]


async def kubectl(stack: Stack, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env={**os.environ, "KUBECONFIG": str(stack.cloud.kubeconfig_path)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_static_nodepool_keeps_its_replicas_and_scales_with_kubectl(stack: Stack) -> None:
    """A static NodePool with replicas 2 gets two nodes with no pods asking; pods selecting it
    beyond its room stay Pending without a third node; `kubectl scale nodepool/static
    --replicas=3` adds one (a waiting pod runs there), `--replicas=1` removes two; status.nodes
    follows."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.store.create("nodepools", static_pool(2))
    await stack.start_scheduler()
    await until(lambda: _count_exactly(static_claims(stack), 2), timeout_seconds=30)

    for i in range(4):  # m5.large/c5.large hold one 1-cpu pod each: two fit, two wait
        spec = pause_pod_spec("1", "256Mi")
        spec["nodeSelector"] = {"daiku.dev/nodepool": "static"}
        await stack.store.create(
            "pods", {"metadata": {"name": f"pinned-{i}", "namespace": "default"}, "spec": spec},
            "default",
        )  # fmt: skip
    await until(lambda: _phase_count(stack, "Running", 2), timeout_seconds=30)
    assert len(await static_claims(stack)) == 2  # pods never grow a static pool

    await kubectl(stack, "scale", "nodepool/static", "--replicas=3")
    await until(lambda: _count_exactly(static_claims(stack), 3), timeout_seconds=30)
    await until(lambda: _phase_count(stack, "Running", 3), timeout_seconds=30)

    await kubectl(stack, "scale", "nodepool/static", "--replicas=1")
    await until(lambda: _count_exactly(static_claims(stack), 1), timeout_seconds=30)

    async def status_nodes() -> bool:
        (pool,) = [p for p in await stack.objects("nodepools") if p["metadata"]["name"] == "static"]
        return bool(pool.get("status", {}).get("nodes") == 1)

    await until(status_nodes, timeout_seconds=30)
    # The dynamic pool launched nothing for the pinned pods either.
    others = [
        c for c in await stack.objects("nodeclaims")
        if c["metadata"]["labels"].get("daiku.dev/nodepool") != "static"
    ]  # fmt: skip
    assert others == []


async def _count_exactly(value: Any, expected: int) -> bool:
    return len(await value) == expected


async def _phase_count(stack: Stack, phase: str, expected: int) -> bool:
    pods = await stack.objects("pods", "default")
    return sum(1 for p in pods if p.get("status", {}).get("phase") == phase) == expected


def capacity_buffer(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "daiku.dev/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "burst"},
        "spec": {"nodePoolRef": {"name": "default"}, "requests": {"cpu": "1"}, **spec},
    }


async def pool_claims(stack: Stack) -> list[dict[str, Any]]:
    return [
        c for c in await stack.objects("nodeclaims") if not c["metadata"].get("deletionTimestamp")
    ]


async def test_headroom_is_provisioned_taken_first_by_real_pods_and_provisioned_again(
    stack: Stack,
) -> None:
    """A CapacityBuffer for two 1-cpu pods gets two nodes while no pod is pending; a real
    1-cpu pod then runs on that room at once (no claim of its own), and the room it took is
    provisioned again: a third node. The metric says what the buffer wants."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.store.create("capacitybuffers", capacity_buffer(replicas=2))
    scheduler = await stack.start_scheduler()
    await until(lambda: _count_exactly(pool_claims(stack), 2), timeout_seconds=30)
    await until(lambda: _nodes_ready(stack, 2), timeout_seconds=30)
    before = {c["metadata"]["name"] for c in await pool_claims(stack)}

    await stack.create_pods(1, cpu="1", memory="256Mi", prefix="burst")
    await until(lambda: _phase_count(stack, "Running", 1), timeout_seconds=30)
    (pod,) = await stack.objects("pods", "default")
    (node,) = [
        n for n in await stack.objects("nodes") if n["metadata"]["name"] == pod["spec"]["nodeName"]
    ]
    # By provider ID, set at launch: a claim's status.nodeName waits for its registration,
    # which can trail the node's readiness on a busy machine (it did once in CI).
    claims = {
        c.get("status", {}).get("providerID"): c["metadata"]["name"]
        for c in await pool_claims(stack)
    }
    assert (
        claims.get(node["spec"]["providerID"]) in before
    )  # it ran on the room, not on a new claim
    await until(lambda: _count_exactly(pool_claims(stack), 3), timeout_seconds=30)

    registry = scheduler.service.metrics.registry
    wanted = registry.get_sample_value(
        "daiku_scheduler_headroom_pods", {"capacitybuffer": "burst", "nodepool": "default"}
    )
    assert wanted == 2

    # The status, written by the scheduler through the subresource, as kubectl shows it.
    async def buffer_status_provisioned() -> bool:
        (buffer,) = await stack.objects("capacitybuffers")
        found = conditions(buffer)
        status = buffer.get("status", {})
        return (
            status.get("replicas") == 2
            and found.get("ReadyForProvisioning") == "True"
            and found.get("Provisioning") == "True"
        )

    await until(buffer_status_provisioned, timeout_seconds=30)
    table = await kubectl(stack, "get", "capacitybuffers")
    header, row = table.splitlines()
    assert header.split() == ["NAME", "NODEPOOL", "REPLICAS", "READY", "PROVISIONING", "AGE"]
    assert row.split()[:5] == ["burst", "default", "2", "True", "True"]


async def _nodes_ready(stack: Stack, expected: int) -> bool:
    nodes = await stack.objects("nodes")
    return sum(1 for n in nodes if conditions(n).get("Ready") == "True") >= expected


async def test_nodeoverlay_status_ready_or_in_conflict_as_kubectl_shows_it(stack: Stack) -> None:
    """Two overlays of one weight pricing m5 differently: the later name applies and is Ready;
    the other is Ready False with reason Conflict (Karpenter's ValidationSucceeded) and is
    left out of the catalog; kubectl shows READY and, with -o wide, the reason."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.store.create("nodeoverlays", overlay("aa-flat", price="0.05", weight=10))
    await stack.store.create(
        "nodeoverlays", overlay("zz-savings", priceAdjustment="-30%", weight=10)
    )
    await stack.start_scheduler()

    async def ready_states() -> dict[str, str]:
        return {
            o["metadata"]["name"]: conditions(o).get("Ready", "")
            for o in await stack.objects("nodeoverlays")
        }

    async def statuses_written() -> bool:
        return await ready_states() == {"aa-flat": "False", "zz-savings": "True"}

    await until(statuses_written, timeout_seconds=30)
    rows = {
        line.split()[0]: line.split()
        for line in (await kubectl(stack, "get", "nodeoverlays", "-o", "wide")).splitlines()
    }
    assert rows["NAME"][:6] == ["NAME", "WEIGHT", "PRICE", "ADJUSTMENT", "READY", "AGE"]
    assert rows["aa-flat"][1:3] == ["10", "0.05"]
    assert {"False", "Conflict", "NodeOverlay", "zz-savings"} <= set(rows["aa-flat"])
    assert {"True", "ValidationSucceeded"} <= set(rows["zz-savings"])
