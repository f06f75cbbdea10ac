"""The scheduler's own Kubernetes client over real HTTPS: kubeconfig TLS and credential
variants, exec credential plugins, in-cluster config, and its import cost."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import json
import ssl
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from localcloud.kube.server import KubeApiServer
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.client import (
    ExecCredentialPlugin,
    KubeApiClient,
    KubeConfigError,
    TokenFile,
    api_client_from_kubeconfig,
    api_client_in_cluster,
)
from scheduler_svc.kube.objects import KubeObjects
from tests.certificates import certificate, new_key, pem
from tests.polling import until

ROOT = Path(__file__).parents[3]


@pytest.fixture
async def server() -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(tls=True) as api:
        yield api


def kubeconfig(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], name: str = "kubeconfig"
) -> Path:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def ca_data(server: KubeApiServer) -> str:
    assert server.ca_pem is not None
    return base64.b64encode(server.ca_pem).decode()


async def namespaces(api: KubeApiClient) -> list[str]:
    listing = await KubeObjects(api).request("GET", "/api/v1/namespaces")
    return sorted(n["metadata"]["name"] for n in listing["items"])


async def test_the_kubeconfig_that_localcloud_writes_reaches_its_api_over_tls(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """CA data and bearer token from a kubeconfig: a create and a read over HTTPS succeed."""
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    async with await api_client_from_kubeconfig(path) as api:
        objects = KubeObjects(api)
        created = await objects.request(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            body={"metadata": {"name": "c1"}, "data": {"a": "b"}},
        )
        assert created["metadata"]["uid"]
        read = await objects.request("GET", "/api/v1/namespaces/default/configmaps/c1")
        assert read["data"] == {"a": "b"}
        assert "default" in await namespaces(api)


async def test_a_wrong_token_is_refused_and_an_unknown_ca_fails_verification(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """A wrong token gets the server's 401 as KubeApiError; without the CA the handshake fails
    verification; with insecure-skip-tls-verify it goes through."""
    wrong = kubeconfig(
        tmp_path,
        {"server": server.url, "certificate-authority-data": ca_data(server)},
        {"token": "wrong"},
        "wrong",
    )
    async with await api_client_from_kubeconfig(wrong) as api:
        with pytest.raises(KubeApiError) as raised:
            await namespaces(api)
        assert raised.value.status == 401

    no_ca = kubeconfig(tmp_path, {"server": server.url}, {"token": server.token}, "no-ca")
    async with await api_client_from_kubeconfig(no_ca) as api:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await namespaces(api)

    insecure = kubeconfig(
        tmp_path,
        {"server": server.url, "insecure-skip-tls-verify": True},
        {"token": server.token},
        "insecure",
    )
    async with await api_client_from_kubeconfig(insecure) as api:
        assert "default" in await namespaces(api)


async def test_a_ca_file_and_token_file_relative_to_the_kubeconfig_and_token_rotation(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """certificate-authority and tokenFile resolve against the kubeconfig's directory; a
    rewritten token file is read again (a stale token fails, the rotated one then works)."""
    assert server.ca_pem is not None
    (tmp_path / "ca.crt").write_bytes(server.ca_pem)
    (tmp_path / "token").write_text("stale\n")
    path = kubeconfig(
        tmp_path,
        {"server": server.url, "certificate-authority": "ca.crt"},
        {"tokenFile": "token"},
    )
    async with await api_client_from_kubeconfig(path) as api:
        assert isinstance(api.credentials, TokenFile)
        with pytest.raises(KubeApiError):
            await namespaces(api)
        (tmp_path / "token").write_text(server.token + "\n")
        assert "default" in await namespaces(api)


PLUGIN = textwrap.dedent(
    """
    import json, os, pathlib, sys
    runs = pathlib.Path(sys.argv[1])
    count = int(runs.read_text()) + 1 if runs.exists() else 1
    runs.write_text(str(count))
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    pathlib.Path(sys.argv[1] + ".info").write_text(json.dumps(info))
    tokens = pathlib.Path(sys.argv[2]).read_text().split()
    status = {"token": tokens[min(count, len(tokens)) - 1]}
    if os.environ.get("EXPIRES"):
        status["expirationTimestamp"] = os.environ["EXPIRES"]
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                      "status": status}))
    """
)


def exec_kubeconfig(
    tmp_path: Path,
    server: KubeApiServer,
    tokens: list[str],
    *,
    api_version: str,
    expires: str | None = None,
) -> Path:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    (tmp_path / "tokens").write_text("\n".join(tokens))
    env = [{"name": "EXPIRES", "value": expires}] if expires else []
    return kubeconfig(
        tmp_path,
        {"server": server.url, "certificate-authority-data": ca_data(server)},
        {
            "exec": {
                "apiVersion": api_version,
                "command": sys.executable,
                "args": ["plugin.py", str(tmp_path / "runs"), str(tmp_path / "tokens")],
                "env": env,
                "provideClusterInfo": True,
                "interactiveMode": "Never",
            }
        },
    )


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
async def test_an_exec_plugin_token_is_kept_until_it_expires(
    server: KubeApiServer, tmp_path: Path, api_version: str
) -> None:
    """The plugin (as `aws eks get-token` is configured) runs once for many requests while its
    token is valid, gets KUBERNETES_EXEC_INFO with the cluster, and runs again once the
    token is within its expiry margin."""
    expires = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)
    path = exec_kubeconfig(
        tmp_path, server, [server.token], api_version=api_version, expires="2030-01-01T12:00:00Z"
    )
    async with await api_client_from_kubeconfig(path) as api:
        plugin = api.credentials
        assert isinstance(plugin, ExecCredentialPlugin)
        plugin.clock = lambda: expires - dt.timedelta(minutes=10)
        for _ in range(3):
            assert "default" in await namespaces(api)
        assert plugin.runs == 1
        info = json.loads((tmp_path / "runs.info").read_text())
        assert info["apiVersion"] == api_version
        assert info["spec"]["cluster"]["server"] == server.url

        plugin.clock = lambda: expires - dt.timedelta(seconds=5)
        assert "default" in await namespaces(api)
        assert plugin.runs == 2


async def test_an_exec_plugin_runs_again_when_its_token_is_refused(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """A token without expiry that the server answers 401 to is replaced by running the plugin
    again, and the request is retried once with the new token."""
    path = exec_kubeconfig(
        tmp_path, server, ["revoked", server.token], api_version="client.authentication.k8s.io/v1"
    )
    async with await api_client_from_kubeconfig(path) as api:
        assert "default" in await namespaces(api)
        assert isinstance(api.credentials, ExecCredentialPlugin)
        assert api.credentials.runs == 2


async def test_a_failing_exec_plugin_is_a_config_error_naming_it(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """A plugin exiting non-zero raises KubeConfigError with its command and stderr."""
    (tmp_path / "fail.py").write_text("import sys; sys.exit('no credentials for you')")
    path = kubeconfig(
        tmp_path,
        {"server": server.url, "certificate-authority-data": ca_data(server)},
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": ["fail.py"],
            }
        },
    )
    async with await api_client_from_kubeconfig(path) as api:
        with pytest.raises(KubeConfigError, match="no credentials for you"):
            await namespaces(api)


async def test_in_cluster_config_uses_the_service_account_and_rereads_a_rotated_token(
    server: KubeApiServer, tmp_path: Path
) -> None:
    """KUBERNETES_SERVICE_HOST/PORT, ca.crt and token from the service account directory reach
    the API; a token rotated in place is used from the next request on."""
    assert server.ca_pem is not None
    (tmp_path / "ca.crt").write_bytes(server.ca_pem)
    (tmp_path / "token").write_text("old-rotated-out")
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.port)}
    async with api_client_in_cluster(environ=environ, service_account_dir=tmp_path) as api:
        with pytest.raises(KubeApiError):
            await namespaces(api)
        (tmp_path / "token").write_text(server.token)
        assert "default" in await namespaces(api)
    with pytest.raises(KubeConfigError, match="KUBERNETES_SERVICE_HOST"):
        api_client_in_cluster(environ={}, service_account_dir=tmp_path)


@pytest.mark.parametrize("as_data", [True, False])
async def test_a_client_certificate_authenticates_to_a_server_that_requires_one(
    tmp_path: Path, as_data: bool
) -> None:
    """A server demanding client certificates (mutual TLS) sees the kubeconfig's
    client-certificate(-data)/client-key(-data), inline or as files."""
    ca_key, server_key, client_key = new_key(), new_key(), new_key()
    ca = certificate("test-ca", ca_key)
    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server_cert = certificate("127.0.0.1", server_key, issuer=(ca, ca_key), alt_names=loopback)
    client_cert = certificate("daiku-scheduler", client_key, issuer=(ca, ca_key))
    files: dict[str, x509.Certificate | ec.EllipticCurvePrivateKey] = {
        "ca.crt": ca,
        "server.crt": server_cert,
        "server.key": server_key,
        "client.crt": client_cert,
        "client.key": client_key,
    }
    for name, item in files.items():
        (tmp_path / name).write_bytes(pem(item))

    server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ssl.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    server_ssl.load_verify_locations(tmp_path / "ca.crt")
    server_ssl.verify_mode = ssl.CERT_REQUIRED

    async def whoami(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(item[0] for item in (peer or {}).get("subject", ()))
        return web.json_response({"user": subject.get("commonName")})

    app = web.Application()
    app.router.add_get("/whoami", whoami)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl)
    await site.start()
    port = runner.addresses[0][1]
    try:
        user: dict[str, Any] = (
            {
                "client-certificate-data": base64.b64encode(pem(client_cert)).decode(),
                "client-key-data": base64.b64encode(pem(client_key)).decode(),
            }
            if as_data
            else {"client-certificate": "client.crt", "client-key": "client.key"}
        )
        path = kubeconfig(
            tmp_path,
            {"server": f"https://127.0.0.1:{port}", "certificate-authority": "ca.crt"},
            user,
        )
        async with await api_client_from_kubeconfig(path) as api:
            assert await KubeObjects(api).request("GET", "/whoami") == {"user": "daiku-scheduler"}
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update({"current-context": "nope"}), "no context named 'nope'"),
        (lambda c: c["users"][0].update(user={"auth-provider": {"name": "gcp"}}), "auth-provider"),
        (
            lambda c: c["users"][0].update(
                user={"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1"}}
            ),
            "exec.apiVersion",
        ),
        (lambda c: c["clusters"][0]["cluster"].update(server="ftp://x"), "server"),
        (
            lambda c: c["clusters"][0]["cluster"].update({"certificate-authority": "missing.crt"}),
            "does not exist",
        ),
    ],
)
async def test_unusable_kubeconfigs_are_refused_naming_the_field(
    tmp_path: Path, change: Any, message: str
) -> None:
    """Each unusable kubeconfig raises KubeConfigError (a ValueError) naming what is wrong."""
    config: dict[str, Any] = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    change(config)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeConfigError, match=message):
        await api_client_from_kubeconfig(path)


def test_importing_the_service_does_not_import_kubernetes_asyncio() -> None:
    """`import scheduler_svc.service` (and `python -m scheduler_svc`'s modules) leave
    kubernetes_asyncio unloaded: its import alone costs ~60 MB of resident memory."""
    code = (
        "import sys, scheduler_svc.service, scheduler_svc.__main__; "
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


async def test_requests_beyond_the_connection_limit_wait_for_a_free_connection() -> None:
    """With connection_limit=3, six concurrent requests never have more than three in flight
    at the server (each connection holds TLS buffers), and all six complete."""
    in_flight = 0
    most = 0
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await release.wait()
        in_flight -= 1
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        async with KubeApiClient(f"http://127.0.0.1:{port}", connection_limit=3) as api:
            objects = KubeObjects(api)
            calls = [asyncio.create_task(objects.request("GET", "/slow")) for _ in range(6)]
            await until(lambda: in_flight == 3)
            await asyncio.sleep(0.05)  # give a fourth request the chance to (wrongly) arrive
            assert most == 3
            release.set()
            assert await asyncio.gather(*calls) == [{}] * 6
        assert most == 3
    finally:
        await runner.cleanup()
