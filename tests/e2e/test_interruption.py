"""Interruption end to end: the emulator's SQS interruption queue -> the actuator's
WatchCloudEvents -> the scheduler cordons, drains and replaces the node."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio

from actuator_svc.cloud.ec2 import AwsEndpoints, RetryPolicy
from actuator_svc.service import ActuatorSettings, serve
from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc
from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY
from tests.e2e.conftest import (
    FAST_TERMINATION,
    Stack,
    demo_object,
    local_cloud_with_crds,
)
from tests.e2e.test_termination import events_about, metric
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SPOT_XLARGE = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
    {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c5.xlarge", "m5.xlarge"],
    },
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def queue_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """LocalCloud and an actuator reading the emulator's interruption queue."""
    tmp_path = tmp_path_factory.mktemp("interruption")
    async with local_cloud_with_crds(tmp_path) as cloud:
        endpoint = cloud.ec2.endpoint_url
        settings = ActuatorSettings(
            listen="127.0.0.1:0",
            cluster_name=cloud.cluster_name,
            endpoints=AwsEndpoints(ec2=endpoint, sqs=endpoint, pricing=endpoint),
            interruption_queue=cloud.ec2.interruption_queue_name,
            interruption_wait_seconds=1,
            retry=RetryPolicy(max_attempts=3, base_seconds=0.01, max_seconds=0.05),
        )
        async with serve(settings) as actuator:
            yield Stack(cloud, actuator, tmp_path)


@pytest_asyncio.fixture(loop_scope="module")
async def stack(queue_stack: Stack) -> AsyncIterator[Stack]:
    yield queue_stack
    for deployment in await queue_stack.objects("deployments", "default"):
        await queue_stack.store.delete("deployments", deployment["metadata"]["name"], "default")
    await queue_stack.reset()


async def start(stack: Stack, replicas: int, *, rebalance: str | None = None) -> Any:
    pool = demo_object("nodepool.yaml")
    pool["spec"]["template"]["spec"]["requirements"] = SPOT_XLARGE
    if rebalance is not None:
        pool["spec"].setdefault("disruption", {})["rebalanceRecommendationPolicy"] = rebalance
    await stack.store.create("ec2nodeclasses", demo_object("ec2nodeclass.yaml"))
    await stack.store.create("nodepools", pool)
    scheduler = await stack.start_scheduler(lifecycle=FAST_TERMINATION)
    await stack.create_deployment(replicas, memory="256Mi")
    return scheduler


