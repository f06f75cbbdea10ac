"""The actuator assembled: cloud, catalog, launcher, interruption feed and the gRPC server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
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
from actuator_svc.launcher import Launcher
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver
from actuator_svc.nodeclaims import NodeClaims
from actuator_svc.rpc.interceptors import BearerTokenInterceptor, ObservabilityInterceptor
from actuator_svc.rpc.servicer import ActuatorServicer
from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc

log = structlog.get_logger("actuator_svc")
SERVICE_NAME = actuator_pb2.DESCRIPTOR.services_by_name["Actuator"].full_name


@dataclass(frozen=True)
class TlsFiles:
    """Server certificate and key; a client CA turns on mutual TLS."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


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
    unavailable_offering_ttl_seconds: float = DEFAULT_TTL_SECONDS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    cluster_cidr: str = ""
    interruption_wait_seconds: int = 20


@dataclass
class RunningActuator:
    """A serving actuator: its bound address and the parts tests and tools inspect."""

    server: grpc.aio.Server
    address: str
    port: int
    metrics: ActuatorMetrics
    unavailable: UnavailableOfferings
    catalog: Catalog


def _credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    ca = tls.client_ca_file.read_bytes() if tls.client_ca_file else None
    return grpc.ssl_server_credentials(
        [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
        root_certificates=ca,
        require_client_auth=ca is not None,
    )


@contextlib.asynccontextmanager
async def serve(
    settings: ActuatorSettings,
    *,
    cloud: CloudProvider | None = None,
    clock: Callable[[], float] = time.time,
    metrics: ActuatorMetrics | None = None,
    grace_seconds: float = 5.0,
) -> AsyncIterator[RunningActuator]:
    """Serve until the context exits, then stop gracefully (in-flight calls get `grace`)."""
    async with contextlib.AsyncExitStack() as stack:
        if cloud is None:
            cloud = await stack.enter_async_context(
                Ec2Cloud(region=settings.region, endpoints=settings.endpoints, retry=settings.retry)
            )
        metrics = metrics or ActuatorMetrics()
        unavailable = UnavailableOfferings(settings.unavailable_offering_ttl_seconds)
        metrics.track_unavailable_offerings(lambda: len(unavailable.active(clock())))
        catalog = Catalog(cloud, region=settings.region, unavailable=unavailable, clock=clock)
        try:
            await catalog.refresh(force=True)
        except CloudError as exc:  # serve anyway; the catalog is fetched again on first use
            log.warning("catalog_prefetch_failed", error=str(exc))
        cluster = ClusterEndpoint(
            name=settings.cluster_name,
            api_server_endpoint=settings.cluster_endpoint,
            certificate_authority=settings.cluster_ca_bundle,
            cidr=settings.cluster_cidr,
        )
        launcher = Launcher(
            cloud,
            catalog=catalog,
            resolver=NodeClassResolver(cloud, clock=clock),
            unavailable=unavailable,
            cluster=cluster,
            clock=clock,
            metrics=metrics,
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
        interceptors: list[grpc.aio.ServerInterceptor] = [ObservabilityInterceptor(metrics)]
        if settings.auth_token:
            interceptors.insert(0, BearerTokenInterceptor(settings.auth_token))
        server = grpc.aio.server(interceptors=interceptors)
        actuator_pb2_grpc.add_ActuatorServicer_to_server(
            ActuatorServicer(
                catalog=catalog,
                launcher=launcher,
                nodeclaims=NodeClaims(cloud, cluster_name=settings.cluster_name),
                interruptions=feed,
            ),
            server,
        )
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            [SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        port = (
            server.add_secure_port(settings.listen, _credentials(settings.tls))
            if settings.tls
            else server.add_insecure_port(settings.listen)
        )
        await server.start()
        for name in ("", SERVICE_NAME):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        host = settings.listen.rsplit(":", 1)[0]
        running = RunningActuator(
            server=server,
            address=f"{host}:{port}",
            port=port,
            metrics=metrics,
            unavailable=unavailable,
            catalog=catalog,
        )
        feed_task = asyncio.create_task(feed.run()) if feed else None
        refresh_task = asyncio.create_task(catalog.run())
        try:
            yield running
        finally:
            await health_servicer.enter_graceful_shutdown()
            for task in (feed_task, refresh_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await server.stop(grace_seconds)
