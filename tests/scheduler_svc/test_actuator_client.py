"""The actuator client against a real grpc.aio server on loopback.

The server runs `ContractDouble`, a small servicer implementing the generated
`ActuatorServicer` with scripted answers: a test double for the contract, not the actuator.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cryptography import x509
from google.protobuf import any_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]  # no stubs
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from grpc_status import rpc_status

from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc
from scheduler_svc.actuator_client import (
    SERVICE_NAME,
    ActuatorClient,
    ActuatorDeadlines,
    CloudEvent,
    CloudEventKind,
    TlsFiles,
)
from scheduler_svc.core.model import InstanceType, OfferingOption
from scheduler_svc.core.nodeclass import NodeClassSpec
from scheduler_svc.core.taints import Taint, TaintEffect
from scheduler_svc.errors import (
    DeadlineExceededError,
    FailedOffering,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from scheduler_svc.kube.convert import kubelet_from_k8s, node_class_from_k8s
from tests.certificates import certificate, new_key, pem

TOKEN = "s3cret"
LAUNCHED_AT = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


def stamp(when: dt.datetime) -> Timestamp:
    result = Timestamp()
    result.FromDatetime(when)
    return result


@dataclass
class ContractDouble(actuator_pb2_grpc.ActuatorServicer):
    """Scripted answers; records each request and its authorization header."""

    requests: list[Any] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    exhausted: bool = False
    unavailable_times: int = 0
    launch_blocked: asyncio.Event | None = None
    events: list[actuator_pb2.WatchCloudEventsResponse] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    # The selector list ResolveNodeClass finds nothing for (e.g. "ami_selector_terms"), as when
    # the cloud holds no subnet, security group or AMI the terms name.
    nothing_selected: str | None = None

    async def _check(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self.requests.append(request)
        auth = dict(context.invocation_metadata() or ()).get("authorization")
        self.authorizations.append(auth if isinstance(auth, str) else None)
        if auth != f"Bearer {TOKEN}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        if self.unavailable_times:
            self.unavailable_times -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "EC2 throttled")

    async def ListInstanceTypes(self, request: Any, context: Any) -> Any:
        await self._check(request, context)
        resources = actuator_pb2.Resources(
            cpu_millis=2000,
            memory_bytes=8 * 2**30,
            pods=29,
            ephemeral_storage_bytes=20 * 2**30,
            extended_resources={"nvidia.com/gpu": 1},
        )
        return actuator_pb2.ListInstanceTypesResponse(
            instance_types=[
                actuator_pb2.InstanceType(
                    name="m5.large",
                    capacity=resources,
                    allocatable=actuator_pb2.Resources(cpu_millis=1930, memory_bytes=7 * 2**30),
                    labels={"kubernetes.io/arch": "amd64"},
                    offerings=[
                        actuator_pb2.Offering(
                            instance_type="m5.large",
                            zone="us-east-1a",
                            capacity_type="spot",
                            price=0.035,
                            available=True,
                        ),
                        actuator_pb2.Offering(
                            instance_type="m5.large",
                            zone="us-east-1b",
                            capacity_type="on-demand",
                            price=0.096,
                            available=False,
                            unavailable_reason="InsufficientInstanceCapacity",
                        ),
                    ],
                )
            ]
        )

    async def LaunchNodeClaim(self, request: Any, context: Any) -> Any:
        await self._check(request, context)
        if self.launch_blocked is not None:
            await self.launch_blocked.wait()
        if self.exhausted:
            errors = [
                actuator_pb2.OfferingError(
                    offering=o, error_code="InsufficientInstanceCapacity", message="no capacity"
                )
                for o in request.offerings
            ]
            failure = actuator_pb2.LaunchNodeClaimFailure(
                nodeclaim_name=request.nodeclaim_name,
                attempts=[actuator_pb2.LaunchAttempt(offerings=request.offerings, errors=errors)],
            )
            detail = any_pb2.Any()
            detail.Pack(failure)
            status = status_pb2.Status(
                code=code_pb2.RESOURCE_EXHAUSTED,
                message="every offering failed",
                details=[detail],
            )
            await context.abort_with_status(rpc_status.to_status(status))
        chosen = request.offerings[0]
        return actuator_pb2.LaunchNodeClaimResponse(
            provider_id=f"aws:///{chosen.zone}/i-0123",
            instance_id="i-0123",
            instance_type=chosen.instance_type,
            zone=chosen.zone,
            capacity_type=chosen.capacity_type,
            price=0.035,
            image_id="ami-1",
            launch_time=stamp(LAUNCHED_AT),
            subnet_id="subnet-1a",
            security_group_ids=["sg-2", "sg-1"],
            attempts=[
                actuator_pb2.LaunchAttempt(
                    start_time=stamp(LAUNCHED_AT),
                    end_time=stamp(LAUNCHED_AT),
                    offerings=[chosen],
                )
            ],
        )

    async def TerminateNodeClaim(self, request: Any, context: Any) -> Any:
        await self._check(request, context)
        if request.nodeclaim_name == "never-launched":
            await context.abort(grpc.StatusCode.NOT_FOUND, "no instance tagged never-launched")
        return actuator_pb2.TerminateNodeClaimResponse(instance_id="i-0123", state="shutting-down")

    async def GetNodeClaim(self, request: Any, context: Any) -> Any:
        await self._check(request, context)
        if not request.nodeclaim_name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "nodeclaim_name: required")
        return actuator_pb2.GetNodeClaimResponse(nodeclaim=self._nodeclaim(request.nodeclaim_name))

    async def ListNodeClaims(self, request: Any, context: Any) -> Any:
        await self._check(request, context)
        return actuator_pb2.ListNodeClaimsResponse(
            nodeclaims=[self._nodeclaim("default-a"), self._nodeclaim("default-b")]
        )

    async def ResolveNodeClass(
        self,
        request: actuator_pb2.ResolveNodeClassRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> actuator_pb2.ResolveNodeClassResponse:
        """Answers as the actuator does: INVALID_ARGUMENT naming an empty selector list,
        FAILED_PRECONDITION naming the list that selects nothing, else what the terms select
        (subnets with the most free addresses first, one AMI per architecture)."""
        await self._check(request, context)
        node_class = request.node_class
        for name, terms in (
            ("subnet_selector_terms", node_class.subnet_selector_terms),
            ("security_group_selector_terms", node_class.security_group_selector_terms),
            ("ami_selector_terms", node_class.ami_selector_terms),
        ):
            if not terms:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"node_class.{name}: needs at least one term"
                )
        if self.nothing_selected is not None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"node_class.{self.nothing_selected}: match nothing",
            )
        return actuator_pb2.ResolveNodeClassResponse(
            subnets=[
                actuator_pb2.ResolvedSubnet(id="subnet-b", zone="us-east-1b", zone_id="use1-az2"),
                actuator_pb2.ResolvedSubnet(id="subnet-a", zone="us-east-1a", zone_id="use1-az1"),
            ],
            security_groups=[actuator_pb2.ResolvedSecurityGroup(id="sg-1", name="daiku-nodes")],
            amis=[
                actuator_pb2.ResolvedAmi(
                    id=f"ami-{arch}",
                    name=f"amazon-eks-node-al2023-{machine}-standard-1.31-v20261101",
                    requirements=[
                        actuator_pb2.NodeSelectorRequirement(
                            key="kubernetes.io/arch", operator="In", values=[arch]
                        )
                    ],
                )
                for arch, machine in (("amd64", "x86_64"), ("arm64", "arm64"))
            ],
        )

    async def WatchCloudEvents(self, request: Any, context: Any) -> AsyncIterator[Any]:
        await self._check(request, context)
        for event in self.events:
            yield event
        await context.abort(grpc.StatusCode.UNAVAILABLE, "actuator shutting down")

    async def AcknowledgeCloudEvents(
        self, request: actuator_pb2.AcknowledgeCloudEventsRequest, context: Any
    ) -> actuator_pb2.AcknowledgeCloudEventsResponse:
        await self._check(request, context)
        self.acknowledged.extend(request.ack_tokens)
        return actuator_pb2.AcknowledgeCloudEventsResponse()

    @staticmethod
    def _nodeclaim(name: str) -> actuator_pb2.NodeClaim:
        return actuator_pb2.NodeClaim(
            nodeclaim_name=name,
            nodepool_name="default",
            provider_id="aws:///us-east-1a/i-0123",
            instance_id="i-0123",
            instance_type="m5.large",
            zone="us-east-1a",
            capacity_type="spot",
            state="running",
            launch_time=stamp(LAUNCHED_AT),
            tags={"daiku.dev/nodeclaim": name},
            subnet_id="subnet-1a",
            security_group_ids=["sg-2", "sg-1"],
        )


@dataclass
class Served:
    servicer: ContractDouble
    address: str
    health: Any


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    servicer = ContractDouble()
    server = grpc.aio.server()
    actuator_pb2_grpc.add_ActuatorServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    try:
        yield Served(servicer, f"127.0.0.1:{port}", health_servicer)
    finally:
        await server.stop(grace=None)


@pytest.fixture
async def actuator(served: Served) -> AsyncIterator[ActuatorClient]:
    async with ActuatorClient.connect(served.address, token=TOKEN) as client:
        yield client


NODE_CLASS = NodeClassSpec(name="default", ami_family="AL2023")


async def test_instance_types_arrive_as_core_models_and_calls_carry_the_token(
    served: Served, actuator: ActuatorClient
) -> None:
    """ListInstanceTypes answers become core InstanceTypes (resources in base units, every
    offering with its availability) and the call carries the bearer token."""
    (instance_type,) = await actuator.list_instance_types(root_volume_size_bytes=50 * 2**30)

    assert instance_type.name == "m5.large"
    assert instance_type.capacity.cpu_millis == 2000
    assert instance_type.capacity.memory_bytes == 8 * 2**30
    assert instance_type.capacity.pods == 29
    assert instance_type.capacity.extended == (("nvidia.com/gpu", 1),)
    assert instance_type.allocatable.cpu_millis == 1930
    assert [
        (o.zone, o.capacity_type, o.price_per_hour, o.available) for o in instance_type.offerings
    ] == [
        ("us-east-1a", "spot", 0.035, True),
        ("us-east-1b", "on-demand", 0.096, False),
    ]
    assert served.servicer.authorizations == [f"Bearer {TOKEN}"]
    assert served.servicer.requests[0].root_volume_size_bytes == 50 * 2**30


async def test_catalog_strings_are_shared_between_answers(actuator: ActuatorClient) -> None:
    """The catalog's names, labels, zones and capacity types are interned: two answers share
    each string instead of holding a copy per instance type and offering (decision 0010)."""
    (first,) = await actuator.list_instance_types()
    (second,) = await actuator.list_instance_types()

    def strings(t: InstanceType) -> list[str]:
        offerings = [s for o in t.offerings for s in (o.zone, o.capacity_type)]
        return [t.name, *t.labels, *t.labels.values(), *offerings]

    assert strings(first) == strings(second)
    assert all(a is b for a, b in zip(strings(first), strings(second), strict=True))


async def test_launch_sends_offerings_in_order_and_returns_the_instance(
    served: Served, actuator: ActuatorClient
) -> None:
    """LaunchNodeClaim carries the ordered offerings, labels and taints, and its answer
    becomes a LaunchedInstance with provider id, price, attempts, subnet and (sorted) security
    groups."""
    launched = await actuator.launch_nodeclaim(
        nodeclaim_name="default-x1",
        nodepool_name="default",
        offerings=[
            OfferingOption("m5.large", "us-east-1a", "spot", 0.035),
            OfferingOption("m5.large", "us-east-1b", "on-demand", 0.096),
        ],
        node_class=NODE_CLASS,
        labels={"team": "ml"},
        taints=[Taint("dedicated", TaintEffect.NO_SCHEDULE, "ml")],
        startup_taints=[Taint("daiku.dev/unregistered", TaintEffect.NO_EXECUTE)],
        nodeclaim_uid="6a1f5c1e-0b7e-4c5e-9d59-1d0c3f5b2a10",
    )

    request = served.servicer.requests[0]
    assert request.nodeclaim_uid == "6a1f5c1e-0b7e-4c5e-9d59-1d0c3f5b2a10"
    assert [(o.instance_type, o.zone, o.capacity_type) for o in request.offerings] == [
        ("m5.large", "us-east-1a", "spot"),
        ("m5.large", "us-east-1b", "on-demand"),
    ]
    assert dict(request.labels) == {"team": "ml"}
    assert [(t.key, t.value, t.effect) for t in request.taints] == [
        ("dedicated", "ml", "NoSchedule")
    ]
    assert [t.effect for t in request.startup_taints] == ["NoExecute"]
    assert request.node_class.ami_family == "AL2023"
    assert launched.provider_id == "aws:///us-east-1a/i-0123"
    assert launched.price_per_hour == 0.035
    assert launched.launch_time == LAUNCHED_AT
    assert launched.attempts[0].offerings == (("m5.large", "us-east-1a", "spot"),)
    assert launched.attempts[0].failed_offerings == ()
    assert launched.subnet_id == "subnet-1a"
    assert launched.security_group_ids == ("sg-1", "sg-2")


async def test_the_example_ec2nodeclass_reaches_the_actuator_as_the_contracts_node_class(
    served: Served, actuator: ActuatorClient
) -> None:
    """The shipped EC2NodeClass, converted once at the edge, arrives in LaunchNodeClaim and
    ListInstanceTypes as the contract's NodeClass and KubeletConfiguration (selector terms,
    tags, block devices in bytes, IMDS options, maxPods set and podsPerCore unset)."""
    example = yaml.safe_load(
        (Path(__file__).parents[2] / "deploy/examples/ec2nodeclass-default.yaml").read_text()
    )
    await actuator.launch_nodeclaim(
        nodeclaim_name="default-x2",
        nodepool_name="default",
        offerings=[OfferingOption("m5.large", "us-east-1a", "spot", 0.035)],
        node_class=node_class_from_k8s(example),
        kubelet=kubelet_from_k8s(example),
    )
    await actuator.list_instance_types(kubelet=kubelet_from_k8s(example))
    launch, listing = served.servicer.requests
    node_class = launch.node_class
    assert node_class.role == "KarpenterNodeRole-my-cluster"
    assert [t.alias for t in node_class.ami_selector_terms] == ["al2023@latest"]
    assert [dict(t.tags) for t in node_class.subnet_selector_terms] == [
        {"karpenter.sh/discovery": "my-cluster"}
    ]
    assert dict(node_class.tags) == {"team": "platform"}
    (root,) = node_class.block_device_mappings
    assert (root.device_name, root.root_volume, root.volume_size_bytes, root.volume_type) == (
        "/dev/xvda",
        True,
        50 * 2**30,
        "gp3",
    )
    assert node_class.metadata_options.http_tokens == "required"
    for kubelet in (launch.kubelet, listing.kubelet):
        assert kubelet.max_pods == 110
        assert not kubelet.HasField("pods_per_core")
        assert dict(kubelet.system_reserved) == {"cpu": "100m", "memory": "100Mi"}


async def test_resource_exhausted_carries_every_failed_offering(
    served: Served, actuator: ActuatorClient
) -> None:
    """A RESOURCE_EXHAUSTED launch raises ResourceExhaustedError listing each offering tried
    and its EC2 error, decoded from the LaunchNodeClaimFailure detail."""
    served.servicer.exhausted = True
    with pytest.raises(ResourceExhaustedError) as raised:
        await actuator.launch_nodeclaim(
            nodeclaim_name="default-x2",
            nodepool_name="default",
            offerings=[
                OfferingOption("c5.large", "us-east-1a", "spot", 0.03),
                OfferingOption("c5.large", "us-east-1c", "spot", 0.031),
            ],
            node_class=NODE_CLASS,
        )

    error = raised.value
    assert error.code == "RESOURCE_EXHAUSTED"
    assert error.nodeclaim_name == "default-x2"
    assert error.failed_offerings == (
        FailedOffering(
            "c5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity", "no capacity"
        ),
        FailedOffering(
            "c5.large", "us-east-1c", "spot", "InsufficientInstanceCapacity", "no capacity"
        ),
    )


async def test_status_codes_become_typed_errors(served: Served, actuator: ActuatorClient) -> None:
    """NOT_FOUND, INVALID_ARGUMENT and UNAUTHENTICATED raise NotFoundError,
    InvalidArgumentError and UnauthenticatedError with the server's message."""
    with pytest.raises(NotFoundError, match="no instance tagged never-launched"):
        await actuator.terminate_nodeclaim("never-launched")
    with pytest.raises(InvalidArgumentError, match="nodeclaim_name: required"):
        await actuator.get_nodeclaim("")
    async with ActuatorClient.connect(served.address, token="wrong") as intruder:
        with pytest.raises(UnauthenticatedError):
            await intruder.list_nodeclaims()


