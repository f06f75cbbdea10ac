"""EventBridge-shaped EC2 events on the seeded interruption queue, read with aiobotocore."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiobotocore.session import get_session

from localcloud.ec2 import Ec2Emulator

from .conftest import ACCESS_KEY_ID, SECRET_ACCESS_KEY, ec2_client

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client


async def receive_one(emulator: Ec2Emulator) -> dict[str, Any]:
    session = get_session()
    async with session.create_client(
        "sqs",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
    ) as sqs:
        response = await sqs.receive_message(
            QueueUrl=emulator.interruption_queue_url, WaitTimeSeconds=5
        )
        (message,) = response["Messages"]
        body: dict[str, Any] = json.loads(message["Body"])
        return body


async def test_spot_interruption_warning_arrives_in_the_interruption_queue(
    emulator: Ec2Emulator,
) -> None:
    """send_spot_interruption puts a Spot Instance Interruption Warning for the instance on SQS."""
    emulator.send_spot_interruption("i-0123456789abcdef0")

    event = await receive_one(emulator)

    assert event["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert event["source"] == "aws.ec2"
    assert event["detail"] == {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}
    assert event["resources"] == ["arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"]


async def test_rebalance_and_state_change_events_have_their_detail_types(
    emulator: Ec2Emulator,
) -> None:
    """Rebalance recommendations and state changes arrive with AWS's detail-types and details."""
    emulator.send_rebalance_recommendation("i-1")
    rebalance = await receive_one(emulator)
    emulator.send_instance_state_change("i-1", "terminated")
    state_change = await receive_one(emulator)

    assert rebalance["detail-type"] == "EC2 Instance Rebalance Recommendation"
    assert rebalance["detail"] == {"instance-id": "i-1"}
    assert state_change["detail-type"] == "EC2 Instance State-change Notification"
    assert state_change["detail"] == {"instance-id": "i-1", "state": "terminated"}


def launch_one(emulator: Ec2Emulator, ec2: EC2Client) -> str:
    template = ec2.create_launch_template(
        LaunchTemplateName="daiku-events",
        LaunchTemplateData={"ImageId": emulator.image_ids["x86_64"]},
    )["LaunchTemplate"]
    response = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template["LaunchTemplateId"]},
                "Overrides": [{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a"}],
            }
        ],
    )
    instance_id: str = response["Instances"][0]["InstanceIds"][0]
    return instance_id


def state_of(ec2: EC2Client, instance_id: str) -> str:
    reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    state: str = reservations[0]["Instances"][0]["State"]["Name"]
    return state


async def test_terminate_instances_emits_state_changes_when_enabled() -> None:
    """With emit_state_changes, TerminateInstances sends shutting-down then terminated events."""
    with Ec2Emulator(emit_state_changes=True) as emulator:
        ec2 = ec2_client(emulator)
        instance_id = launch_one(emulator, ec2)

        ec2.terminate_instances(InstanceIds=[instance_id])

        first = await receive_one(emulator)
        second = await receive_one(emulator)
    assert [first["detail"], second["detail"]] == [
        {"instance-id": instance_id, "state": "shutting-down"},
        {"instance-id": instance_id, "state": "terminated"},
    ]


async def test_spot_interruption_with_terminate_reclaims_the_instance(
    emulator: Ec2Emulator,
) -> None:
    """send_spot_interruption(terminate=True) sends the warning and terminates the instance."""
    ec2 = ec2_client(emulator)
    instance_id = launch_one(emulator, ec2)

    emulator.send_spot_interruption(instance_id, terminate=True)

    warning = await receive_one(emulator)
    assert warning["detail"]["instance-id"] == instance_id
    assert state_of(ec2, instance_id) in ("shutting-down", "terminated")
