"""The actuator assembled: cloud, catalog, launcher, interruption feed and the gRPC server."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from grpc_reflection.v1alpha import reflection  # type: ignore[import-untyped]

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.ec2 import AwsEndpoints, Ec2Cloud, RetryPolicy
from actuator_svc.cloud.provider import CloudProvider
from actuator_svc.core.unavailable_offerings import DEFAULT_TTL_SECONDS, UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint
from actuator_svc.errors import CloudError
from actuator_svc.interruption import InterruptionFeed
from actuator_svc.launch_templates import DEFAULT_IDLE_SECONDS, LaunchTemplateCollector
from actuator_svc.launcher import Launcher
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver
from actuator_svc.nodeclaims import NodeClaims
from actuator_svc.rpc.credentials import (
    DEFAULT_POLL_SECONDS,
    BearerToken,
    ReloadingCertificates,
    TlsFiles,
)
from actuator_svc.rpc.interceptors import (
    MAX_RECEIVE_MESSAGE_BYTES,
    BearerTokenInterceptor,
    ObservabilityInterceptor,
    RequestGuardInterceptor,
)
from actuator_svc.rpc.servicer import ActuatorServicer
from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc

log = structlog.get_logger("actuator_svc")
SERVICE_NAME = actuator_pb2.DESCRIPTOR.services_by_name["Actuator"].full_name
__all__ = ["ActuatorSettings", "InsecureListenError", "RunningActuator", "TlsFiles", "serve"]


class InsecureListenError(ValueError):
    """The actuator was told to serve beyond loopback without TLS or without a token."""


@dataclass(frozen=True)
class ActuatorSettings:
    """Everything `python -m actuator_svc` can be told."""

    listen: str = "127.0.0.1:50051"
    region: str = "us-east-1"
    cluster_name: str = "daiku"
    endpoints: AwsEndpoints = field(default_factory=AwsEndpoints)
    interruption_queue: str = ""
    tls: TlsFiles | None = None
    auth_token: str = ""
    auth_token_file: Path | None = None
    # How often the certificate, key, client CA and token files are checked for changes.
    credentials_poll_seconds: float = DEFAULT_POLL_SECONDS
    # A plaintext port serving only grpc.health.v1 (kubelet probes), on the --listen host.
    health_port: int | None = None
    unavailable_offering_ttl_seconds: float = DEFAULT_TTL_SECONDS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    cluster_cidr: str = ""
    interruption_wait_seconds: int = 20
    # Launch templates created and unused this long are deleted (checked every 10 minutes).
    launch_template_idle_seconds: float = DEFAULT_IDLE_SECONDS


@dataclass
class RunningActuator:
    """A serving actuator: its bound address and the parts tests and tools inspect."""

    server: grpc.aio.Server
    address: str
    port: int
    metrics: ActuatorMetrics
    unavailable: UnavailableOfferings
    catalog: Catalog
    health_port: int | None = None


def listen_host(listen: str) -> str:
    """The host part of HOST:PORT, without IPv6 brackets."""
    return listen.rsplit(":", 1)[0].strip("[]")


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (localhost or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # any other name may resolve anywhere
        return False


def check_exposure(settings: ActuatorSettings) -> None:
    """Beyond loopback the API needs TLS and a bearer token; raise InsecureListenError if not.

    There is deliberately no override: tests, `daiku up` and docker-compose serve on loopback,
    and a plaintext escape hatch would end up in a production manifest."""
    if is_loopback(listen_host(settings.listen)):
        return
    missing = []
    if settings.tls is None:
        missing.append("TLS (--tls-cert-file and --tls-key-file)")
    if not (settings.auth_token or settings.auth_token_file):
        missing.append("a bearer token (--auth-token-file or --auth-token)")
    if missing:
        raise InsecureListenError(
            f"--listen {settings.listen} is not a loopback address: serving there needs "
            f"{' and '.join(missing)}; listen on 127.0.0.1 to serve without them"
        )


def _credentials(
    settings: ActuatorSettings,
) -> tuple[ReloadingCertificates | None, BearerToken | None]:
    """The TLS certificates and the bearer token the settings ask for, files read once now."""
    certificates = (
        ReloadingCertificates(settings.tls, poll_seconds=settings.credentials_poll_seconds)
        if settings.tls
        else None
    )
    token = (
        BearerToken(
            token=settings.auth_token,
            token_file=settings.auth_token_file,
            poll_seconds=settings.credentials_poll_seconds,
        )
        if settings.auth_token or settings.auth_token_file
        else None
    )
    return certificates, token


def _health_only_server(
    health_servicer: health.aio.HealthServicer, address: str
) -> tuple[grpc.aio.Server, int]:
    """A server of grpc.health.v1 alone, plaintext and tokenless on purpose: kubelet gRPC
    probes speak neither TLS nor bearer tokens. It shares the main server's health servicer,
    so both ports report the same status."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 * 1024)])
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    return server, server.add_insecure_port(address)


CATALOG_RETRY_FIRST_SECONDS = 1.0
CATALOG_RETRY_MAX_SECONDS = 30.0


async def _prefetch(catalog: Catalog) -> bool:
    try:
        await catalog.refresh(force=True)
    except CloudError as exc:
        log.warning("catalog_prefetch_failed", error=str(exc))
        return False
    return True


async def _set_health(servicer: health.aio.HealthServicer, status: int) -> None:
    for name in ("", SERVICE_NAME):
        await servicer.set(name, status)