async def test_terminate_get_and_list_return_instances(actuator: ActuatorClient) -> None:
    """Terminate returns the instance's new state; Get and List return CloudInstances (with
    their subnet and sorted security groups)."""
    terminated = await actuator.terminate_nodeclaim("default-a")
    instance = await actuator.get_nodeclaim("default-a")
    instances = await actuator.list_nodeclaims()

    assert (terminated.instance_id, terminated.state) == ("i-0123", "shutting-down")
    assert instance.nodeclaim_name == "default-a"
    assert instance.state == "running"
    assert instance.launch_time == LAUNCHED_AT
    assert instance.tags == {"daiku.dev/nodeclaim": "default-a"}
    assert (instance.subnet_id, instance.security_group_ids) == ("subnet-1a", ("sg-1", "sg-2"))
    assert [i.nodeclaim_name for i in instances] == ["default-a", "default-b"]


async def test_unavailable_is_retried_by_the_channel_then_raised(
    served: Served, actuator: ActuatorClient
) -> None:
    """Two UNAVAILABLE answers are retried transparently; three (the attempt limit) raise
    UnavailableError."""
    served.servicer.unavailable_times = 2
    assert len(await actuator.list_nodeclaims()) == 2
    assert len(served.servicer.requests) == 3

    served.servicer.unavailable_times = 3
    with pytest.raises(UnavailableError, match="EC2 throttled"):
        await actuator.list_nodeclaims()


