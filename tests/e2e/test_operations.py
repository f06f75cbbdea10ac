"""The scheduler service's operations end to end: watch streams cut, leader fail-over,
termination, garbage collection, timeouts, invalid NodePools, `python -m scheduler_svc`."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from datetime import timedelta
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client import generate_latest

from scheduler_svc.kube.convert import node_class_from_k8s
from scheduler_svc.kube.writer import utc_now
from scheduler_svc.lifecycle.controller import LifecycleSettings
from scheduler_svc.provisioning.nodeclaim_template import launch_request_of
from tests.e2e.conftest import ON_DEMAND_SMALL, Stack, free_port
from tests.polling import until
from tests.scheduler_svc.state.test_mirror_on_kube_api import CuttableProxy

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def _scrape(registry: Any) -> str:
    return generate_latest(registry).decode()


def _scraped(service: Any, line: str) -> bool:
    """Whether the scheduler's metrics show `line` now."""
    return line in _scrape(service.metrics.registry)


async def running_pods(stack: Stack) -> int:
    pods = await stack.objects("pods", "default")
    return sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")


async def has_running(stack: Stack, count: int) -> bool:
    return await running_pods(stack) == count


async def events(stack: Stack, reason: str) -> list[dict[str, Any]]:
    return [e for e in await stack.objects("events", "default") if e.get("reason") == reason]


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


async def test_pods_created_while_the_watch_streams_are_cut_are_provisioned(stack: Stack) -> None:
    """Every connection between the scheduler and the API server is cut right before pods are
    created; the watches resume and the pods still get nodes and run."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    async with CuttableProxy(stack.cloud.kube.port) as proxy:
        config = stack.cloud.kube.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"  # type: ignore[index]
        path = stack.tmp_path / "proxied-kubeconfig"
        path.write_text(yaml.safe_dump(config))
        scheduler = await stack.start_scheduler(kubeconfig=path)
        accepted = proxy.accepted
        proxy.cut()
        await stack.create_pods(3, cpu="500m", memory="512Mi")
        await until(lambda: has_running(stack, 3), timeout_seconds=30)
        assert proxy.accepted > accepted  # the watches did reconnect
        await scheduler.halt()


async def test_a_standby_takes_over_when_the_leader_stops(stack: Stack) -> None:
    """Of two replicas one leads and the other stands by; when the leader stops, the standby
    takes the Lease and provisions."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    lease: dict[str, Any] = {
        "leader_elect": True,
        "leader_election_namespace": "default",
        "lease_duration_seconds": 3.0,
        "lease_renew_deadline_seconds": 2.0,
        "lease_retry_period_seconds": 0.2,
    }
    first = await stack.start_scheduler(leader_election_identity="first", **lease)
    await until(lambda: first.service.is_leading)
    second = await stack.start_scheduler(leader_election_identity="second", **lease)
    assert "role=leader" in first.ready_lines[0]
    assert "role=standby" in second.ready_lines[0]
    assert not second.service.is_leading

    await first.halt()
    await until(lambda: second.service.is_leading, timeout_seconds=10)
    leases = await stack.objects("leases", "default")
    assert leases[0]["spec"]["holderIdentity"] == "second"
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: has_running(stack, 1), timeout_seconds=30)


async def test_deleting_a_nodeclaim_terminates_its_instance_and_node(stack: Stack) -> None:
    """A deleted NodeClaim has its Node deleted and its instance terminated, then goes away."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: has_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")

    await stack.store.delete("nodeclaims", claim["metadata"]["name"])

    async def gone() -> bool:
        return not await stack.objects("nodeclaims") and not await stack.objects("nodes")

    await until(gone, timeout_seconds=20)
    assert stack.running_instances() == []


async def test_garbage_collection_terminates_orphans_and_deletes_claims_without_instance(
    stack: Stack,
) -> None:
    """An instance no NodeClaim owns is terminated, and a NodeClaim whose instance was
    terminated behind its back is deleted."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await stack.start_scheduler(
        lifecycle=LifecycleSettings(tick_seconds=0.3, gc_interval_seconds=0.3, orphan_age_seconds=0)
    )
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: has_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    # An orphan: launched through the actuator for a claim that does not exist.
    actuator = scheduler.service._actuator  # the service's own gRPC client
    assert actuator is not None
    node_class = (await stack.objects("ec2nodeclasses"))[0]
    request = launch_request_of(claim)
    await actuator.launch_nodeclaim(
        nodeclaim_name="orphan-1",
        nodepool_name="default",
        offerings=list(request.offerings),
        node_class=node_class_from_k8s(node_class),
    )
    assert len(stack.running_instances()) == 2

    await until(lambda: len(stack.running_instances()) == 1, timeout_seconds=15)
    [kept] = stack.running_instances()
    assert kept["InstanceId"] in claim["status"]["providerID"]

    # The claim's instance disappears behind daiku's back: the claim goes too.
    stack.ec2_client().terminate_instances(InstanceIds=[kept["InstanceId"]])

    async def claim_gone() -> bool:
        return not await stack.objects("nodeclaims")

    await until(claim_gone, timeout_seconds=20)


