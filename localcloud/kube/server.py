"""`KubeApiServer`: the local Kubernetes API server on loopback, as an async context manager.

    async with KubeApiServer() as api:          # 127.0.0.1, a free port, a random token
        path = api.write_kubeconfig(tmp / "kubeconfig")
        ...                                     # kubectl / kubernetes_asyncio use `path`
        await api.store.create("pods", {...}, "default")   # in-process, same objects

`tls=True` serves HTTPS with a fresh self-signed CA (its certificate goes into the
kubeconfig as certificate-authority-data, so clients verify the server as usual).
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
import ssl
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

import structlog
import yaml
from aiohttp import web

from localcloud.kube.api import KubeApi
from localcloud.kube.store import Store

log = structlog.get_logger("localcloud.kube.server")


class KubeApiServer:
    """The API server; `url`, `token`, `store` and `ca_pem` are valid once started."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        tls: bool = False,
        *,
        store: Store | None = None,
        bookmark_interval_seconds: float = 10.0,
        event_window: int = 10_000,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(24)
        self.tls = tls
        self.store = store or Store(event_window=event_window)
        self.api = KubeApi(
            self.store, self.token, bookmark_interval_seconds=bookmark_interval_seconds
        )
        self.ca_pem: bytes | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        ssl_context = self._ssl_context() if self.tls else None
        self._runner = web.AppRunner(
            self.api.application(), access_log=None, shutdown_timeout=1.0, handle_signals=False
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        log.info("kube_api_started", url=self.url, tls=self.tls)

    async def close(self) -> None:
        self.api.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            log.info("kube_api_stopped", url=self.url)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def kubeconfig(self, context: str = "localcloud") -> dict[str, object]:
        cluster: dict[str, object] = {"server": self.url}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": "default"},
                }
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, context: str = "localcloud") -> Path:
        """Write a kubeconfig (mode 0600) that kubectl and kubernetes_asyncio use unchanged."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(context), sort_keys=False))
        target.chmod(0o600)
        return target

    def _ssl_context(self) -> ssl.SSLContext:
        cert_pem, key_pem = _self_signed(self.host)
        self.ca_pem = cert_pem
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as directory:
            cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
            cert_path.write_bytes(cert_pem)
            key_path.write_bytes(key_pem)
            context.load_cert_chain(cert_path, key_path)
        return context


def _self_signed(host: str) -> tuple[bytes, bytes]:
    """A self-signed CA certificate valid for `host`, 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localcloud-kube-apiserver")])
    now = datetime.now(UTC)
    alt_names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    try:
        alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alt_names.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert_pem, key_pem
