"""Fixtures: a running emulator per test and clients that reach it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from localcloud.ec2 import Ec2Emulator

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
# One attempt: tests assert on the raw answers, not on botocore's retries.
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})
# One session for all tests: it caches the parsed service models that make clients slow to build.
SESSION = boto3.Session(region_name="us-east-1", **CREDENTIALS)


@pytest.fixture
def emulator() -> Iterator[Ec2Emulator]:
    with Ec2Emulator(region="us-east-1", cluster_name="daiku") as running:
        yield running


def client(emulator: Ec2Emulator, service: str) -> Any:
    return SESSION.client(service, endpoint_url=emulator.endpoint_url, config=NO_RETRIES)


@pytest.fixture
def ec2(emulator: Ec2Emulator) -> Any:
    return client(emulator, "ec2")


@pytest.fixture
def launch_template_id(emulator: Ec2Emulator, ec2: Any) -> str:
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
