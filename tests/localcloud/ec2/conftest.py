"""Fixtures: a running emulator per test and clients that reach it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from localcloud.ec2 import Ec2Emulator

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client
    from types_boto3_pricing.client import PricingClient
    from types_boto3_sqs.client import SQSClient

ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"
# One attempt: tests assert on the raw answers, not on botocore's retries.
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})
# One session for all tests: it caches the parsed service models that make clients slow to build.
SESSION = boto3.Session(
    region_name="us-east-1",
    aws_access_key_id=ACCESS_KEY_ID,
    aws_secret_access_key=SECRET_ACCESS_KEY,
)


@pytest.fixture
def emulator() -> Iterator[Ec2Emulator]:
    with Ec2Emulator(region="us-east-1", cluster_name="daiku") as running:
        yield running


def ec2_client(emulator: Ec2Emulator) -> EC2Client:
    return SESSION.client("ec2", endpoint_url=emulator.endpoint_url, config=NO_RETRIES)


def sqs_client(emulator: Ec2Emulator) -> SQSClient:
    return SESSION.client("sqs", endpoint_url=emulator.endpoint_url, config=NO_RETRIES)


def pricing_client(emulator: Ec2Emulator) -> PricingClient:
    return SESSION.client("pricing", endpoint_url=emulator.endpoint_url, config=NO_RETRIES)


@pytest.fixture
def ec2(emulator: Ec2Emulator) -> EC2Client:
    return ec2_client(emulator)


@pytest.fixture
def launch_template_id(emulator: Ec2Emulator, ec2: EC2Client) -> str:
    """A launch template like the actuator creates: EKS AMI, node security group, user data."""
    template = ec2.create_launch_template(
        LaunchTemplateName="daiku-default",
        LaunchTemplateData={
            "ImageId": emulator.image_ids["x86_64"],
            "UserData": "IyEvYmluL2Jhc2gKZWNobyBub2Rl",
            "SecurityGroupIds": [emulator.security_group_id],
            "TagSpecifications": [
                {"ResourceType": "volume", "Tags": [{"Key": "daiku.dev/nodepool", "Value": "p"}]}
            ],
        },
    )
    return str(template["LaunchTemplate"]["LaunchTemplateId"])
