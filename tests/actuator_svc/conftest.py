"""Fixtures: the EC2 emulator over HTTP on loopback and an actuator serving gRPC on loopback."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
import pytest_asyncio

from actuator_svc.cloud.ec2 import AwsEndpoints, RetryPolicy
from actuator_svc.service import ActuatorSettings, RunningActuator, serve
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator

TOKEN = "test-token"
CLUSTER = "daiku"


class ManualClock:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    """moto-based EC2/SQS/Pricing emulator on 127.0.0.1 (one per module: moto is global)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        with Ec2Emulator(port=0, region="us-east-1", cluster_name=CLUSTER) as emu:
            yield emu


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


class ActuatorThread:
    """An actuator serving on 127.0.0.1 from its own thread and event loop.

    One actuator serves a whole test module (its catalog prefetch takes seconds); each test
    talks to it over a real channel from its own event loop."""

    def __init__(self, settings: ActuatorSettings, clock: ManualClock) -> None:
        self._settings = settings
        self._clock = clock
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.running: RunningActuator | None = None
        self._thread = threading.Thread(target=self._run, name="actuator", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with serve(self._settings, clock=self._clock, grace_seconds=0.5) as running:
            self.running = running
            self._ready.set()
            await self._stop.wait()

    def start(self) -> RunningActuator:
        self._thread.start()
        if not self._ready.wait(timeout=180) or self.running is None:
            raise RuntimeError(f"actuator did not start: {self._error!r}")
        return self.running

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)


@pytest.fixture(scope="module")
def actuator(emulator: Ec2Emulator, clock: ManualClock) -> Iterator[RunningActuator]:
    """The actuator on 127.0.0.1:<free port>, token-protected, talking to the emulator."""
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        cluster_name=CLUSTER,
        endpoints=AwsEndpoints(ec2=emulator.endpoint_url, pricing=emulator.endpoint_url),
        interruption_queue=emulator.interruption_queue_name,
        interruption_wait_seconds=1,
        auth_token=TOKEN,
        retry=RetryPolicy(max_attempts=4, base_seconds=0.01, max_seconds=0.05),
    )
    server = ActuatorThread(settings, clock)
    try:
        yield server.start()
    finally:
        server.stop()


class _BearerToken:
    """Adds `authorization: Bearer <token>` to every call."""

    def __init__(self, token: str) -> None:
        self._authorization = f"Bearer {token}"

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        metadata.add("authorization", self._authorization)
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            details.wait_for_ready,
        )


class BearerTokenUnary(_BearerToken, grpc.aio.UnaryUnaryClientInterceptor):
    """Token on unary calls (grpc.aio files an interceptor under one call kind only)."""

    async def intercept_unary_unary(
        self, continuation: Any, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


class BearerTokenStream(_BearerToken, grpc.aio.UnaryStreamClientInterceptor):
    """Token on server-streaming calls."""

    async def intercept_unary_stream(
        self, continuation: Any, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


@pytest_asyncio.fixture
async def stub(actuator: RunningActuator) -> AsyncIterator[actuator_pb2_grpc.ActuatorAsyncStub]:
    """A client on a real channel, sending the bearer token."""
    async with grpc.aio.insecure_channel(
        actuator.address, interceptors=[BearerTokenUnary(TOKEN), BearerTokenStream(TOKEN)]
    ) as channel:
        yield actuator_pb2_grpc.ActuatorStub(channel)


@pytest.fixture(autouse=True)
def _fresh_capacity(request: pytest.FixtureRequest) -> None:
    """Every pool has capacity and no faults are armed when a test starts."""
    if "emulator" in request.fixturenames:
        emu: Ec2Emulator = request.getfixturevalue("emulator")
        emu.reset_capacity()
        emu.clear_faults()
        emu.clear_create_fleet_calls()
    if "actuator" in request.fixturenames:
        request.getfixturevalue("actuator").unavailable.clear()


# The message constructors check each field's type when they build the message; the overrides
# are typed Any so a test can pass any field, as keywords to the constructor would.
def node_class(**overrides: Any) -> pb.NodeClass:
    """The seeded cluster's node class: discovery-tagged subnets and SG, al2023@latest."""
    fields: dict[str, Any] = {
        "name": "default",
        "subnet_selector_terms": [pb.SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})],
        "security_group_selector_terms": [
            pb.SecurityGroupSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})
        ],
        "ami_selector_terms": [pb.AmiSelectorTerm(alias="al2023@latest")],
        "tags": {"team": "platform"},
    }
    fields.update(overrides)
    return pb.NodeClass(**fields)


def offering(instance_type: str, zone: str, capacity_type: str) -> pb.Offering:
    return pb.Offering(instance_type=instance_type, zone=zone, capacity_type=capacity_type)


def launch_request(
    name: str, *offerings: pb.Offering, **overrides: Any
) -> pb.LaunchNodeClaimRequest:
    fields: dict[str, Any] = {
        "nodeclaim_name": name,
        "nodepool_name": "default",
        "offerings": list(offerings),
        "node_class": node_class(),
        "labels": {"app": "web"},
        "taints": [pb.Taint(key="dedicated", value="web", effect="NoSchedule")],
    }
    fields.update(overrides)
    return pb.LaunchNodeClaimRequest(**fields)
