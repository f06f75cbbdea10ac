"""Subnets out of addresses, through the actuator over gRPC against the EC2 emulator over HTTP:
InsufficientFreeAddressesInSubnet is an ICE of that subnet, so the same offering goes out again
at once in the zone's next subnet; a subnet EC2 already reports full is skipped up front."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

from daiku.actuator.v1 import actuator_pb2 as pb
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import CLUSTER, launch_request, node_class, offering

if TYPE_CHECKING:
    from daiku.actuator.v1 import actuator_pb2_grpc

    Stub = actuator_pb2_grpc.ActuatorAsyncStub

ZONE = "us-east-1a"


def second_subnet(emulator: Ec2Emulator) -> str:
    """A smaller discovery-tagged subnet in ZONE (the default one has more free addresses)."""
    ec2: Any = boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.endpoint_url)
    vpc = ec2.describe_subnets(SubnetIds=[emulator.subnet_ids[ZONE]])["Subnets"][0]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.200.0/24", AvailabilityZone=ZONE)
    subnet_id = str(subnet["Subnet"]["SubnetId"])
    ec2.create_tags(
        Resources=[subnet_id], Tags=[{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    )
    return subnet_id


async def refresh(stub: Stub) -> list[str]:
    """ResolveNodeClass looks again (the actuator's launches then use what it found)."""
    answer = await stub.ResolveNodeClass(pb.ResolveNodeClassRequest(node_class=node_class()))
    return [s.id for s in answer.subnets if s.zone == ZONE]


async def test_a_full_subnet_sends_the_launch_to_the_next_subnet_at_once(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    first, second = emulator.subnet_ids[ZONE], second_subnet(emulator)
    assert await refresh(stub) == [first, second]
    emulator.exhaust_subnet(first)  # after the actuator looked: it learns at launch
    response = await stub.LaunchNodeClaim(
        launch_request("addresses-1", offering("m5.large", ZONE, "on-demand"))
    )
    assert response.subnet_id == second
    assert response.zone == ZONE
    assert [[e.error_code for e in a.errors] for a in response.attempts] == [
        ["InsufficientFreeAddressesInSubnet"],
        [],
    ]
    # Not an ICE of the offering: the same offering was sent again, in the other subnet.
    assert [a.offerings[0].instance_type for a in response.attempts] == ["m5.large", "m5.large"]

    # Once EC2 reports the subnet full, the actuator does not try it at all.
    assert second in await refresh(stub)
    again = await stub.LaunchNodeClaim(
        launch_request("addresses-2", offering("m5.large", ZONE, "on-demand"))
    )
    assert again.subnet_id == second
    assert len(again.attempts) == 1
    assert not again.attempts[0].errors


class _Cloud:
    """find_subnets/groups/images only: what NodeClassResolver.resolve asks."""

    async def find_subnets(self, terms: Any) -> list[Any]:
        from actuator_svc.cloud.provider import Subnet

        return [
            Subnet("subnet-full", ZONE, 0),
            Subnet("subnet-big", ZONE, 4000),
            Subnet("subnet-small", ZONE, 12),
            Subnet("subnet-empty-b", "us-east-1b", 0),
        ]

    async def find_security_groups(self, terms: Any) -> list[Any]:
        from actuator_svc.cloud.provider import SecurityGroup

        return [SecurityGroup("sg-1")]

    async def find_images(self, terms: Any) -> list[Any]:
        from actuator_svc.cloud.provider import Image

        return [Image("ami-1", "al2023", "x86_64", "2026-01-01")]


async def test_subnets_without_free_addresses_are_left_out_up_front() -> None:
    from actuator_svc.core.node_class import ImageTerm, NodeClassSpec, SubnetTerm
    from actuator_svc.node_class_resolver import NodeClassResolver

    resolver = NodeClassResolver(_Cloud(), clock=lambda: 0.0)  # type: ignore[arg-type]
    spec = NodeClassSpec("c", (SubnetTerm(id="x"),), (), (ImageTerm(id="ami-1"),))
    resolved = await resolver.resolve(spec)
    assert [s.id for s in resolved.subnets_by_zone[ZONE]] == ["subnet-big", "subnet-small"]
    assert resolved.subnet_by_zone[ZONE].id == "subnet-big"
    assert "us-east-1b" not in resolved.subnet_by_zone  # no usable subnet: no launch there
