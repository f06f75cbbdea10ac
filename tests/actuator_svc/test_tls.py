"""TLS: mutual TLS, certificates reloaded without restart, TLS and a token required beyond
loopback, and the plaintext health-only port."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import grpc
import pytest
from cryptography import x509

# grpcio-health-checking ships no type hints, and types-grpcio-health-checking's HealthStub has
# no Check method (it would need a cast at every call); the packages import it the same way.
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from structlog.testing import capture_logs

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.service import (
    ActuatorSettings,
    InsecureListenError,
    TlsFiles,
    is_loopback,
    serve,
)
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from tests.certificates import certificate, new_key, pem
from tests.polling import until


def make_pki(directory: Path) -> dict[str, bytes]:
    """A CA, a server certificate for localhost and a client certificate, all from the CA,
    written to `directory` (files ca, server_cert, server_key, client_cert, client_key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = new_key()
    ca = certificate("daiku-test-ca", ca_key)
    files: dict[str, bytes] = {"ca": pem(ca)}
    for who in ("server", "client"):
        key = new_key()
        cert = certificate(who, key, issuer=(ca, ca_key), alt_names=[x509.DNSName("localhost")])
        files[f"{who}_key"] = pem(key)
        files[f"{who}_cert"] = pem(cert)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, bytes]:
    """A CA, a server certificate for localhost and a client certificate, all from the CA."""
    return make_pki(tmp_path)


def _empty_cloud() -> FakeCloud:
    return FakeCloud(instance_types={}, zones={}, on_demand_prices={})


# A channel of its own (no subchannel shared with earlier channels): a fresh TLS handshake.
FRESH_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)


async def _served_trusting(port: int, ca: bytes) -> bool:
    """Whether a new connection that trusts only `ca` completes a health check."""
    credentials = grpc.ssl_channel_credentials(ca)
    async with grpc.aio.secure_channel(
        f"localhost:{port}", credentials, options=FRESH_CONNECTION
    ) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE:  # only a refused handshake
                raise
            return False
        return True


def _replace(path: Path, data: bytes) -> None:
    """Swap a file's content atomically, as a Secret volume update does."""
    staging = path.with_suffix(".new")
    staging.write_bytes(data)
    os.replace(staging, path)


async def test_mutual_tls(pki: dict[str, bytes], tmp_path: Path) -> None:
    """A client with a CA-signed certificate is served; one without a certificate is refused."""
    cloud = _empty_cloud()
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        tls=TlsFiles(tmp_path / "server_cert", tmp_path / "server_key", tmp_path / "ca"),
    )
    async with serve(settings, cloud=cloud, grace_seconds=0.1) as running:
        target = f"localhost:{running.port}"
        good = grpc.ssl_channel_credentials(pki["ca"], pki["client_key"], pki["client_cert"])
        async with grpc.aio.secure_channel(target, good) as channel:
            stub = actuator_pb2_grpc.ActuatorStub(channel)
            listed = await stub.ListNodeClaims(pb.ListNodeClaimsRequest(), timeout=10)
            assert list(listed.nodeclaims) == []
        anonymous = grpc.ssl_channel_credentials(pki["ca"])
        async with grpc.aio.secure_channel(target, anonymous) as channel:
            stub = actuator_pb2_grpc.ActuatorStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ListNodeClaims(pb.ListNodeClaimsRequest(), timeout=10)
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_rotated_certificates_serve_new_connections(tmp_path: Path) -> None:
    """Once the certificate and key files are replaced, new connections get the new
    certificate (trusting only the new CA works, only the old one fails) without a restart."""
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new")
    live = tmp_path / "live"
    live.mkdir()
    for name in ("server_cert", "server_key"):
        (live / name).write_bytes(old[name])
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        tls=TlsFiles(live / "server_cert", live / "server_key"),
        credentials_poll_seconds=0.05,
    )
    async with serve(settings, cloud=_empty_cloud(), grace_seconds=0.1) as running:
        assert await _served_trusting(running.port, old["ca"])
        assert not await _served_trusting(running.port, new["ca"])
        _replace(live / "server_key", new["server_key"])
        _replace(live / "server_cert", new["server_cert"])
        await until(lambda: _served_trusting(running.port, new["ca"]), timeout_seconds=10)
        assert not await _served_trusting(running.port, old["ca"])