async def test_a_call_past_its_deadline_raises_deadline_exceeded(served: Served) -> None:
    """A launch with no answer within its deadline raises DeadlineExceededError."""
    served.servicer.launch_blocked = asyncio.Event()
    deadlines = ActuatorDeadlines(launch_nodeclaim_seconds=0.2)
    async with ActuatorClient.connect(served.address, token=TOKEN, deadlines=deadlines) as client:
        with pytest.raises(DeadlineExceededError):
            await client.launch_nodeclaim(
                nodeclaim_name="slow",
                nodepool_name="default",
                offerings=[OfferingOption("m5.large", "us-east-1a", "spot", 0.035)],
                node_class=NODE_CLASS,
            )
    served.servicer.launch_blocked.set()


async def test_cloud_events_stream_converted_then_end_with_unavailable(
    served: Served, actuator: ActuatorClient
) -> None:
    """WatchCloudEvents (asking to acknowledge) yields each event with its kind, times,
    offering and ack token, and ends with UnavailableError when the actuator closes the stream;
    acknowledging sends the tokens of the events that have one."""
    served.servicer.events = [
        actuator_pb2.WatchCloudEventsResponse(
            id="e1",
            kind=actuator_pb2.CLOUD_EVENT_KIND_SPOT_INTERRUPTION_WARNING,
            instance_id="i-0123",
            provider_id="aws:///us-east-1a/i-0123",
            nodeclaim_name="default-a",
            time=stamp(LAUNCHED_AT),
            deadline=stamp(LAUNCHED_AT + dt.timedelta(minutes=2)),
            offering=actuator_pb2.Offering(
                instance_type="m5.large", zone="us-east-1a", capacity_type="spot"
            ),
            ack_token="0/1/rh-1",
        ),
        actuator_pb2.WatchCloudEventsResponse(
            id="e2",
            kind=actuator_pb2.CLOUD_EVENT_KIND_INSTANCE_STATE_CHANGE,
            instance_id="i-0456",
            instance_state="terminated",
        ),
    ]
    received: list[CloudEvent] = []

    async def consume() -> None:
        async for event in actuator.watch_cloud_events():
            received.append(event)  # noqa: PERF401 - the list must survive the raise

    with pytest.raises(UnavailableError):
        await consume()

    first, second = received
    assert first.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING
    assert first.deadline == LAUNCHED_AT + dt.timedelta(minutes=2)
    assert first.offering == ("m5.large", "us-east-1a", "spot")
    assert second.kind is CloudEventKind.INSTANCE_STATE_CHANGE
    assert (second.instance_state, second.nodeclaim_name, second.offering) == (
        "terminated",
        "",
        None,
    )
    assert served.servicer.requests[0].acknowledge
    assert first.ack_token == "0/1/rh-1"
    await actuator.acknowledge_cloud_events([first, second])
    assert served.servicer.acknowledged == ["0/1/rh-1"]


