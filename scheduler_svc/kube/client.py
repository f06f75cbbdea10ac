"""The scheduler's Kubernetes API client: one aiohttp session, a base URL and credentials.

Built from a kubeconfig file or from the pod's service account (decision 0010: this replaced
kubernetes_asyncio, whose import alone costs ~60 MB of resident memory). Everything the service
sends is raw JSON over `KubeApiClient.request`; `KubeObjects` (verbs, typed errors) and
`ResourceWatch` (list/watch) are built on it.

Kubeconfig support (the fields kubectl uses for these):
- cluster: `server`, `certificate-authority` / `certificate-authority-data`,
  `insecure-skip-tls-verify`, `tls-server-name`;
- user: `token`, `tokenFile` (re-read when it changes), `client-certificate(-data)` +
  `client-key(-data)`, `username` + `password`, and `exec` credential plugins
  (`client.authentication.k8s.io/v1` and `v1beta1`, as `aws eks get-token` is used): the plugin
  runs on first use and again when its token's `expirationTimestamp` is near or the server
  answers 401;
- relative file paths are relative to the kubeconfig's directory, as kubectl resolves them.
`auth-provider` (the removed gcp/azure/oidc plugins) is refused with a clear error.

In-cluster: `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`, the service account's CA, and
its token file re-read whenever it changes (the kubelet rotates projected tokens).

Close the client with `await client.close()` (or `async with client:`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import aiohttp
import structlog
import yaml

log = structlog.get_logger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_EXEC_API_VERSIONS = frozenset(
    {"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}
)
# An exec token is renewed this long before its expirationTimestamp (clock skew, request time).
_EXPIRY_MARGIN = timedelta(seconds=30)


class KubeConfigError(ValueError):
    """A kubeconfig, service account or credential plugin that cannot be used; the message
    names the file, context and field."""


class Credentials(Protocol):
    """What authenticates each request: headers to add, and a way to drop a rejected token."""

    async def headers(self) -> Mapping[str, str]: ...

    def invalidate(self) -> bool:
        """Forget the current credential after a 401; True when asking again may help."""
        ...


class NoCredentials:
    """Anonymous, or authenticated by a client certificate (in the TLS handshake)."""

    async def headers(self) -> Mapping[str, str]:
        return {}

    def invalidate(self) -> bool:
        return False


@dataclass
class StaticToken:
    """A bearer token written in the kubeconfig."""

    token: str

    async def headers(self) -> Mapping[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def invalidate(self) -> bool:
        return False


@dataclass
class BasicAuth:
    """username/password from the kubeconfig (HTTP basic authentication)."""

    username: str
    password: str

    async def headers(self) -> Mapping[str, str]:
        return {"Authorization": aiohttp.BasicAuth(self.username, self.password).encode()}

    def invalidate(self) -> bool:
        return False


@dataclass
class TokenFile:
    """A bearer token read from a file, read again whenever the file changes (its mtime or
    size): service account tokens are rotated by the kubelet in place."""

    path: Path
    _token: str = field(default="", init=False)
    _stamp: tuple[int, int] | None = field(default=None, init=False)

    def _read(self) -> str:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._token = self.path.read_text(encoding="utf-8").strip()
                self._stamp = stamp
        except OSError as error:
            if not self._token:
                raise KubeConfigError(f"token file {self.path}: {error}") from error
            # Mid-rotation (file being replaced): keep the last token we read.
            log.warning("kube_token_file_unreadable", path=str(self.path), error=str(error))
        return self._token

    async def headers(self) -> Mapping[str, str]:
        return {"Authorization": f"Bearer {self._read()}"}

    def invalidate(self) -> bool:
        self._stamp = None  # read it again on the next request
        return True


Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ExecCredentialPlugin:
    """A client-go credential plugin (`users[].user.exec`): runs `command args…` with `env`
    added and KUBERNETES_EXEC_INFO set, reads an ExecCredential from its stdout and sends its
    `status.token`. The token is kept until `status.expirationTimestamp` (minus a margin) or a
    401; without an expiry it is kept until a 401."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    working_dir: Path | None = None
    cluster: Mapping[str, Any] | None = None  # sent to plugins that ask for it
    timeout_seconds: float = 60.0
    clock: Clock = _utc_now
    _token: str | None = field(default=None, init=False)
    _expires_at: datetime | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    runs: int = field(default=0, init=False)

    def _valid(self) -> bool:
        if self._token is None:
            return False
        return self._expires_at is None or self.clock() + _EXPIRY_MARGIN < self._expires_at

    async def headers(self) -> Mapping[str, str]:
        if not self._valid():
            async with self._lock:
                if not self._valid():
                    await self._run()
        return {"Authorization": f"Bearer {self._token}"}

    def invalidate(self) -> bool:
        self._token = None
        return True

    async def _run(self) -> None:
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        exec_info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        environment = {
            **os.environ,
            **self.env,
            "KUBERNETES_EXEC_INFO": json.dumps(exec_info),
        }
        where = f"exec credential plugin {self.command!r}"
        try:
            process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=environment,
                cwd=self.working_dir,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as error:
            raise KubeConfigError(f"{where}: cannot run it: {error}") from error
        try:
            async with asyncio.timeout(self.timeout_seconds):
                stdout, stderr = await process.communicate()
        except TimeoutError as error:
            process.kill()
            await process.wait()
            raise KubeConfigError(f"{where}: no answer in {self.timeout_seconds} s") from error
        self.runs += 1
        if process.returncode != 0:
            detail = stderr.decode(errors="replace").strip()[:500]
            raise KubeConfigError(f"{where}: exit status {process.returncode}: {detail}")
        try:
            credential = json.loads(stdout)
        except ValueError as error:
            raise KubeConfigError(f"{where}: stdout is not JSON: {error}") from error
        if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
            raise KubeConfigError(f"{where}: stdout is not an ExecCredential")
        if credential.get("apiVersion") != self.api_version:
            raise KubeConfigError(
                f"{where}: apiVersion {credential.get('apiVersion')!r}, "
                f"expected {self.api_version!r}"
            )
        status = credential.get("status")
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            if isinstance(status, dict) and status.get("clientCertificateData"):
                raise KubeConfigError(
                    f"{where}: client certificates from plugins are not supported (tokens are)"
                )
            raise KubeConfigError(f"{where}: status.token is missing")
        expires_at: datetime | None = None
        raw_expiry = status.get("expirationTimestamp") if isinstance(status, dict) else None
        if raw_expiry:
            try:
                expires_at = datetime.fromisoformat(str(raw_expiry).replace("Z", "+00:00"))
            except ValueError as error:
                raise KubeConfigError(
                    f"{where}: status.expirationTimestamp {raw_expiry!r}: {error}"
                ) from error
            if expires_at.tzinfo is None:
                expires_at = expires_at.replace(tzinfo=UTC)
        self._token = token
        self._expires_at = expires_at
        log.info(
            "kube_exec_credential_obtained",
            command=self.command,
            expires_at=expires_at.isoformat() if expires_at else None,
        )