async def _load_then_serve(
    catalog: Catalog,
    servicer: health.aio.HealthServicer,
    sleep: Callable[[float], Awaitable[None]],
) -> None:
    """Retry the catalog with exponential backoff (1 s doubling to 30 s), then say SERVING."""
    delay_seconds = CATALOG_RETRY_FIRST_SECONDS
    while True:
        await sleep(delay_seconds)
        if await _prefetch(catalog):
            log.info("catalog_loaded")
            await _set_health(servicer, health_pb2.HealthCheckResponse.SERVING)
            return
        delay_seconds = min(delay_seconds * 2, CATALOG_RETRY_MAX_SECONDS)


async def _serve_once_loaded(
    catalog: Catalog,
    loaded: bool,
    servicer: health.aio.HealthServicer,
    sleep: Callable[[float], Awaitable[None]],
) -> asyncio.Task[None] | None:
    """SERVING only with a catalog: a caller that waits for it (the scheduler, `daiku up`) then
    gets ListInstanceTypes answered at once instead of hitting a deadline on a slow EC2. Not
    loaded yet: NOT_SERVING, and the task that retries the load and then says SERVING."""
    if loaded:
        await _set_health(servicer, health_pb2.HealthCheckResponse.SERVING)
        return None
    await _set_health(servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
    return asyncio.create_task(_load_then_serve(catalog, servicer, sleep))


@contextlib.asynccontextmanager
async def serve(
    settings: ActuatorSettings,
    *,
    cloud: CloudProvider | None = None,
    clock: Callable[[], float] = time.time,
    metrics: ActuatorMetrics | None = None,
    grace_seconds: float = 5.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[RunningActuator]:
    """Serve until the context exits, then stop gracefully (in-flight calls get `grace`).

    Raises InsecureListenError before doing anything when the exposure rule is broken, and
    CredentialFileError when a TLS or token file is unreadable or malformed."""
    check_exposure(settings)
    certificates, token = _credentials(settings)
    async with contextlib.AsyncExitStack() as stack:
        if cloud is None:
            cloud = await stack.enter_async_context(
                Ec2Cloud(region=settings.region, endpoints=settings.endpoints, retry=settings.retry)
            )
        metrics = metrics or ActuatorMetrics()
        unavailable = UnavailableOfferings(settings.unavailable_offering_ttl_seconds)
        metrics.track_unavailable_offerings(lambda: len(unavailable.active(clock())))
        catalog = Catalog(cloud, region=settings.region, unavailable=unavailable, clock=clock)
        catalog_loaded = await _prefetch(catalog)
        cluster = ClusterEndpoint(
            name=settings.cluster_name,
            api_server_endpoint=settings.cluster_endpoint,
            certificate_authority=settings.cluster_ca_bundle,
            cidr=settings.cluster_cidr,
        )
        # One resolver: ResolveNodeClass refreshes what launches then use.
        resolver = NodeClassResolver(cloud, clock=clock)
        templates = LaunchTemplateCollector(
            cloud,
            cluster_name=settings.cluster_name,
            clock=clock,
            idle_seconds=settings.launch_template_idle_seconds,
        )
        launcher = Launcher(
            cloud,
            catalog=catalog,
            resolver=resolver,
            unavailable=unavailable,
            cluster=cluster,
            clock=clock,
            metrics=metrics,
            templates=templates,
        )
        feed = None
        if settings.interruption_queue:
            feed = InterruptionFeed(
                cloud,
                queue=settings.interruption_queue,
                cluster_name=settings.cluster_name,
                unavailable=unavailable,
                clock=clock,
                metrics=metrics,
                wait_seconds=settings.interruption_wait_seconds,
            )
        # The token is checked first, on metadata (refused calls are neither parsed, timed nor
        # logged as served); grpc refuses bodies over the largest per-method limit unread, and
        # the guard applies each method's own limit before parsing.
        server = grpc.aio.server(
            interceptors=[
                *([BearerTokenInterceptor(token)] if token is not None else []),
                ObservabilityInterceptor(metrics),
                RequestGuardInterceptor(),
            ],
            options=[("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES)],
        )
        actuator_pb2_grpc.add_ActuatorServicer_to_server(
            ActuatorServicer(
                catalog=catalog,
                launcher=launcher,
                nodeclaims=NodeClaims(cloud, cluster_name=settings.cluster_name),
                interruptions=feed,
                resolver=resolver,
            ),
            server,
        )
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            [SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        port = (
            server.add_secure_port(settings.listen, certificates.server_credentials())
            if certificates
            else server.add_insecure_port(settings.listen)
        )
        host = settings.listen.rsplit(":", 1)[0]
        health_server, health_port = None, None
        if settings.health_port is not None:
            health_server, health_port = _health_only_server(
                health_servicer, f"{host}:{settings.health_port}"
            )
        await server.start()
        if health_server is not None:
            await health_server.start()
        loading = await _serve_once_loaded(catalog, catalog_loaded, health_servicer, sleep)
        running = RunningActuator(
            server=server,
            address=f"{host}:{port}",
            port=port,
            metrics=metrics,
            unavailable=unavailable,
            catalog=catalog,
            health_port=health_port,
        )
        loops = [catalog.run(), templates.run(), *([feed.run()] if feed else [])]
        tasks = [asyncio.create_task(loop) for loop in loops] + ([loading] if loading else [])
        try:
            yield running
        finally:
            await health_servicer.enter_graceful_shutdown()
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await server.stop(grace_seconds)
            if health_server is not None:
                await health_server.stop(0)
