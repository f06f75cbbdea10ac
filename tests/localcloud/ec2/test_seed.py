"""What the emulator seeds for its cluster, as the actuator discovers it over the EC2 API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from localcloud.ec2 import Ec2Emulator, eks_ami_name
from localcloud.ec2.instance_types import (
    describe_instance_types,
    instance_type_zones,
    on_demand_prices,
)

from .conftest import sqs_client

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client
    from types_boto3_ec2.type_defs import FilterTypeDef

DISCOVERY: list[FilterTypeDef] = [{"Name": "tag:karpenter.sh/discovery", "Values": ["daiku"]}]


def test_subnets_and_security_group_are_tagged_for_discovery(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """Each zone has a subnet tagged karpenter.sh/discovery=<cluster>; one security group is too."""
    subnets = ec2.describe_subnets(Filters=DISCOVERY)["Subnets"]
    groups = ec2.describe_security_groups(Filters=DISCOVERY)["SecurityGroups"]

    zones = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    assert {s["AvailabilityZone"] for s in subnets} == zones
    assert [g["GroupId"] for g in groups] == [emulator.security_group_id]


@pytest.mark.parametrize("architecture", ["x86_64", "arm64"])
def test_eks_amis_are_found_by_name_pattern(
    emulator: Ec2Emulator, ec2: EC2Client, architecture: str
) -> None:
    """DescribeImages with the al2023 name pattern finds exactly the seeded AMI of that arch."""
    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[{"Name": "name", "Values": [f"amazon-eks-node-al2023-{architecture}-standard-*"]}],
    )["Images"]

    assert [(i["ImageId"], i["Name"], i["Architecture"]) for i in images] == [
        (emulator.image_ids[architecture], eks_ami_name(architecture), architecture)
    ]


def test_interruption_queue_exists_at_the_reported_url(emulator: Ec2Emulator) -> None:
    """The queue `<cluster>-interruption` exists and its URL is emulator.interruption_queue_url."""
    sqs = sqs_client(emulator)

    assert (
        sqs.get_queue_url(QueueName="daiku-interruption")["QueueUrl"]
        == emulator.interruption_queue_url
    )


def test_a_second_emulator_in_the_same_process_is_refused(emulator: Ec2Emulator) -> None:
    """moto's state is process-wide, so starting a second emulator while one runs is an error."""
    with pytest.raises(RuntimeError, match="already running"):
        Ec2Emulator().start()


def test_bundled_instance_type_data_is_consistent() -> None:
    """m5.large is described (2 vCPU, 8 GiB), offered in us-east-1a and priced at $0.096/h."""
    m5_large = describe_instance_types()["m5.large"]

    assert m5_large["VCpuInfo"]["DefaultVCpus"] == 2
    assert m5_large["MemoryInfo"]["SizeInMiB"] == 8192
    assert "us-east-1a" in instance_type_zones("us-east-1")["m5.large"]
    assert on_demand_prices("us-east-1")["m5.large"] == 0.096