class KubeApiClient:
    """HTTP(S) to one API server with one set of credentials, over one connection pool.

    Watches hold one connection each for as long as they run; `connection_limit` bounds the
    total (writers share the rest, and wait for a free one). Each TLS connection costs ~300 KiB
    (asyncio's 256 KiB read buffer + OpenSSL's): at kubernetes_asyncio's 100, a burst of
    writes left 25 MB of buffers in the scheduler (tracemalloc, 10k pods); the API server
    gains nothing from more than a few dozen requests in flight from one client (client-go
    multiplexes everything over one HTTP/2 connection).
    """

    def __init__(
        self,
        server: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
        tls_server_name: str | None = None,
        connection_limit: int = 32,
    ) -> None:
        self.server = server.rstrip("/")
        self.credentials: Credentials = credentials or NoCredentials()
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._server_hostname = tls_server_name
        self._connection_limit = connection_limit
        self._session: aiohttp.ClientSession | None = None

    def _session_now(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop (aiohttp wants one).
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._connection_limit, ssl=self._ssl)
            # trust_env: HTTPS_PROXY/NO_PROXY apply, as they do to client-go and kubectl.
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] | Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request (`body`, when not None, as JSON); the caller reads and releases
        the response. A 401 with credentials that can be renewed (exec plugin, token file) is
        retried once with fresh ones."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        url = self.server + path
        for attempt in (1, 2):
            all_headers = {**(headers or {}), **(await self.credentials.headers())}
            if data is not None:
                all_headers["Content-Type"] = content_type
            response = await self._session_now().request(
                method,
                url,
                params=params,
                headers=all_headers,
                data=data,
                timeout=client_timeout or aiohttp.ClientTimeout(total=60),
                server_hostname=self._server_hostname,
            )
            if response.status == 401 and attempt == 1 and self.credentials.invalidate():
                response.release()
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


