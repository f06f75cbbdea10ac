"""The bearer token file is re-read when it changes: the new token works, the old one stops."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.rpc.credentials import CredentialFileError
from actuator_svc.service import ActuatorSettings, serve
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from tests.polling import until


async def _accepted(stub: actuator_pb2_grpc.ActuatorAsyncStub, token: str) -> bool:
    try:
        await stub.ListNodeClaims(
            pb.ListNodeClaimsRequest(), metadata=(("authorization", f"Bearer {token}"),), timeout=5
        )
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not grpc.StatusCode.UNAUTHENTICATED:
            raise
        return False
    return True


async def test_token_file_is_reloaded_on_change(tmp_path: Path) -> None:
    """After the token file is replaced, calls with the new token are served and calls with
    the old one are UNAUTHENTICATED, without a restart."""
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    settings = ActuatorSettings(
        listen="127.0.0.1:0", auth_token_file=token_file, credentials_poll_seconds=0.05
    )
    cloud = FakeCloud(instance_types={}, zones={}, on_demand_prices={})
    async with (
        serve(settings, cloud=cloud, grace_seconds=0.1) as running,
        grpc.aio.insecure_channel(running.address) as channel,
    ):
        stub = actuator_pb2_grpc.ActuatorStub(channel)
        assert await _accepted(stub, "first-token")
        assert not await _accepted(stub, "second-token")
        staging = tmp_path / "token.new"
        staging.write_text("second-token\n")
        os.replace(staging, token_file)
        await until(lambda: _accepted(stub, "second-token"), timeout_seconds=10)
        assert not await _accepted(stub, "first-token")


async def test_an_empty_token_file_is_refused_at_start(tmp_path: Path) -> None:
    """An empty token file stops the start with an error naming the file (no open API)."""
    token_file = tmp_path / "token"
    token_file.write_text("\n")
    cloud = FakeCloud(instance_types={}, zones={}, on_demand_prices={})
    settings = ActuatorSettings(listen="127.0.0.1:0", auth_token_file=token_file)
    with pytest.raises(CredentialFileError, match=str(token_file)):
        async with serve(settings, cloud=cloud):
            pass