async def test_mutual_tls_connects_with_the_ca_client_certificate_and_server_name(
    tmp_path: Path,
) -> None:
    """With a CA file, a client certificate and the server name, the client completes a
    mutual-TLS handshake with a server that requires client certificates."""
    ca_key, server_key, client_key = new_key(), new_key(), new_key()
    ca = certificate("daiku-test-ca", ca_key)
    server_cert = certificate(
        "actuator.daiku.internal",
        server_key,
        issuer=(ca, ca_key),
        alt_names=[x509.DNSName("actuator.daiku.internal")],
    )
    client_cert = certificate("scheduler", client_key, issuer=(ca, ca_key))
    files = {
        "ca.pem": pem(ca),
        "client.pem": pem(client_cert),
        "client.key": pem(client_key),
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)

    server = grpc.aio.server()
    servicer = ContractDouble()
    actuator_pb2_grpc.add_ActuatorServicer_to_server(servicer, server)
    credentials = grpc.ssl_server_credentials(
        [(pem(server_key), pem(server_cert))],
        root_certificates=pem(ca),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    try:
        tls = TlsFiles(
            ca_file=tmp_path / "ca.pem",
            cert_file=tmp_path / "client.pem",
            key_file=tmp_path / "client.key",
            server_name="actuator.daiku.internal",
        )
        async with ActuatorClient.connect(f"127.0.0.1:{port}", token=TOKEN, tls=tls) as client:
            assert len(await client.list_nodeclaims()) == 2
        no_client_cert = TlsFiles(
            ca_file=tmp_path / "ca.pem", server_name="actuator.daiku.internal"
        )
        async with ActuatorClient.connect(
            f"127.0.0.1:{port}", token=TOKEN, tls=no_client_cert
        ) as anonymous:
            with pytest.raises(UnavailableError):
                await anonymous.list_nodeclaims()
    finally:
        await server.stop(grace=None)


async def test_is_serving_follows_the_health_service_and_never_raises(served: Served) -> None:
    """is_serving is True while the actuator's health check says SERVING, False once it says
    NOT_SERVING, and False (not an exception) when nothing listens."""
    async with ActuatorClient.connect(served.address, token=TOKEN) as client:
        assert await client.is_serving() is True
        await served.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
        assert await client.is_serving() is False
    probe = grpc.aio.server()
    free_port = probe.add_insecure_port("127.0.0.1:0")
    await probe.stop(grace=None)  # nothing listens on free_port now
    async with ActuatorClient.connect(f"127.0.0.1:{free_port}") as nobody:
        assert await nobody.is_serving(timeout_seconds=0.5) is False


async def test_an_actuator_that_starts_late_is_waited_for_and_then_answers_at_once() -> None:
    """The scheduler's client, used (and refused) before the actuator listens, waits for its
    health to say SERVING once it starts, and the first call after that succeeds instead of
    failing to connect. How soon is not asserted here: with the client's reconnect backoff
    (100 ms x 1.6^n, jittered) the attempt after 1.5 s of refusals can itself come ~1 s after
    the server starts, and a 1.0 s bound failed in a clean CI run; speed lives in the benches
    (`bench.reaction` starts the stack and times the first launch)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens on it once closed: connections refused
    async with ActuatorClient.connect(f"127.0.0.1:{port}", token=TOKEN) as client:
        assert await client.is_serving(timeout_seconds=0.5) is False  # refused: backoff starts
        assert await client.wait_until_serving(timeout_seconds=0.3) is False
        waiting = asyncio.create_task(client.wait_until_serving(timeout_seconds=20))
        await asyncio.to_thread(time.sleep, 1.5)  # the actuator starts late: 1.5 s of refusals
        server = grpc.aio.server()
        actuator_pb2_grpc.add_ActuatorServicer_to_server(ContractDouble(), server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        try:
            assert await waiting is True
            (instance_type,) = await client.list_instance_types(root_volume_size_bytes=2**30)
            assert instance_type.name == "m5.large"
        finally:
            await server.stop(grace=None)
