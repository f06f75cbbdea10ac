"""EventBridge-shaped EC2 events on the seeded interruption queue, read with aiobotocore."""

from __future__ import annotations

import json
from typing import Any

from aiobotocore.session import get_session

from localcloud.ec2 import Ec2Emulator

from .conftest import CREDENTIALS


async def receive_one(emulator: Ec2Emulator) -> dict[str, Any]:
    session = get_session()
    async with session.create_client(
        "sqs", endpoint_url=emulator.endpoint_url, region_name="us-east-1", **CREDENTIALS
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
