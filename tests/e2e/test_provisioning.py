"""The scheduler service end to end: LocalCloud (API server, control plane, EC2 emulator), the
actuator on a real gRPC socket, and scheduler replicas, all on loopback."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import aiohttp
import pytest

from actuator_svc.cloud.ec2 import AwsEndpoints, RetryPolicy
from actuator_svc.launcher import client_token
from actuator_svc.service import ActuatorSettings, serve
from scheduler_svc.core.quantity import resource_units
from tests.e2e.conftest import ON_DEMAND_SMALL, Stack, free_port, pause_pod_spec
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def running_pods(stack: Stack) -> int:
    pods = await stack.objects("pods", "default")
    return sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")


async def events(stack: Stack, reason: str) -> list[dict[str, Any]]:
    return [e for e in await stack.objects("events", "default") if e.get("reason") == reason]


LIFECYCLE_CONDITIONS = ("Launched", "Registered", "Initialized", "Ready")


def conditions(claim: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in claim.get("status", {}).get("conditions", [])}


async def test_pending_pods_get_nodeclaims_instances_and_run(stack: Stack) -> None:
    """Unschedulable pods lead to NodeClaims that launch, register and initialize, one instance
    and one Node per claim, and the pods end up Running with Nominated events."""
    await stack.apply_pool()
    scheduler = await stack.start_scheduler()
    assert "ready" in scheduler.ready_lines[0]
    names = await stack.create_pods(5)

    await until(lambda: _equals(running_pods(stack), len(names)), timeout_seconds=30)

    async def all_initialized() -> bool:
        # The lifecycle's four conditions, whatever else disruption writes beside them (a pass
        # that saw a node before its pod bound writes Empty True, then False: still there).
        claims = await stack.objects("nodeclaims")
        return bool(claims) and all(
            all(conditions(c).get(kind) == "True" for kind in LIFECYCLE_CONDITIONS) for c in claims
        )

    await until(all_initialized)
    claims = await stack.objects("nodeclaims")
    nodes = await stack.objects("nodes")
    assert len(nodes) == len(claims) == len(stack.running_instances())
    for claim in claims:
        node = next(n for n in nodes if n["spec"]["providerID"] == claim["status"]["providerID"])
        assert claim["status"]["nodeName"] == node["metadata"]["name"]
        assert node["metadata"]["labels"]["daiku.dev/nodepool"] == "default"
        assert "daiku.dev/termination" in node["metadata"]["finalizers"]
        assert all(t["key"] != "daiku.dev/unregistered" for t in node["spec"].get("taints", []))
    # Each claim's first CreateFleet step is its object's (the scheduler sends metadata.uid,
    # decision 0014): a claim made again under the same name would not replay it.
    tokens = {call.client_token for call in stack.cloud.ec2.create_fleet_calls}
    for claim in claims:
        name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
        assert client_token(stack.cloud.cluster_name, name, 0, uid) in tokens
    await until(lambda: _at_least(events(stack, "Nominated"), len(names)))


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return (await value) == expected


async def _at_least(value: Any, expected: int) -> bool:
    return len(await value) >= expected


async def test_exhausted_cheapest_pools_launch_the_next_offering_in_one_claim(
    stack: Stack,
) -> None:
    """With the cheapest type out of capacity in every zone, the one NodeClaim launches on the
    next offering (the failed offerings recorded on it), without a second claim."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    zones = [
        z["ZoneName"] for z in stack.ec2_client().describe_availability_zones()["AvailabilityZones"]
    ]
    for zone in zones:
        stack.cloud.ec2.set_capacity(
            instance_type="c5.large", zone=zone, capacity_type="on-demand", available=False
        )
    scheduler = await stack.start_scheduler()
    await stack.create_pods(1)

    await until(lambda: _equals(running_pods(stack), 1), timeout_seconds=30)
    claims = await stack.objects("nodeclaims")
    assert len(claims) == 1
    claim = claims[0]
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert int(claim["metadata"]["annotations"]["daiku.dev/launch-failed-offerings"]) >= 1
    created = scheduler.service.metrics.nodeclaims.labels(nodepool="default", step="created")
    assert created._value.get() == 1
    assert len(stack.running_instances()) == 1


