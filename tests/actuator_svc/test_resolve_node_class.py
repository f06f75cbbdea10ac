"""ResolveNodeClass over real gRPC on loopback, against the EC2 emulator over HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
import pytest

from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator
from localcloud.ec2.emulator import EKS_KUBERNETES_VERSION
from tests.actuator_svc.conftest import launch_request, node_class, offering

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client

if TYPE_CHECKING:
    # ActuatorStub(channel) on a grpc.aio channel; the async stub type exists only in the stubs.
    Stub = actuator_pb2_grpc.ActuatorAsyncStub


def _ec2(emulator: Ec2Emulator) -> EC2Client:
    import boto3

    return boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.endpoint_url)


async def test_the_seeded_node_class_resolves_to_its_subnets_group_and_images(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """The discovery-tagged subnets (zone and zone id), the security group with its name and
    the newest al2023 image per architecture come back with their arch requirement."""
    response = await stub.ResolveNodeClass(pb.ResolveNodeClassRequest(node_class=node_class()))
    assert {s.id: s.zone for s in response.subnets} == {
        subnet: zone for zone, subnet in emulator.subnet_ids.items()
    }
    assert all(s.zone_id for s in response.subnets)
    assert [(g.id, g.name) for g in response.security_groups] == [
        (emulator.security_group_id, "daiku-nodes")
    ]
    amis = {
        (a.id, tuple((r.key, r.operator, tuple(r.values)) for r in a.requirements))
        for a in response.amis
    }
    assert amis == {
        (emulator.image_ids["x86_64"], (("kubernetes.io/arch", "In", ("amd64",)),)),
        (emulator.image_ids["arm64"], (("kubernetes.io/arch", "In", ("arm64",)),)),
    }
    assert all(a.name.startswith("amazon-eks-node-al2023-") for a in response.amis)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            {"subnet_selector_terms": [pb.SubnetSelectorTerm(tags={"nope": "x"})]},
            "node_class.subnet_selector_terms",
        ),
        (
            {"security_group_selector_terms": [pb.SecurityGroupSelectorTerm(name="nope")]},
            "node_class.security_group_selector_terms",
        ),
        (
            {"ami_selector_terms": [pb.AmiSelectorTerm(name="no-such-image-*")]},
            "node_class.ami_selector_terms",
        ),
    ],
)
async def test_a_selector_matching_nothing_is_a_failed_precondition(
    stub: Stub, overrides: dict[str, Any], field: str
) -> None:
    """Terms that select nothing end the call FAILED_PRECONDITION, the message naming them."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.ResolveNodeClass(pb.ResolveNodeClassRequest(node_class=node_class(**overrides)))
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert (raised.value.details() or "").startswith(f"{field}: match no ")


async def test_a_node_class_without_terms_is_an_invalid_argument(stub: Stub) -> None:
    """A NodeClass with no AMI selector terms is malformed: INVALID_ARGUMENT naming the field."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.ResolveNodeClass(
            pb.ResolveNodeClassRequest(node_class=node_class(ami_selector_terms=[]))
        )
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (raised.value.details() or "").startswith("node_class.ami_selector_terms")


async def test_a_newer_image_under_the_same_alias_replaces_the_old_one_at_once(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """After a newer x86_64 AL2023 image is registered, ResolveNodeClass returns it (no cached
    answer) in place of the old one, and a launch that follows runs it."""
    request = pb.ResolveNodeClassRequest(node_class=node_class())
    before = await stub.ResolveNodeClass(request)
    assert emulator.image_ids["x86_64"] in {a.id for a in before.amis}
    newer = _ec2(emulator).register_image(
        Name=f"amazon-eks-node-al2023-x86_64-standard-{EKS_KUBERNETES_VERSION}-v20991231",
        Architecture="x86_64",
        RootDeviceName="/dev/xvda",
    )["ImageId"]

    after = await stub.ResolveNodeClass(request)
    assert {a.id for a in after.amis} == {newer, emulator.image_ids["arm64"]}
    launched = await stub.LaunchNodeClaim(
        launch_request("web-newami", offering("m5.large", "us-east-1a", "on-demand"))
    )
    assert launched.image_id == newer
