"""No credential, token or user-data secret appears in the actuator's logs or its errors."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path

import grpc
import pytest

from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import launch_request, node_class, offering

USER_DATA_SECRET = "userdata-secret-marker-7c1e"
TOKEN = "token-secret-marker-93ab"
WRONG_TOKEN = "wrong-token-marker-55aa"
AWS_ACCESS_KEY = "AKIAMARKER0000000042"
AWS_SECRET_KEY = "aws-secret-key-marker-d41d"
AWS_SESSION = "aws-session-token-marker-8f00"
MARKERS = (USER_DATA_SECRET, TOKEN, WRONG_TOKEN, AWS_ACCESS_KEY, AWS_SECRET_KEY, AWS_SESSION)
SECRET_USER_DATA = f"#!/bin/bash\nexport DB_PASSWORD={USER_DATA_SECRET}\n"


def _base64_forms(marker: str) -> list[str]:
    """The parts of `marker`'s base64 that appear whatever bytes surround it (EC2 user data
    travels base64-encoded, so a leak of a request body would show it that way)."""
    forms = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + marker.encode()).decode()
        forms.append(encoded[4 if offset else 0 : -4])
    return forms


async def _failure(call: Awaitable[object]) -> str:
    """Everything a caller sees of a failed call: code, details, trailers, debug string."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    error = info.value
    return f"{error.code()} {error.details()} {error.trailing_metadata()!r} {error!r}"


async def test_secrets_stay_out_of_logs_and_errors(emulator: Ec2Emulator, tmp_path: Path) -> None:
    """A DEBUG-level actuator process given marker credentials, token and user-data secret
    launches, refuses a wrong token, rejects invalid requests, meets ICE and throttling, and
    none of the markers shows in its stdout, stderr or any error a caller receives."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ACTUATOR_", "AWS_"))},
        "AWS_ACCESS_KEY_ID": AWS_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET_KEY,
        "AWS_SESSION_TOKEN": AWS_SESSION,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actuator_svc", "--listen", "127.0.0.1:0",
        "--ec2-endpoint-url", emulator.endpoint_url,
        "--pricing-endpoint-url", emulator.endpoint_url,
        "--auth-token-file", str(token_file), "--log-level", "DEBUG",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert process.stdout is not None
        ready = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
        address = ready.split()[1]
        secret_class = node_class(user_data=SECRET_USER_DATA)
        good = (("authorization", f"Bearer {TOKEN}"),)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = actuator_pb2_grpc.ActuatorStub(channel)
            on_demand = offering("m5.large", "us-east-1a", "on-demand")
            launched = await stub.LaunchNodeClaim(
                launch_request("secret-ok", on_demand, node_class=secret_class), metadata=good
            )
            assert launched.instance_id
            seen.append(
                await _failure(
                    stub.LaunchNodeClaim(
                        launch_request("secret-ok", on_demand, node_class=secret_class),
                        metadata=(("authorization", f"Bearer {WRONG_TOKEN}"),),
                    )
                )
            )
            invalid = (
                launch_request(
                    "secret-bad", on_demand, node_class=secret_class, labels={"a b": "x"}
                ),
                launch_request(
                    "secret-big", on_demand,
                    node_class=node_class(user_data=SECRET_USER_DATA * 1000),
                ),
                launch_request(
                    "secret-tag", on_demand,
                    node_class=node_class(user_data=SECRET_USER_DATA, tags={"t": "<x>"}),
                ),
            )  # fmt: skip
            seen.extend([await _failure(stub.LaunchNodeClaim(r, metadata=good)) for r in invalid])
            emulator.set_capacity(
                instance_type="c5.large", zone="us-east-1b", capacity_type="on-demand",
                available=False,
            )  # fmt: skip
            iced = offering("c5.large", "us-east-1b", "on-demand")
            seen.append(
                await _failure(
                    stub.LaunchNodeClaim(
                        launch_request("secret-ice", iced, node_class=secret_class), metadata=good
                    )
                )
            )
            emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded", count=2)
            emulator.inject_fault(
                action="CreateFleet", error_code="UnauthorizedOperation", http_status=403, count=1
            )
            seen.append(
                await _failure(
                    stub.LaunchNodeClaim(
                        launch_request(
                            "secret-throttled",
                            offering("m5.large", "us-east-1c", "on-demand"),
                            node_class=secret_class,
                        ),
                        metadata=good,
                    )
                )
            )
        process.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = ready + stdout.decode() + stderr.decode()
    # The paths were exercised: the failures are the expected kinds and were logged.
    codes = [text.split()[0] for text in seen]
    assert codes == [
        "StatusCode.UNAUTHENTICATED",
        *["StatusCode.INVALID_ARGUMENT"] * 3,
        "StatusCode.RESOURCE_EXHAUSTED",
        "StatusCode.FAILED_PRECONDITION",
    ]
    for event in ("nodeclaim_launched", "rpc_unauthenticated", "cloud_call_retrying"):
        assert event in output
    assert "RequestLimitExceeded" in output
    assert "missing or wrong bearer token" in seen[0]
    assert "node_class.user_data" in seen[2]
    everything = "\n".join([output, *seen])
    assert [m for m in MARKERS if m in everything] == []
    assert [f for f in _base64_forms(USER_DATA_SECRET) if f in everything] == []