async def test_nodepool_limits_are_never_exceeded(stack: Stack) -> None:
    """A NodePool limited to 4 cpu gets one 4-cpu node; the pods that do not fit stay pending
    with a FailedProvisioning event naming the limit."""
    await stack.apply_pool(
        limits={"cpu": "4"},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]},
        ],
    )
    scheduler = await stack.start_scheduler()
    await stack.create_pods(6)

    await until(lambda: _equals(running_pods(stack), 3), timeout_seconds=30)
    await until(lambda: _at_least(events(stack, "FailedProvisioning"), 3))
    provisioner = scheduler.service.provisioner
    assert provisioner is not None
    before = provisioner.last_round
    provisioner.batcher.trigger()  # one more round with the pods still pending
    await until(lambda: provisioner.last_round is not before)
    claims = await stack.objects("nodeclaims")
    cpu = sum(resource_units("cpu", c["status"]["capacity"]["cpu"]) for c in claims)
    assert cpu <= 4000
    assert len(stack.running_instances()) == 1
    assert await running_pods(stack) == 3
    failed = await events(stack, "FailedProvisioning")
    assert any("limit" in e["message"] for e in failed)


async def test_a_pod_no_instance_type_can_hold_gets_an_event_and_nothing_launches(
    stack: Stack,
) -> None:
    """A pod asking for more cpu than any instance type has gets a FailedProvisioning event;
    no NodeClaim and no instance are made."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="500", prefix="huge")

    failed = await until(lambda: events(stack, "FailedProvisioning"))
    assert [e["involvedObject"]["name"] for e in failed] == ["huge-0"]
    assert await stack.objects("nodeclaims") == []
    assert stack.running_instances() == []


async def test_a_restarted_scheduler_launches_the_claim_left_unlaunched_without_a_duplicate(
    stack: Stack,
) -> None:
    """A NodeClaim created but not launched when its scheduler stopped is launched by the next
    scheduler, which makes no second claim for the same pods: one claim, one instance."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    # CreateFleet keeps failing with a server error: the launch stays unfinished (retryable).
    emulator = stack.cloud.ec2
    emulator.clear_create_fleet_calls()
    emulator.inject_fault(action="CreateFleet", error_code="InternalError", count=1000)
    first = await stack.start_scheduler()
    await stack.create_pods(2, cpu="500m", memory="512Mi")

    async def claim_exists() -> list[dict[str, Any]]:
        return await stack.objects("nodeclaims")

    claims = await until(claim_exists)

    def launch_failed() -> bool:
        return any(c.request_error == "InternalError" for c in emulator.create_fleet_calls)

    await until(launch_failed)
    await first.halt()
    assert len(await stack.objects("nodeclaims")) == 1
    assert "Launched" not in conditions((await stack.objects("nodeclaims"))[0])
    stack.cloud.ec2.clear_faults()

    await stack.start_scheduler()
    await until(lambda: _equals(running_pods(stack), 2), timeout_seconds=30)
    after = await stack.objects("nodeclaims")
    assert [c["metadata"]["name"] for c in after] == [claims[0]["metadata"]["name"]]
    assert len(stack.running_instances()) == 1


async def test_pods_pending_while_a_node_boots_go_to_that_node_not_a_new_claim(
    stack: Stack,
) -> None:
    """A pod that turns pending while the node of an uninitialized claim is still NotReady (and
    tainted as starting) is counted on that node: no second NodeClaim is launched."""
    kubelets = stack.cloud.control_plane.kubelets if stack.cloud.control_plane else None
    assert kubelets is not None
    kubelets.boot_seconds = 3.0
    try:
        await stack.apply_pool(requirements=ON_DEMAND_SMALL)
        await stack.start_scheduler()
        await stack.create_pods(1, cpu="250m", memory="256Mi", prefix="first")

        async def registered_not_ready() -> bool:
            claims = await stack.objects("nodeclaims")
            return bool(claims) and conditions(claims[0]).get("Registered") == "True"

        await until(registered_not_ready, timeout_seconds=15)
        [claim] = await stack.objects("nodeclaims")
        assert conditions(claim).get("Initialized") != "True"
        await stack.create_pods(1, cpu="250m", memory="256Mi", prefix="second")
        await until(lambda: _equals(running_pods(stack), 2), timeout_seconds=30)
        assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
            claim["metadata"]["name"]
        ]
        assert len(stack.running_instances()) == 1
    finally:
        kubelets.boot_seconds = 0.0


