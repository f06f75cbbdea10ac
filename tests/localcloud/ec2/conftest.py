"""Fixtures: a running emulator per test and clients that reach it over HTTP."""

from __future__ import annotations

import asyncio
import inspect
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


@pytest.fixture(autouse=True)
def close_event_loop_left_by_sync_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """looptime's pytest hook asks the policy for a loop even around sync tests, which creates
    one nobody closes; its ResourceWarning then fails the next async test (warnings are errors).
    """
    yield
    if inspect.iscoroutinefunction(request.function):
        return
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # no loop set: nothing leaked
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)


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
