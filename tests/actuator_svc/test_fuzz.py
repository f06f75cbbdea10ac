"""The actuator's gRPC API under random and adversarial input (hypothesis), over a real socket
against the EC2 emulator: every answer is a deliberate status code with a message free of
Python internals, and a request refused as invalid reaches no CreateFleet."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import grpc
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actuator_svc.service import RunningActuator
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import TOKEN, node_class

METADATA = (("authorization", f"Bearer {TOKEN}"),)
# What a message must never show: exception class names, tracebacks, reprs of classes.
PYTHON_INTERNALS = re.compile(r"Traceback|<class |\b[A-Z][A-Za-z]*(Error|Exception)\b")
# Status codes a caller is told about in docs/actuator-api.md; UNKNOWN is never one.
DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAVAILABLE,
}
FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
ADVERSARIAL_TEXT = st.sampled_from(
    ["", "*", "1e999990", "-5", "-1Gi", "1e-999999", "NaN", "inf", "1e40", "0.000000001m",
     "9223372036854775808", "101%", "1e999%", "../..", "a" * 300, "\x00", "é", "Default"]
)  # fmt: skip
TEXT = st.one_of(ADVERSARIAL_TEXT, st.text(max_size=40))
NAMES = st.one_of(st.sampled_from(["web-1", "default", "a" * 253]), TEXT)
QUANTITIES = st.one_of(ADVERSARIAL_TEXT, st.sampled_from(["100m", "1Gi", "10%", "2"]))
RESERVED = st.dictionaries(
    st.one_of(st.sampled_from(["cpu", "memory", "pid", "ephemeral-storage"]), TEXT),
    QUANTITIES,
    max_size=4,
)
KUBELET = st.builds(
    pb.KubeletConfiguration,
    max_pods=st.one_of(st.none(), INT32),
    pods_per_core=st.one_of(st.none(), INT32),
    system_reserved=RESERVED,
    kube_reserved=RESERVED,
    eviction_hard=st.dictionaries(
        st.sampled_from(["memory.available", "nodefs.available", "pid.available"]),
        QUANTITIES,
        max_size=3,
    ),
)
BLOCK_DEVICES = st.lists(
    st.builds(
        pb.BlockDeviceMapping,
        device_name=st.one_of(st.just("/dev/xvda"), TEXT),
        volume_size_bytes=st.one_of(st.just(20 * 2**30), INT64),
        volume_type=st.one_of(st.sampled_from(["gp3", "io2", "st1"]), TEXT),
        iops=st.one_of(st.just(0), INT64),
        throughput_mibps=st.one_of(st.just(0), INT64),
        kms_key_id=TEXT,
        snapshot_id=st.one_of(st.just(""), TEXT),
    ),
    max_size=2,
)
METADATA_OPTIONS = st.builds(
    pb.MetadataOptions,
    http_endpoint=st.one_of(st.just("enabled"), TEXT),
    http_protocol_ipv6=st.one_of(st.just("disabled"), TEXT),
    http_put_response_hop_limit=INT32,
    http_tokens=st.one_of(st.just("required"), TEXT),
)


@st.composite
def node_classes(draw: st.DrawFn) -> pb.NodeClass:
    """The seeded node class with adversarial fields mixed in."""
    message = node_class()
    message.name = draw(st.one_of(st.just("default"), NAMES))
    message.ami_family = draw(st.one_of(st.sampled_from(["", "AL2023", "Custom", "AL2"]), TEXT))
    message.block_device_mappings.extend(draw(BLOCK_DEVICES))
    if draw(st.booleans()):
        message.metadata_options.CopyFrom(draw(METADATA_OPTIONS))
    message.tags.update(draw(st.dictionaries(TEXT, TEXT, max_size=3)))
    if draw(st.booleans()):
        message.ami_selector_terms[0].alias = draw(TEXT)
    return message


LAUNCH_REQUESTS = st.builds(
    pb.LaunchNodeClaimRequest,
    nodeclaim_name=NAMES,
    nodepool_name=NAMES,
    offerings=st.lists(
        st.builds(
            pb.Offering,
            instance_type=st.one_of(st.sampled_from(["m5.large", "c5.large"]), TEXT),
            zone=st.one_of(st.sampled_from(["us-east-1a", "us-east-1b"]), TEXT),
            capacity_type=st.one_of(st.sampled_from(["spot", "on-demand"]), TEXT),
        ),
        max_size=3,
    ),
    node_class=node_classes(),
    labels=st.dictionaries(TEXT, TEXT, max_size=3),
    taints=st.lists(st.builds(pb.Taint, key=TEXT, value=TEXT, effect=TEXT), max_size=2),
    kubelet=KUBELET,
)


def _check(code: grpc.StatusCode, details: str) -> None:
    assert code in DELIBERATE, (code, details)
    assert not PYTHON_INTERNALS.search(details), details


@pytest_asyncio.fixture
async def channel(actuator: RunningActuator) -> AsyncIterator[grpc.aio.Channel]:
    """One channel to the actuator for every example of a test."""
    async with grpc.aio.insecure_channel(actuator.address) as opened:
        yield opened


async def _call(send: Awaitable[Any]) -> grpc.StatusCode:
    """Await one call; check its status; return the code."""
    try:
        await send
    except grpc.aio.AioRpcError as error:
        _check(error.code(), error.details() or "")
        return error.code()
    return grpc.StatusCode.OK


def _raw(channel: grpc.aio.Channel, method: str) -> Any:
    return channel.unary_unary(
        f"/daiku.actuator.v1.Actuator/{method}",
        request_serializer=lambda raw: raw,
        response_deserializer=lambda raw: raw,
    )


@FUZZ
@given(request=LAUNCH_REQUESTS)
async def test_launch_answers_deliberately_and_refusals_reach_no_ec2(
    channel: grpc.aio.Channel, emulator: Ec2Emulator, request: pb.LaunchNodeClaimRequest
) -> None:
    """Any LaunchNodeClaim gets a documented status with a clean message; one refused as
    INVALID_ARGUMENT sends no CreateFleet."""
    emulator.clear_create_fleet_calls()
    code = await _call(
        actuator_pb2_grpc.ActuatorStub(channel).LaunchNodeClaim(
            request, metadata=METADATA, timeout=60
        )
    )
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        assert emulator.create_fleet_calls == []


@FUZZ
@given(kubelet=KUBELET, root_volume_size_bytes=INT64)
async def test_list_instance_types_answers_deliberately(
    channel: grpc.aio.Channel, kubelet: pb.KubeletConfiguration, root_volume_size_bytes: int
) -> None:
    """Any kubelet block and root volume size get a documented status with a clean message,
    and every allocatable figure of an OK answer is within capacity."""
    answers: list[pb.ListInstanceTypesResponse] = []

    async def send() -> None:
        answers.append(
            await actuator_pb2_grpc.ActuatorStub(channel).ListInstanceTypes(
                pb.ListInstanceTypesRequest(
                    kubelet=kubelet, root_volume_size_bytes=root_volume_size_bytes
                ),
                metadata=METADATA,
            )
        )

    await _call(send())
    for instance_type in answers[0].instance_types if answers else []:
        assert 0 <= instance_type.allocatable.cpu_millis <= instance_type.capacity.cpu_millis
        assert 0 <= instance_type.allocatable.memory_bytes <= instance_type.capacity.memory_bytes


@FUZZ
@given(name=NAMES, method=st.sampled_from(["GetNodeClaim", "TerminateNodeClaim", "ListNodeClaims"]))
async def test_calls_naming_a_claim_or_pool_answer_deliberately(
    channel: grpc.aio.Channel, name: str, method: str
) -> None:
    """Get, Terminate and List with any name get a documented status with a clean message."""
    requests = {
        "GetNodeClaim": pb.GetNodeClaimRequest(nodeclaim_name=name),
        "TerminateNodeClaim": pb.TerminateNodeClaimRequest(nodeclaim_name=name),
        "ListNodeClaims": pb.ListNodeClaimsRequest(nodepool_name=name),
    }
    stub = actuator_pb2_grpc.ActuatorStub(channel)
    await _call(getattr(stub, method)(requests[method], metadata=METADATA))


@FUZZ
@given(
    body=st.one_of(st.binary(max_size=64), st.sampled_from([b"\xff" * 8, b"\x0a\xff\xff\xff"])),
    method=st.sampled_from(
        [
            "LaunchNodeClaim",
            "ListInstanceTypes",
            "GetNodeClaim",
            "ListNodeClaims",
            "ResolveNodeClass",
        ]
    ),
)
async def test_raw_bytes_answer_deliberately(
    channel: grpc.aio.Channel, body: bytes, method: str
) -> None:
    """Arbitrary bytes as a request body (corrupt wire format included) get a documented status
    with a clean message, never UNKNOWN naming a DecodeError."""
    await _call(_raw(channel, method)(body, metadata=METADATA, timeout=60))


@pytest.mark.parametrize(
    ("method", "limit"), [("GetNodeClaim", 4 * 1024), ("LaunchNodeClaim", 256 * 1024)]
)
async def test_bodies_over_a_methods_limit_are_refused_before_parsing(
    channel: grpc.aio.Channel, method: str, limit: int
) -> None:
    """A body over its method's limit is RESOURCE_EXHAUSTED naming the limit (for the largest,
    grpc's own receive limit answers, unread)."""
    body = b"\x0a" + _varint(limit) + b"a" * limit  # a length-delimited field 1
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _raw(channel, method)(body, metadata=METADATA)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(limit) in (info.value.details() or "")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