async def test_a_pod_whose_planned_node_filled_up_is_solved_again_without_a_change(
    stack: Stack,
) -> None:
    """The stranded timeline: a pod is planned onto a new claim, another pod bound straight to
    that node (no scheduling, so no trigger) fills it while it boots, and the planned pod stays
    Unschedulable with nothing in the cluster changing; the recheck solves it again and it runs
    on a second node."""
    kubelets = stack.cloud.control_plane.kubelets if stack.cloud.control_plane else None
    assert kubelets is not None
    kubelets.boot_seconds = 3.0
    try:
        await stack.apply_pool(requirements=ON_DEMAND_SMALL)
        await stack.start_scheduler(pending_pods_recheck_seconds=2.0)
        [planned] = await stack.create_pods(1, cpu="250m", memory="256Mi", prefix="planned")
        [node] = await until(lambda: stack.objects("nodes"), timeout_seconds=15)
        # Registered but NotReady (tainted): the default-scheduler cannot bind `planned` yet.
        filler = pause_pod_spec("1800m", "256Mi")
        filler["nodeName"] = node["metadata"]["name"]
        await stack.store.create(
            "pods",
            {"metadata": {"name": "filler", "namespace": "default"}, "spec": filler},
            "default",
        )

        async def planned_node() -> str:
            pods = {p["metadata"]["name"]: p for p in await stack.objects("pods", "default")}
            pod = pods[planned]
            running = pod.get("status", {}).get("phase") == "Running"
            return str(pod["spec"].get("nodeName", "")) if running else ""

        assert await until(planned_node, timeout_seconds=40) != node["metadata"]["name"]
        assert len(await stack.objects("nodeclaims")) == 2
    finally:
        kubelets.boot_seconds = 0.0


def late_actuator(stack: Stack, port: int) -> ActuatorSettings:
    """An actuator for this stack on `port`, started by the test after the scheduler."""
    return ActuatorSettings(
        listen=f"127.0.0.1:{port}",
        cluster_name=stack.cloud.cluster_name,
        endpoints=AwsEndpoints(
            ec2=stack.cloud.ec2.endpoint_url, pricing=stack.cloud.ec2.endpoint_url
        ),
        retry=RetryPolicy(max_attempts=3, base_seconds=0.01, max_seconds=0.05),
    )


async def test_pods_wait_for_a_late_actuator_and_then_get_nodes(stack: Stack) -> None:
    """A scheduler that starts before its actuator reports the pods FailedProvisioning
    ("instance types unavailable") and is not ready, naming the actuator; it retries by itself:
    once the actuator serves, the pods run and the scheduler turns ready."""
    port = free_port()
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await stack.start_scheduler(actuator_address=f"127.0.0.1:{port}")
    readyz = f"http://127.0.0.1:{scheduler.service.health_port}/readyz"
    await stack.create_pods(2, cpu="500m", memory="512Mi")

    async def reported() -> bool:
        return any(
            "instance types unavailable" in e.get("message", "")
            for e in await events(stack, "FailedProvisioning")
        )

    await until(reported, timeout_seconds=60)  # after the scheduler's 30 s wait for it

    async def not_ready_for_the_actuator() -> bool:
        return await _get(readyz) == (503, f"actuator at 127.0.0.1:{port} is not serving")

    await until(not_ready_for_the_actuator, timeout_seconds=30)
    async with serve(late_actuator(stack, port)):
        await until(lambda: _equals(running_pods(stack), 2), timeout_seconds=90)

        async def ready() -> bool:
            return await _get(readyz) == (200, "ok")

        await until(ready, timeout_seconds=30)


async def test_a_scheduler_started_before_its_actuator_waits_for_it_without_a_failure(
    stack: Stack,
) -> None:
    """Started together (`daiku up`, a rollout), the scheduler's first round waits for the
    actuator's health to say SERVING instead of reporting it unreachable: pods pending from the
    start run, and no FailedProvisioning is ever recorded."""
    port = free_port()
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.create_pods(2, cpu="500m", memory="512Mi")
    await stack.start_scheduler(actuator_address=f"127.0.0.1:{port}")
    async with serve(late_actuator(stack, port)):
        await until(lambda: _equals(running_pods(stack), 2), timeout_seconds=90)
    assert await events(stack, "FailedProvisioning") == []


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()