async def test_a_mismatched_key_is_rejected_and_the_old_certificate_kept(tmp_path: Path) -> None:
    """A key that does not match the certificate is logged as rejected (naming the file) and
    the previous certificate goes on serving."""
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new")
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        tls=TlsFiles(tmp_path / "old" / "server_cert", tmp_path / "old" / "server_key"),
        credentials_poll_seconds=0.05,
    )
    async with serve(settings, cloud=_empty_cloud(), grace_seconds=0.1) as running:
        with capture_logs() as logs:
            _replace(tmp_path / "old" / "server_key", new["server_key"])

            async def rejected() -> bool:
                await _served_trusting(running.port, old["ca"])  # a handshake polls the files
                return any(e["event"] == "tls_certificates_rejected" for e in logs)

            await until(rejected, timeout_seconds=10)
        (event,) = [e for e in logs if e["event"] == "tls_certificates_rejected"]
        assert "server_key: does not match" in event["error"]
        assert await _served_trusting(running.port, old["ca"])


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.7", False),
        ("actuator.example", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    """Only localhost and loopback addresses count as loopback; any other name may not be."""
    assert is_loopback(host) is loopback


async def test_beyond_loopback_tls_and_token_are_required(pki: dict[str, bytes]) -> None:
    """serve() refuses 0.0.0.0 without TLS and a token, naming what is missing."""
    with pytest.raises(InsecureListenError, match=r"TLS .* and a bearer token"):
        async with serve(ActuatorSettings(listen="0.0.0.0:0"), cloud=_empty_cloud()):
            pass
    tls = TlsFiles(Path("/nonexistent/cert"), Path("/nonexistent/key"))
    with pytest.raises(InsecureListenError, match="bearer token") as info:
        async with serve(ActuatorSettings(listen="[::]:0", tls=tls), cloud=_empty_cloud()):
            pass
    assert "TLS" not in str(info.value)


async def test_process_refuses_plaintext_beyond_loopback() -> None:
    """`python -m actuator_svc --listen 0.0.0.0:0` without TLS exits 1 with a clear message."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actuator_svc", "--listen", "0.0.0.0:0",
        env={k: v for k, v in os.environ.items() if not k.startswith("ACTUATOR_")},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 1
    assert stdout == b""
    assert "0.0.0.0:0 is not a loopback address" in stderr.decode()
    assert "--tls-cert-file" in stderr.decode()


async def test_all_interfaces_with_tls_and_token_serve(
    pki: dict[str, bytes], tmp_path: Path
) -> None:
    """On 0.0.0.0 with TLS and a token the API answers callers with the token, not others."""
    settings = ActuatorSettings(
        listen="0.0.0.0:0",
        tls=TlsFiles(tmp_path / "server_cert", tmp_path / "server_key"),
        auth_token="t0ken",
    )
    async with serve(settings, cloud=_empty_cloud(), grace_seconds=0.1) as running:
        credentials = grpc.ssl_channel_credentials(pki["ca"])
        async with grpc.aio.secure_channel(f"localhost:{running.port}", credentials) as channel:
            stub = actuator_pb2_grpc.ActuatorStub(channel)
            request = pb.ListNodeClaimsRequest()
            listed = await stub.ListNodeClaims(
                request, metadata=(("authorization", "Bearer t0ken"),), timeout=10
            )
            assert list(listed.nodeclaims) == []
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ListNodeClaims(request, timeout=10)
            assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_health_port_is_plaintext_and_health_only(
    pki: dict[str, bytes], tmp_path: Path
) -> None:
    """With mTLS and a token on the API port, the health port answers a plaintext, tokenless
    Check with SERVING and serves nothing else."""
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        tls=TlsFiles(tmp_path / "server_cert", tmp_path / "server_key", tmp_path / "ca"),
        auth_token="t0ken",
        health_port=0,
    )
    async with serve(settings, cloud=_empty_cloud(), grace_seconds=0.1) as running:
        assert running.health_port not in (None, 0, running.port)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.health_port}") as channel:
            for service in ("", "daiku.actuator.v1.Actuator"):
                answer = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=10
                )
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await actuator_pb2_grpc.ActuatorStub(channel).ListNodeClaims(
                    pb.ListNodeClaimsRequest(),
                    metadata=(("authorization", "Bearer t0ken"),),
                    timeout=10,
                )
            assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_rotated_client_ca_admits_the_new_clients(tmp_path: Path) -> None:
    """Once the client CA file is replaced, a client certificate from the new CA is served on
    a new connection and one from the old CA is refused."""
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new")
    client_ca = tmp_path / "client_ca"
    client_ca.write_bytes(old["ca"])
    settings = ActuatorSettings(
        listen="127.0.0.1:0",
        tls=TlsFiles(tmp_path / "old" / "server_cert", tmp_path / "old" / "server_key", client_ca),
        credentials_poll_seconds=0.05,
    )

    async def served_as(client: dict[str, bytes]) -> bool:
        credentials = grpc.ssl_channel_credentials(
            old["ca"], client["client_key"], client["client_cert"]
        )
        async with grpc.aio.secure_channel(
            f"localhost:{running.port}", credentials, options=FRESH_CONNECTION
        ) as channel:
            try:
                await actuator_pb2_grpc.ActuatorStub(channel).ListNodeClaims(
                    pb.ListNodeClaimsRequest(), timeout=5
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                return False
            return True

    async with serve(settings, cloud=_empty_cloud(), grace_seconds=0.1) as running:
        assert await served_as(old)
        assert not await served_as(new)
        _replace(client_ca, new["ca"])
        await until(lambda: served_as(new), timeout_seconds=10)
        assert not await served_as(old)