async def web_pods_running(stack: Stack, replicas: int) -> dict[str, str]:
    """Pod name -> node of the Running web pods, when `replicas` of them run (else {})."""
    pods = [
        p
        for p in await stack.objects("pods", "default")
        if p["metadata"].get("labels", {}).get("app") == "web"
        and not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") == "Running"
    ]
    return (
        {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
        if len(pods) == replicas
        else {}
    )


async def test_a_spot_interruption_drains_and_replaces_the_node(stack: Stack) -> None:
    """A spot interruption warning for a node's instance cordons the node, deletes its claim,
    and the pods end Running on a new node whose claim leaves the interrupted offering out;
    the interrupted instance is terminated by daiku, not by the cloud."""
    scheduler = await start(stack, replicas=2)
    await until(lambda: web_pods_running(stack, 2), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [node] = await stack.objects("nodes")
    [instance] = stack.running_instances()
    interrupted = (
        instance["InstanceType"],
        instance["Placement"]["AvailabilityZone"],
        "spot",
    )

    stack.cloud.ec2.send_spot_interruption(instance["InstanceId"])

    async def cordoned() -> bool:
        current = await stack.store.get("nodes", node["metadata"]["name"])
        return any(t["key"] == DISRUPTED_TAINT_KEY for t in current["spec"].get("taints") or [])

    await until(cordoned, timeout_seconds=15)

    async def moved() -> dict[str, str]:
        running = await web_pods_running(stack, 2)
        return running if running and node["metadata"]["name"] not in running.values() else {}

    # The two waits' bounds (15 s + 40 s) keep the move inside the two-minute warning.
    placement = await until(moved, timeout_seconds=40)
    assert len(set(placement.values())) == 1
    claims = await stack.objects("nodeclaims")
    assert claim["metadata"]["name"] not in [c["metadata"]["name"] for c in claims]
    [replacement] = claims
    offerings = json.loads(replacement["metadata"]["annotations"]["daiku.dev/offerings"])
    assert offerings  # the solver's ordered offerings, without the interrupted one
    assert [o for o in offerings if tuple(o[:3]) == interrupted] == []
    await until(
        lambda: instance["InstanceId"] not in [i["InstanceId"] for i in stack.running_instances()]
    )
    reasons = [r for r, _ in await events_about(stack, claim["metadata"]["name"])]
    assert "Interrupted" in reasons
    assert (
        metric(
            scheduler,
            'daiku_scheduler_cloud_events_total{action="disrupted",kind="SpotInterruptionWarning"}',
        )
        == 1
    )


async def test_a_rebalance_recommendation_is_only_noted(stack: Stack) -> None:
    """By default (rebalanceRecommendationPolicy unset: Ignore, as Karpenter) a rebalance
    recommendation records an Event and the claim's rebalance-recommended-at annotation, and
    leaves the node alone."""
    scheduler = await start(stack, replicas=1)
    await until(lambda: web_pods_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [instance] = stack.running_instances()

    stack.cloud.ec2.send_rebalance_recommendation(instance["InstanceId"])

    async def noted() -> bool:
        reasons = [r for r, _ in await events_about(stack, claim["metadata"]["name"])]
        current = await stack.store.get("nodeclaims", claim["metadata"]["name"])
        stamped = "daiku.dev/rebalance-recommended-at" in current["metadata"].get("annotations", {})
        return "RebalanceRecommendation" in reasons and stamped

    await until(noted, timeout_seconds=15)
    replacement = scheduler.service.replacement
    assert replacement is not None
    passes = replacement.passes
    await until(lambda: replacement.passes >= passes + 2, timeout_seconds=30)
    [still] = await stack.objects("nodeclaims")
    assert not still["metadata"].get("deletionTimestamp")
    assert len(stack.running_instances()) == 1
    assert (
        metric(
            scheduler,
            'daiku_scheduler_cloud_events_total{action="noted",kind="RebalanceRecommendation"}',
        )
        == 1
    )


async def test_with_replace_a_rebalance_recommendation_moves_the_pods_before_any_warning(
    stack: Stack,
) -> None:
    """rebalanceRecommendationPolicy: Replace: the recommended node is cordoned, a replacement
    off the warned spot pool is launched and Initialized first, then the node's claim is
    deleted and its pods run on the replacement; no interruption warning was sent."""
    await start(stack, replicas=2, rebalance="Replace")
    await until(lambda: web_pods_running(stack, 2), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [instance] = stack.running_instances()
    warned = (instance["InstanceType"], instance["Placement"]["AvailabilityZone"], "spot")
    name = claim["metadata"]["name"]

    stack.cloud.ec2.send_rebalance_recommendation(instance["InstanceId"])

    async def deleting() -> bool:
        current = await stack.store.get("nodeclaims", name)
        return bool(current["metadata"].get("deletionTimestamp"))

    await until(deleting, timeout_seconds=40)
    [replacement] = [c for c in await stack.objects("nodeclaims") if c["metadata"]["name"] != name]
    assert any(
        c["type"] == "Initialized" and c["status"] == "True"
        for c in replacement["status"]["conditions"]
    )
    offerings = json.loads(replacement["metadata"]["annotations"]["daiku.dev/offerings"])
    assert offerings
    assert [o for o in offerings if tuple(o[:3]) == warned] == []

    async def moved() -> dict[str, str]:
        running = await web_pods_running(stack, 2)
        old_node = claim["status"]["nodeName"]
        return running if running and old_node not in running.values() else {}

    await until(moved, timeout_seconds=40)
    disrupting = [m for r, m in await events_about(stack, name) if r == "Disrupting"]
    assert disrupting
    assert disrupting[0].startswith("RebalanceRecommended: EC2 rebalance recommended at")


async def test_an_instance_stopping_event_disrupts_its_node(stack: Stack) -> None:
    """An instance state-change to `stopping` deletes the claim (event naming the state) and
    its pods move to a new node."""
    scheduler = await start(stack, replicas=1)
    await until(lambda: web_pods_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [node] = await stack.objects("nodes")
    [instance] = stack.running_instances()

    stack.cloud.ec2.send_instance_state_change(instance["InstanceId"], "stopping")

    async def moved() -> dict[str, str]:
        running = await web_pods_running(stack, 1)
        return running if running and node["metadata"]["name"] not in running.values() else {}

    await until(moved, timeout_seconds=40)
    assert claim["metadata"]["name"] not in [
        c["metadata"]["name"] for c in await stack.objects("nodeclaims")
    ]
    messages = await events_about(stack, claim["metadata"]["name"])
    assert ("Interrupted", "the instance is stopping") in messages
    assert (
        metric(
            scheduler,
            'daiku_scheduler_cloud_events_total{action="disrupted",kind="InstanceStateChange"}',
        )
        == 1
    )


async def test_only_the_leader_acts_on_cloud_events(stack: Stack) -> None:
    """Of two replicas only the Lease holder watches cloud events: a spot warning is handled
    once, by the leader; the standby never opened the stream."""
    lease: dict[str, Any] = {
        "leader_elect": True,
        "leader_election_namespace": "default",
        "lease_duration_seconds": 3.0,
        "lease_renew_deadline_seconds": 2.0,
        "lease_retry_period_seconds": 0.2,
    }
    pool = demo_object("nodepool.yaml")
    pool["spec"]["template"]["spec"]["requirements"] = SPOT_XLARGE
    await stack.store.create("ec2nodeclasses", demo_object("ec2nodeclass.yaml"))
    await stack.store.create("nodepools", pool)
    leader = await stack.start_scheduler(
        lifecycle=FAST_TERMINATION, leader_election_identity="a", **lease
    )
    await until(lambda: leader.service.is_leading)
    standby = await stack.start_scheduler(
        lifecycle=FAST_TERMINATION, leader_election_identity="b", **lease
    )
    await stack.create_pods(1, cpu="500m", memory="256Mi")
    await until(lambda: _one_running(stack), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [instance] = stack.running_instances()

    stack.cloud.ec2.send_spot_interruption(instance["InstanceId"])

    async def deleted() -> bool:
        return claim["metadata"]["name"] not in [
            c["metadata"]["name"] for c in await stack.objects("nodeclaims")
        ]

    await until(deleted, timeout_seconds=20)
    disrupted = (
        'daiku_scheduler_cloud_events_total{action="disrupted",kind="SpotInterruptionWarning"}'
    )
    assert metric(leader, disrupted) == 1
    assert metric(standby, disrupted) == 0
    assert standby.service.interruption is not None
    assert not standby.service.interruption.connected.is_set()


async def _one_running(stack: Stack) -> bool:
    pods = await stack.objects("pods", "default")
    return [p.get("status", {}).get("phase") for p in pods] == ["Running"]


async def _drained(stack: Stack, claim_name: str, node_name: str) -> bool:
    """The claim is gone and the web pod runs on another node."""
    claims = [c["metadata"]["name"] for c in await stack.objects("nodeclaims")]
    running = await web_pods_running(stack, 1)
    return claim_name not in claims and bool(running) and node_name not in running.values()


async def test_an_interruption_while_no_scheduler_runs_drains_the_node_once_one_starts(
    stack: Stack,
) -> None:
    """A spot interruption sent as the scheduler stops (its stream closing, the actuator's
    poll still reading) is not lost: the next scheduler drains and replaces the node."""
    scheduler = await start(stack, replicas=1)
    await until(lambda: web_pods_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [node] = await stack.objects("nodes")
    [instance] = stack.running_instances()
    scheduler.stop.set()
    stack.cloud.ec2.send_spot_interruption(instance["InstanceId"])
    await scheduler.halt()

    await stack.start_scheduler(lifecycle=FAST_TERMINATION)
    await until(
        lambda: _drained(stack, claim["metadata"]["name"], node["metadata"]["name"]),
        timeout_seconds=40,
    )


async def test_an_event_a_scheduler_received_but_never_acknowledged_comes_again(
    stack: Stack,
) -> None:
    """A scheduler killed after receiving an interruption and before acting on it (a stream
    that reads the event and closes without acknowledging) loses nothing: the next scheduler
    gets the event again and drains the node."""
    scheduler = await start(stack, replicas=1)
    await until(lambda: web_pods_running(stack, 1), timeout_seconds=30)
    [claim] = await stack.objects("nodeclaims")
    [node] = await stack.objects("nodes")
    [instance] = stack.running_instances()
    await scheduler.halt()

    async with grpc.aio.insecure_channel(stack.actuator.address) as channel:
        stream = actuator_pb2_grpc.ActuatorStub(channel).WatchCloudEvents(
            actuator_pb2.WatchCloudEventsRequest(acknowledge=True)
        )
        stack.cloud.ec2.send_spot_interruption(instance["InstanceId"])
        received = await asyncio.wait_for(stream.read(), timeout=15)
        assert isinstance(received, actuator_pb2.WatchCloudEventsResponse)
        assert received.nodeclaim_name == claim["metadata"]["name"]
        stream.cancel()

    await stack.start_scheduler(lifecycle=FAST_TERMINATION)
    await until(
        lambda: _drained(stack, claim["metadata"]["name"], node["metadata"]["name"]),
        timeout_seconds=40,
    )