# -- kubeconfig ------------------------------------------------------------------------------


def _named(entries: Any, name: str, section: str, where: str) -> dict[str, Any]:
    if not isinstance(entries, list):
        raise KubeConfigError(f"{where}: {section} is not a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section.rstrip("s"))
            if not isinstance(body, dict):
                raise KubeConfigError(f"{where}: {section}[{name}] has no {section.rstrip('s')}")
            return body
    raise KubeConfigError(f"{where}: no {section.rstrip('s')} named {name!r}")


def _pem(data: str, where: str, field_name: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as error:
        raise KubeConfigError(f"{where}: {field_name} is not base64: {error}") from error


def _file(base: Path, value: Any, where: str, field_name: str) -> Path:
    if not isinstance(value, str) or not value:
        raise KubeConfigError(f"{where}: {field_name} must be a file path")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise KubeConfigError(f"{where}: {field_name} {path} does not exist")
    return path


def ssl_context_for(
    *,
    ca_file: Path | None = None,
    ca_data: bytes | None = None,
    insecure: bool = False,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    cert_data: bytes | None = None,
    key_data: bytes | None = None,
) -> ssl.SSLContext:
    """A client TLS context: verify against the CA (the system's when none is given) unless
    `insecure`; present the client certificate when one is given."""
    context = ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca_file is not None:
        context.load_verify_locations(cafile=str(ca_file))
    elif ca_data is not None:
        context.load_verify_locations(cadata=ca_data.decode("ascii", errors="replace"))
    if cert_data is not None or key_data is not None:
        if cert_data is None or key_data is None:
            raise KubeConfigError("a client certificate needs both certificate and key")
        # The ssl module loads chains from files only: a private directory, gone at once.
        with tempfile.TemporaryDirectory(prefix="daiku-kube-") as directory:
            cert_path, key_path = Path(directory, "client.crt"), Path(directory, "client.key")
            cert_path.write_bytes(cert_data)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key_data)
            context.load_cert_chain(str(cert_path), str(key_path))
    elif cert_file is not None or key_file is not None:
        if cert_file is None or key_file is None:
            raise KubeConfigError("a client certificate needs both certificate and key")
        context.load_cert_chain(str(cert_file), str(key_file))
    return context


def _credentials(
    user: dict[str, Any], base: Path, where: str, cluster_info: dict[str, Any]
) -> Credentials:
    if user.get("auth-provider"):
        name = (user["auth-provider"] or {}).get("name", "?")
        raise KubeConfigError(
            f"{where}: auth-provider {name!r} is not supported (use an exec plugin)"
        )
    exec_config = user.get("exec")
    if isinstance(exec_config, dict):
        api_version = str(exec_config.get("apiVersion") or "")
        if api_version not in _EXEC_API_VERSIONS:
            raise KubeConfigError(
                f"{where}: exec.apiVersion {api_version!r} is not one of "
                f"{sorted(_EXEC_API_VERSIONS)}"
            )
        command = exec_config.get("command")
        if not isinstance(command, str) or not command:
            raise KubeConfigError(f"{where}: exec.command is missing")
        if "/" in command and not Path(command).is_absolute():
            command = str(base / command)  # kubectl: relative to the kubeconfig
        env = {
            str(e.get("name")): str(e.get("value", ""))
            for e in exec_config.get("env") or []
            if isinstance(e, dict) and e.get("name")
        }
        return ExecCredentialPlugin(
            command=command,
            args=[str(a) for a in exec_config.get("args") or []],
            env=env,
            api_version=api_version,
            working_dir=base,
            # spec.cluster in KUBERNETES_EXEC_INFO only when the user asked for it.
            cluster=cluster_info if exec_config.get("provideClusterInfo") else None,
        )
    if user.get("token"):
        return StaticToken(str(user["token"]))
    if user.get("tokenFile"):
        return TokenFile(_file(base, user["tokenFile"], where, "tokenFile"))
    if user.get("username") is not None and user.get("password") is not None:
        return BasicAuth(str(user["username"]), str(user["password"]))
    return NoCredentials()


def api_client_from_kubeconfig_data(
    config: Any, *, base_dir: Path, context: str | None = None, where: str = "kubeconfig"
) -> KubeApiClient:
    """A client for `context` (the current one by default) of a parsed kubeconfig."""
    if not isinstance(config, dict):
        raise KubeConfigError(f"{where}: not a kubeconfig (a YAML mapping)")
    context_name = context or config.get("current-context")
    if not context_name:
        raise KubeConfigError(f"{where}: no current-context and no context given")
    where = f"{where} context {context_name!r}"
    ctx = _named(config.get("contexts"), str(context_name), "contexts", where)
    cluster = _named(config.get("clusters"), str(ctx.get("cluster")), "clusters", where)
    user_name = ctx.get("user")
    user = _named(config.get("users"), str(user_name), "users", where) if user_name else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeConfigError(f"{where}: cluster server {server!r} is not an http(s) URL")
    ssl_context: ssl.SSLContext | None = None
    if server.startswith("https://"):
        try:
            ssl_context = ssl_context_for(
                ca_file=_file(base_dir, cluster["certificate-authority"], where, "ca")
                if cluster.get("certificate-authority")
                else None,
                ca_data=_pem(cluster["certificate-authority-data"], where, "ca data")
                if cluster.get("certificate-authority-data")
                else None,
                insecure=bool(cluster.get("insecure-skip-tls-verify")),
                cert_file=_file(base_dir, user["client-certificate"], where, "client-certificate")
                if user.get("client-certificate")
                else None,
                key_file=_file(base_dir, user["client-key"], where, "client-key")
                if user.get("client-key")
                else None,
                cert_data=_pem(user["client-certificate-data"], where, "client-certificate-data")
                if user.get("client-certificate-data")
                else None,
                key_data=_pem(user["client-key-data"], where, "client-key-data")
                if user.get("client-key-data")
                else None,
            )
        except (ssl.SSLError, OSError) as error:
            raise KubeConfigError(f"{where}: TLS material unusable: {error}") from error
        except KubeConfigError as error:
            raise KubeConfigError(f"{where}: {error}") from error
    credentials = _credentials(user, base_dir, where, {"server": server, **_cluster_info(cluster)})
    return KubeApiClient(
        server,
        ssl_context=ssl_context,
        credentials=credentials,
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
    )


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    if cluster.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if cluster.get("tls-server-name"):
        info["tls-server-name"] = cluster["tls-server-name"]
    return info


def load_kubeconfig(path: Path | str, *, context: str | None = None) -> KubeApiClient:
    """`api_client_from_kubeconfig` without the event loop (it reads one small file)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise KubeConfigError(f"kubeconfig {path}: {error}") from error
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise KubeConfigError(f"kubeconfig {path}: not YAML: {error}") from error
    return api_client_from_kubeconfig_data(
        config, base_dir=path.parent, context=context, where=f"kubeconfig {path}"
    )


async def api_client_from_kubeconfig(
    path: Path | str, *, context: str | None = None
) -> KubeApiClient:
    """A client for the cluster of `context` (the current one by default) in the kubeconfig.

    Raises `KubeConfigError` (a ValueError) when the file or context is unusable.
    """
    return await asyncio.to_thread(load_kubeconfig, path, context=context)


def api_client_in_cluster(
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> KubeApiClient:
    """A client from the service account mounted into the pod (its token re-read when the
    kubelet rotates it). Raises `KubeConfigError` outside a pod."""
    environ = os.environ if environ is None else environ
    host = environ.get("KUBERNETES_SERVICE_HOST")
    port = environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeConfigError(
            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"
        )
    token_path = service_account_dir / "token"
    ca_path = service_account_dir / "ca.crt"
    if not token_path.is_file() or not ca_path.is_file():
        raise KubeConfigError(
            f"in-cluster config: no service account token or CA in {service_account_dir}"
        )
    if ":" in host:
        host = f"[{host}]"  # IPv6
    try:
        context = ssl_context_for(ca_file=ca_path)
    except (ssl.SSLError, OSError) as error:
        raise KubeConfigError(f"in-cluster config: CA {ca_path}: {error}") from error
    return KubeApiClient(
        f"https://{host}:{port}", ssl_context=context, credentials=TokenFile(token_path)
    )


async def new_api_client(
    *, kubeconfig: Path | str | None, in_cluster: bool, context: str | None = None
) -> KubeApiClient:
    """The client the settings ask for: in-cluster config, else the given kubeconfig."""
    if in_cluster:
        return api_client_in_cluster()
    if kubeconfig is None:
        raise ValueError("either in_cluster or a kubeconfig path is required")
    return await api_client_from_kubeconfig(kubeconfig, context=context)
