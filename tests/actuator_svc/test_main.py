"""`python -m actuator_svc` as a process: flags, the ready line, serving, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import grpc

# grpcio-health-checking ships no type hints, and types-grpcio-health-checking's HealthStub has
# no Check method (it would need a cast at every call); the packages import it the same way.
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator


async def test_process_serves_and_stops_gracefully_on_sigterm(
    emulator: Ec2Emulator, tmp_path: Path
) -> None:
    """The process prints `ready HOST:PORT`, answers with the token from its env file, logs
    the health port it bound for --health-port 0, and exits 0 on SIGTERM after logging
    actuator_stopped."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "ACTUATOR_EC2_ENDPOINT_URL": emulator.endpoint_url,  # env equivalent of the flag
        "ACTUATOR_AUTH_TOKEN_FILE": str(token_file),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actuator_svc", "--listen", "127.0.0.1:0", "--cluster-name", "daiku",
        "--health-port", "0",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
        assert line.startswith("ready 127.0.0.1:")
        address = line.split()[1]
        async with grpc.aio.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            answer = await health.Check(health_pb2.HealthCheckRequest())
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            stub = actuator_pb2_grpc.ActuatorStub(channel)
            listed = await stub.ListNodeClaims(
                pb.ListNodeClaimsRequest(), metadata=(("authorization", "Bearer s3cret"),)
            )
            assert list(listed.nodeclaims) == []
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
        assert process.returncode == 0
        logged = [json.loads(x) for x in stderr.decode().splitlines() if x.startswith("{")]
        events = [e["event"] for e in logged]
        assert "actuator_ready" in events
        assert events[-1] == "actuator_stopped"
        (ready,) = [e for e in logged if e["event"] == "actuator_ready"]
        assert ready["token"] is True
        assert ready["tls"] is False
        assert isinstance(ready["health_port"], int)
        assert ready["health_port"] > 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
