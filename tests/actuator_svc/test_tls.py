"""Mutual TLS: the actuator serves only clients holding a certificate from the configured CA."""

from __future__ import annotations

import datetime
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.service import ActuatorSettings, TlsFiles, serve
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey | None, *, is_ca: bool,
) -> x509.Certificate:  # fmt: skip
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if not is_ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, bytes]:
    """A CA, a server certificate for localhost and a client certificate, all from the CA."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("daiku-test-ca", ca_key, None, None, is_ca=True)
    files: dict[str, bytes] = {"ca": ca.public_bytes(serialization.Encoding.PEM)}
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(who, key, ca, ca_key, is_ca=False)
        files[f"{who}_key"] = _pem_key(key)
        files[f"{who}_cert"] = cert.public_bytes(serialization.Encoding.PEM)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return files


async def test_mutual_tls(pki: dict[str, bytes], tmp_path: Path) -> None:
    """A client with a CA-signed certificate is served; one without a certificate is refused."""
    cloud = FakeCloud(instance_types={}, zones={}, on_demand_prices={})
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
