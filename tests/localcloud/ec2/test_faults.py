"""Injected faults: EC2 throttling answered in EC2's error shape, then normal service."""

from __future__ import annotations

import urllib.request
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import pytest
from botocore.exceptions import ClientError

from localcloud.ec2 import Ec2Emulator

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client


def test_request_limit_exceeded_twice_then_describe_succeeds(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """Two injected RequestLimitExceeded faults fail two calls with HTTP 503; the third succeeds."""
    emulator.inject_fault(action="DescribeRegions", error_code="RequestLimitExceeded", count=2)

    for _ in range(2):
        with pytest.raises(ClientError) as raised:
            ec2.describe_regions()
        assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503

    assert ec2.describe_regions()["Regions"]


def test_fault_body_has_ec2_error_xml_shape(emulator: Ec2Emulator) -> None:
    """A faulted call answers <Response><Errors><Error><Code/><Message/>...<RequestID/>."""
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded")
    request = urllib.request.Request(
        emulator.endpoint_url,
        data=b"Action=CreateFleet&Version=2016-11-15&Type=instant",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )

    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=5)

    with raised.value:
        assert raised.value.code == 503
        root = ElementTree.fromstring(raised.value.read())
    assert root.tag == "Response"
    assert root.findtext("Errors/Error/Code") == "RequestLimitExceeded"
    assert root.findtext("Errors/Error/Message")
    assert root.findtext("RequestID")
    (call,) = emulator.create_fleet_calls
    assert call.request_error == "RequestLimitExceeded"


def test_fault_only_hits_its_action(emulator: Ec2Emulator, ec2: EC2Client) -> None:
    """A fault injected for CreateFleet leaves other actions alone."""
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded")

    assert ec2.describe_availability_zones()["AvailabilityZones"]