async def test_a_claim_not_launched_within_the_launch_timeout_is_deleted(stack: Stack) -> None:
    """With the lifecycle's clock past the launch timeout, a NodeClaim that never launched is
    deleted and no instance is started for it."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)

    def later() -> Any:
        return utc_now() + timedelta(minutes=6)

    claim = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "stale-1",
            "labels": {"daiku.dev/nodepool": "default"},
            "finalizers": ["daiku.dev/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.large"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        },
    }
    await stack.store.create("nodeclaims", claim)
    await stack.start_scheduler(wall_clock=later)

    async def gone() -> bool:
        return not await stack.objects("nodeclaims")

    await until(gone, timeout_seconds=15)
    assert stack.running_instances() == []


async def test_an_invalid_nodepool_is_reported_and_the_others_keep_working(stack: Stack) -> None:
    """A NodePool whose EC2NodeClass does not exist gets ValidationSucceeded=False with the
    reason; a valid NodePool beside it provisions as usual."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    pool = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "broken"},
        "spec": {
            "weight": 100,
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "nope"},
                    "requirements": [],
                }
            },
        },
    }
    await stack.store.create("nodepools", pool)
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: has_running(stack, 1), timeout_seconds=30)

    async def reported() -> dict[str, Any] | None:
        pools = {p["metadata"]["name"]: p for p in await stack.objects("nodepools")}
        broken_pool = pools["broken"]
        return (
            broken_pool if conditions(broken_pool).get("ValidationSucceeded") == "False" else None
        )

    broken_pool = await until(reported)
    message = next(
        c["message"]
        for c in broken_pool["status"]["conditions"]
        if c["type"] == "ValidationSucceeded"
    )
    assert "EC2NodeClass 'nope' not found" in message
    [claim] = await stack.objects("nodeclaims")
    assert claim["metadata"]["labels"]["daiku.dev/nodepool"] == "default"
    default = next(
        p for p in await stack.objects("nodepools") if p["metadata"]["name"] == "default"
    )
    assert conditions(default).get("ValidationSucceeded") == "True"


async def test_every_offering_exhausted_deletes_the_claim_and_reports_the_pod(
    stack: Stack,
) -> None:
    """When every offering of a claim is out of capacity, the claim is deleted, nothing runs,
    and the pod's next solve (without those offerings) reports it with FailedProvisioning."""
    await stack.apply_pool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
        ]
    )
    zones = [
        z["ZoneName"] for z in stack.ec2_client().describe_availability_zones()["AvailabilityZones"]
    ]
    for zone in zones:
        stack.cloud.ec2.set_capacity(
            instance_type="c5.large", zone=zone, capacity_type="on-demand", available=False
        )
    scheduler = await stack.start_scheduler()
    await stack.create_pods(1, cpu="500m", memory="512Mi")

    await until(lambda: events(stack, "FailedProvisioning"), timeout_seconds=15)
    assert await stack.objects("nodeclaims") == []
    assert stack.running_instances() == []
    failed = scheduler.service.metrics.nodeclaims.labels(nodepool="default", step="failed")
    assert failed._value.get() >= 1


