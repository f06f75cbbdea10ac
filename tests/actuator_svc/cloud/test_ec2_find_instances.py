"""Ec2Cloud.find_instances against the EC2 emulator over HTTP: EC2's tag filters and paging."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest

from actuator_svc.cloud.ec2 import AwsEndpoints, Ec2Cloud
from actuator_svc.core.tags import CLUSTER_TAG, NODECLAIM_TAG
from localcloud.ec2 import Ec2Emulator

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client
    from types_boto3_ec2.type_defs import TagTypeDef

REGION = "us-east-1"


def run_instances(emulator: Ec2Emulator, count: int, cluster: str) -> list[str]:
    """`count` instances, one reservation each (as CreateFleet launches them), tagged for
    `cluster` and a claim each."""
    ec2: EC2Client = boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=emulator.endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    ids = []
    for index in range(count):
        tags: list[TagTypeDef] = [
            {"Key": CLUSTER_TAG, "Value": cluster},
            {"Key": NODECLAIM_TAG, "Value": f"{cluster}-claim-{index}"},
        ]
        answer = ec2.run_instances(
            ImageId=emulator.image_ids["x86_64"],
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        ids.append(answer["Instances"][0]["InstanceId"])
    return ids


async def test_reads_every_page(emulator: Ec2Emulator) -> None:
    """With pages of 5, the 12 live instances of a cluster are all found, each once, and
    neither another cluster's instances nor (unless asked) terminated ones."""
    ids = run_instances(emulator, 14, "paged")
    others = run_instances(emulator, 3, "other")
    async with Ec2Cloud(
        region=REGION, endpoints=AwsEndpoints(ec2=emulator.endpoint_url), describe_page_size=5
    ) as cloud:
        await cloud.terminate_instances(ids[-2:])
        live = await cloud.find_instances({CLUSTER_TAG: "paged"})
        everything = await cloud.find_instances({CLUSTER_TAG: "paged"}, include_terminated=True)
        one = await cloud.find_instances({CLUSTER_TAG: "paged", NODECLAIM_TAG: "paged-claim-7"})
    assert sorted(i.id for i in live) == sorted(ids[:12])
    assert sorted(i.id for i in everything) == sorted(ids)
    assert not {i.id for i in everything} & set(others)
    assert [i.id for i in one] == [ids[7]]
    assert one[0].tags[NODECLAIM_TAG] == "paged-claim-7"


@pytest.mark.parametrize("page_size", [4, 1001])
def test_page_size_outside_ec2_bounds_is_refused(page_size: int) -> None:
    """A page size EC2 would reject (MaxResults outside 5-1000) is refused up front, naming it."""
    with pytest.raises(ValueError, match="describe_page_size"):
        Ec2Cloud(region=REGION, describe_page_size=page_size)


async def test_finds_only_the_named_instances_in_groups_of_200(emulator: Ec2Emulator) -> None:
    """Asked for some ids (more than EC2's 200 values per filter, one unknown, one of another
    cluster), only this cluster's named instances come back, each once."""
    ids = run_instances(emulator, 205, "named")
    others = run_instances(emulator, 1, "elsewhere")
    wanted = [*ids[:203], "i-0123456789abcdef0", others[0], ids[0]]
    async with Ec2Cloud(region=REGION, endpoints=AwsEndpoints(ec2=emulator.endpoint_url)) as cloud:
        found = await cloud.find_instances({CLUSTER_TAG: "named"}, instance_ids=wanted)
        none = await cloud.find_instances({CLUSTER_TAG: "named"}, instance_ids=[])
    assert sorted(i.id for i in found) == sorted(ids[:203])
    assert none == []
