"""Driving the emulator from another process: the admin HTTP API and `python -m localcloud.ec2`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from localcloud.ec2 import Ec2Emulator

from .conftest import NO_RETRIES, SESSION, sqs_client
from .test_create_fleet import create_fleet, launched

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client


def admin(endpoint_url: str, method: str, path: str, payload: Any = None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(
        f"{endpoint_url}/_localcloud/{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_admin_capacity_and_recorded_calls(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """A pool marked unavailable over HTTP is skipped by CreateFleet; the call is listed too."""
    admin(
        emulator.endpoint_url,
        "POST",
        "capacity",
        {
            "instance_type": "m5.large",
            "zone": "us-east-1a",
            "capacity_type": "on-demand",
            "available": False,
        },
    )

    response = create_fleet(
        ec2,
        emulator,
        launch_template_id,
        [("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")],
        strategy="prioritized",
    )

    assert response["Errors"][0]["ErrorCode"] == "InsufficientInstanceCapacity"
    calls = admin(emulator.endpoint_url, "GET", "create-fleet-calls")
    assert [c["launched_pool"]["zone"] for c in calls] == ["us-east-1b"]
    assert calls[0]["errors"][0]["zone"] == "us-east-1a"
    assert calls[0]["received_monotonic_seconds"] <= calls[0]["responded_monotonic_seconds"]


def test_admin_fault_and_interrupt(emulator: Ec2Emulator, ec2: EC2Client) -> None:
    """Faults and interruption messages can be injected over HTTP."""
    admin(
        emulator.endpoint_url,
        "POST",
        "faults",
        {"action": "DescribeRegions", "error_code": "RequestLimitExceeded", "count": 1},
    )
    with pytest.raises(ec2.exceptions.ClientError):
        ec2.describe_regions()
    assert ec2.describe_regions()["Regions"]

    sent = admin(emulator.endpoint_url, "POST", "interrupt", {"instance_id": "i-1"})
    sqs = sqs_client(emulator)
    (message,) = sqs.receive_message(QueueUrl=emulator.interruption_queue_url)["Messages"]
    assert message["MessageId"] == sent["message_id"]
    assert json.loads(message["Body"])["detail"]["instance-id"] == "i-1"


def test_admin_injected_fleet_answers_in_order_and_replayed_by_token(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Injected CreateFleet answers (empty; an error naming no override) are given to the next
    calls in order, replayed for their ClientToken as real answers are, listed and cleared."""
    for payload in (
        {"kind": "empty"},
        {"kind": "unattributed-error", "error_code": "UnfulfillableCapacity"},
    ):
        admin(emulator.endpoint_url, "POST", "fleet-answers", payload)
    pending = admin(emulator.endpoint_url, "GET", "faults")["fleet_answers"]
    assert [a["kind"] for a in pending] == ["empty", "unattributed-error"]
    pools = [("m5.large", "us-east-1a")]

    empty = create_fleet(ec2, emulator, launch_template_id, pools, client_token="once")
    assert (empty["Instances"], empty.get("Errors", [])) == ([], [])
    again = create_fleet(ec2, emulator, launch_template_id, pools, client_token="once")
    assert again["FleetId"] == empty["FleetId"]
    unattributed = create_fleet(ec2, emulator, launch_template_id, pools)
    assert unattributed["Instances"] == []
    assert [
        (e["ErrorCode"], "LaunchTemplateAndOverrides" in e) for e in unattributed["Errors"]
    ] == [("UnfulfillableCapacity", False)]
    assert launched(create_fleet(ec2, emulator, launch_template_id, pools))  # back to normal
    calls = admin(emulator.endpoint_url, "GET", "create-fleet-calls")
    assert [(c["injected_answer"], c["idempotent_replay"]) for c in calls] == [
        ("empty", False),
        (None, True),
        ("unattributed-error", False),
        (None, False),
    ]

    admin(emulator.endpoint_url, "POST", "fleet-answers", {"kind": "empty", "count": 3})
    admin(emulator.endpoint_url, "DELETE", "faults")
    assert admin(emulator.endpoint_url, "GET", "faults")["fleet_answers"] == []
    with pytest.raises(urllib.error.HTTPError) as bad:
        admin(emulator.endpoint_url, "POST", "fleet-answers", {"kind": "partial"})
    with bad.value:
        assert bad.value.code == 400
        assert "kind must be one of" in json.loads(bad.value.read())["error"]


def test_admin_rejects_unknown_routes_and_bad_bodies(emulator: Ec2Emulator) -> None:
    """An unknown admin route is a 404 and a capacity update missing a field is a 400 naming it."""
    with pytest.raises(urllib.error.HTTPError) as missing:
        admin(emulator.endpoint_url, "GET", "nope")
    missing.value.close()
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as bad:
        admin(emulator.endpoint_url, "POST", "capacity", {"instance_type": "m5.large"})
    with bad.value:
        assert bad.value.code == 400
        assert "zone" in json.loads(bad.value.read())["error"]


@pytest.fixture
def emulator_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "localcloud.ec2", "--port", "0", "--cluster-name", "bench"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 30
        endpoint = ""
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            if "ready" in line:
                endpoint = line.split("endpoint_url=", 1)[1].split()[0]
                break
        assert endpoint, "the emulator process never printed its ready line"
        yield process, endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_module_entry_point_prints_ready_and_serves_ec2(
    emulator_process: tuple[subprocess.Popen[str], str],
) -> None:
    """`python -m localcloud.ec2` prints a ready line with its endpoint, then serves EC2."""
    process, endpoint = emulator_process
    ec2 = SESSION.client("ec2", endpoint_url=endpoint, config=NO_RETRIES)

    regions = {r["RegionName"] for r in ec2.describe_regions()["Regions"]}

    assert "us-east-1" in regions
    health = admin(endpoint, "GET", "health")
    assert health["ready"] is True
    assert health["interruption_queue_url"].endswith("/bench-interruption")
    process.terminate()
    assert process.wait(timeout=10) == 0


def test_admin_impair_fails_an_instance_s_status_checks(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """POST impair makes DescribeInstanceStatus say impaired (reachability failed); impaired
    false passes the checks again."""
    instance_id = ec2.run_instances(
        ImageId=emulator.image_ids["x86_64"], InstanceType="m5.large", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]

    def statuses() -> tuple[str, str]:
        [status] = ec2.describe_instance_status(InstanceIds=[instance_id])["InstanceStatuses"]
        return status["InstanceStatus"]["Status"], status["SystemStatus"]["Status"]

    assert statuses() == ("ok", "ok")
    admin(emulator.endpoint_url, "POST", "impair", {"instance_id": instance_id})
    assert statuses() == ("impaired", "impaired")
    admin(emulator.endpoint_url, "POST", "impair", {"instance_id": instance_id, "impaired": False})
    assert statuses() == ("ok", "ok")
    ec2.terminate_instances(InstanceIds=[instance_id])
