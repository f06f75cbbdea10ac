"""Two `python -m actuator_svc` processes against one EC2 emulator, as the Deployment's replicas."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import CLUSTER, launch_request, offering

TOKEN = "replica-token"
METADATA = (("authorization", f"Bearer {TOKEN}"),)
ICED = offering("m5.large", "us-east-1a", "spot")
OPEN = offering("m5.large", "us-east-1b", "spot")


async def _start(emulator: Ec2Emulator, started: list[asyncio.subprocess.Process]) -> str:
    """Start one actuator process (recorded in `started` at once, so teardown always reaps
    it) and return its address."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "ACTUATOR_EC2_ENDPOINT_URL": emulator.endpoint_url,
        "ACTUATOR_AUTH_TOKEN": TOKEN,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actuator_svc", "--listen", "127.0.0.1:0",
        "--cluster-name", CLUSTER, "--log-level", "WARNING",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    started.append(process)
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), timeout=240)).decode()
    assert line.startswith("ready "), line
    return line.split()[1]


@pytest_asyncio.fixture
async def replicas(
    emulator: Ec2Emulator,
) -> AsyncIterator[list[actuator_pb2_grpc.ActuatorAsyncStub]]:
    """Two actuator processes with their own memory (ICE caches), and a client for each."""
    started: list[asyncio.subprocess.Process] = []
    channels: list[grpc.aio.Channel] = []
    try:
        # One after the other, each with its catalog loaded: two catalog fetches at once (900
        # instance types each through moto) can starve the emulator's other calls on a busy
        # machine, and a fetch left for first use would run beside the launches.
        stubs = []
        for _ in range(2):
            channels.append(grpc.aio.insecure_channel(await _start(emulator, started)))
            stubs.append(actuator_pb2_grpc.ActuatorStub(channels[-1]))
            await stubs[-1].ListInstanceTypes(
                pb.ListInstanceTypesRequest(), metadata=METADATA, timeout=240
            )
        yield stubs
    finally:
        for channel in channels:
            await channel.close()
        for process in started:
            process.kill()
            await process.wait()


@pytest.mark.timeout(600)  # two processes start under a shared machine's load
async def test_two_replicas_with_different_ice_caches_launch_one_instance_per_claim(
    emulator: Ec2Emulator, replicas: list[actuator_pb2_grpc.ActuatorAsyncStub]
) -> None:
    """Replica A has cached an ICE on the claims' first offering, replica B has not; the same
    20 claims sent to both at once get one instance each, and both replicas report it."""
    first, second = replicas
    emulator.set_capacity(
        instance_type="m5.large", zone="us-east-1a", capacity_type="spot", available=False
    )
    await first.LaunchNodeClaim(launch_request("warm-a", ICED, OPEN), metadata=METADATA)
    emulator.reset_capacity()  # capacity is back; only replica A still believes it is not

    async def both(name: str) -> set[str]:
        request = launch_request(name, ICED, OPEN)
        answers = await asyncio.gather(
            first.LaunchNodeClaim(request, metadata=METADATA),
            second.LaunchNodeClaim(request, metadata=METADATA),
        )
        return {a.instance_id for a in answers}

    answered = await asyncio.gather(*(both(f"twin-{i}") for i in range(20)))
    listed = await first.ListNodeClaims(pb.ListNodeClaimsRequest(), metadata=METADATA)
    per_claim = Counter(n.nodeclaim_name for n in listed.nodeclaims if n.nodeclaim_name != "warm-a")
    assert per_claim == Counter({f"twin-{i}": 1 for i in range(20)})
    assert [len(ids) for ids in answered] == [1] * 20