async def test_python_m_scheduler_svc_prints_ready_and_stops_on_sigterm(stack: Stack) -> None:
    """`python -m scheduler_svc` with the flags `daiku up` uses prints a ready line once synced
    and leading, and exits 0 on SIGTERM."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scheduler_svc",
        "--kubeconfig",
        str(stack.cloud.kubeconfig_path),
        "--actuator-address",
        stack.actuator.address,
        "--cluster-name",
        stack.cloud.cluster_name,
        "--health-port",
        "0",
        "--metrics-port",
        str(free_port()),
        "--leader-election-namespace",
        "default",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "SCHEDULER_LOG_FORMAT": "json"},
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        assert "ready" in line
        assert "role=leader" in line
        assert "health_port=0" in line  # 0: off
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_launched_claim_whose_node_never_registers_is_deleted_after_the_timeout(
    stack: Stack,
) -> None:
    """With the lifecycle's clock past the registration timeout, a launched NodeClaim whose
    Node never came is deleted (its termination finds no instance) with an event saying why."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    claim = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "silent-1",
            "labels": {"daiku.dev/nodepool": "default"},
            "finalizers": ["daiku.dev/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        },
    }
    await stack.store.create("nodeclaims", claim)
    stamp = utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")
    await stack.store.patch(
        "nodeclaims",
        "silent-1",
        {
            "status": {
                "providerID": "aws:///us-east-1a/i-0000000000000dead",
                "conditions": [
                    {
                        "type": "Launched",
                        "status": "True",
                        "reason": "Launched",
                        "lastTransitionTime": stamp,
                    }
                ],
            }
        },
        subresource="status",
    )
    await stack.start_scheduler(wall_clock=lambda: utc_now() + timedelta(minutes=16))

    async def gone() -> bool:
        return not await stack.objects("nodeclaims")

    await until(gone, timeout_seconds=15)
    deleted = await until(lambda: events(stack, "NodeClaimDeleted"))
    assert deleted[0]["message"] == "registration timed out"


async def test_health_readiness_and_metrics_endpoints(stack: Stack) -> None:
    """/healthz and /readyz answer 200 once synced; /metrics shows NodeClaims created and
    launched after a provisioning round."""
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await stack.start_scheduler()
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: has_running(stack, 1), timeout_seconds=30)
    service = scheduler.service
    async with aiohttp.ClientSession() as session:
        for path in ("/healthz", "/readyz"):
            async with session.get(f"http://127.0.0.1:{service.health_port}{path}") as response:
                assert response.status == 200
        async with session.get(f"http://127.0.0.1:{service.metrics_port}/metrics") as response:
            text = await response.text()
    assert 'daiku_scheduler_nodeclaims_total{nodepool="default",step="created"} 1.0' in text
    assert 'daiku_scheduler_nodeclaims_total{nodepool="default",step="launched"} 1.0' in text
    for step in ("registered", "initialized"):
        line = f'daiku_scheduler_nodeclaims_total{{nodepool="default",step="{step}"}} 1.0'
        await until(functools.partial(_scraped, service, line))
    assert "daiku_scheduler_scheduling_duration_seconds_count" in text


async def test_consolidation_thresholds_reach_the_disruption_controller(stack: Stack) -> None:
    """The consolidation flags of the scheduler's settings are what its disruption controller
    decides with."""
    scheduler = await stack.start_scheduler(
        consolidation_min_saving_percent=30.0, spot_to_spot_min_types=5
    )
    controller = scheduler.service.disruption
    assert controller is not None
    options = controller.settings.options
    assert (options.min_saving_fraction, options.spot_to_spot_min_types) == (0.3, 5)


async def test_a_nodepool_with_contradictory_requirements_is_not_ready(stack: Stack) -> None:
    """A NodePool whose requirements admit no capacity type (In spot and NotIn spot) shows
    ValidationSucceeded=False and Ready=False naming the key, and launches nothing."""
    await stack.apply_pool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
        ]
    )
    await stack.start_scheduler()
    await stack.create_pods(1, cpu="500m", memory="512Mi")

    async def not_ready() -> dict[str, Any] | None:
        [pool] = await stack.objects("nodepools")
        return pool if conditions(pool).get("Ready") == "False" else None

    pool = await until(not_ready, timeout_seconds=30)
    messages = {c["type"]: c.get("message", "") for c in pool["status"]["conditions"]}
    assert "karpenter.sh/capacity-type admit no value" in messages["ValidationSucceeded"]
    assert "karpenter.sh/capacity-type admit no value" in messages["Ready"]
    assert await stack.objects("nodeclaims") == []
