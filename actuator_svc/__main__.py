"""`python -m actuator_svc`: serve the Actuator gRPC API.

Every flag has an environment equivalent: ACTUATOR_ + the flag in upper snake case
(--ec2-endpoint-url -> ACTUATOR_EC2_ENDPOINT_URL). Once serving it logs one `actuator_ready`
line (JSON on stderr unless a TTY) and prints `ready <host>:<port>` on stdout, so a parent
process can read the bound port when it asked for port 0. SIGTERM and SIGINT stop it gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from prometheus_client import start_http_server

from actuator_svc.cloud.ec2 import AwsEndpoints
from actuator_svc.core.unavailable_offerings import DEFAULT_TTL_SECONDS
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.rpc.credentials import DEFAULT_POLL_SECONDS, CredentialFileError
from actuator_svc.service import (
    ActuatorSettings,
    InsecureListenError,
    TlsFiles,
    check_exposure,
    serve,
)

log = structlog.get_logger("actuator_svc")


def configure_logging(level: str = "INFO") -> None:
    """structlog: JSON lines on stderr, or the console renderer on a TTY."""
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer()
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get("ACTUATOR_" + name.upper().replace("-", "_"), default)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags, with ACTUATOR_* environment variables as defaults."""
    parser = argparse.ArgumentParser(prog="python -m actuator_svc", description=__doc__)

    def flag(name: str, default: str | None = None, help_text: str = "") -> None:
        parser.add_argument(f"--{name}", default=_env(name, default), help=help_text)

    flag(
        "listen",
        "127.0.0.1:50051",
        "HOST:PORT to serve on (port 0: any free port); beyond loopback TLS and a token are "
        "required",
    )
    flag("health-port", None, "also serve grpc.health.v1 only, plaintext, on this port")
    flag("region", os.environ.get("AWS_REGION", "us-east-1"), "AWS region")
    flag("cluster-name", "daiku", "cluster name, used in tags and user data")
    flag("ec2-endpoint-url", None, "EC2 endpoint (emulator); also SQS's unless given")
    flag("sqs-endpoint-url", None, "SQS endpoint")
    flag("pricing-endpoint-url", None, "Pricing API endpoint")
    flag("interruption-queue", None, "SQS interruption queue name or URL")
    flag("tls-cert-file", None, "server certificate (PEM)")
    flag("tls-key-file", None, "server private key (PEM)")
    flag("tls-client-ca-file", None, "CA of client certificates (turns on mutual TLS)")
    flag("auth-token", None, "bearer token callers must send")
    flag("auth-token-file", None, "file holding the bearer token (re-read when it changes)")
    flag(
        "credentials-poll-seconds",
        str(DEFAULT_POLL_SECONDS),
        "how often TLS and token files are checked for changes",
    )
    flag("metrics-port", None, "serve Prometheus metrics on this port")
    flag("unavailable-offering-ttl-seconds", str(DEFAULT_TTL_SECONDS), "ICE cache TTL")
    flag("cluster-endpoint", "", "API server URL for nodeadm's NodeConfig")
    flag("cluster-ca-bundle", "", "API server CA (base64) for nodeadm's NodeConfig")
    flag("cluster-cidr", "", "service CIDR for nodeadm's NodeConfig")
    flag("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR")
    return parser.parse_args(argv)


def settings_from_args(args: argparse.Namespace) -> ActuatorSettings:
    """Settings from parsed flags; SystemExit with a clear message on bad combinations."""
    tls = None
    if args.tls_cert_file or args.tls_key_file:
        if not (args.tls_cert_file and args.tls_key_file):
            raise SystemExit("--tls-cert-file and --tls-key-file go together")
        tls = TlsFiles(
            Path(args.tls_cert_file),
            Path(args.tls_key_file),
            Path(args.tls_client_ca_file) if args.tls_client_ca_file else None,
        )
    return ActuatorSettings(
        listen=args.listen,
        region=args.region,
        cluster_name=args.cluster_name,
        endpoints=AwsEndpoints(
            ec2=args.ec2_endpoint_url, sqs=args.sqs_endpoint_url, pricing=args.pricing_endpoint_url
        ),
        interruption_queue=args.interruption_queue or "",
        tls=tls,
        auth_token=args.auth_token or "",
        auth_token_file=Path(args.auth_token_file) if args.auth_token_file else None,
        credentials_poll_seconds=float(args.credentials_poll_seconds),
        health_port=int(args.health_port) if args.health_port else None,
        unavailable_offering_ttl_seconds=float(args.unavailable_offering_ttl_seconds),
        cluster_endpoint=args.cluster_endpoint,
        cluster_ca_bundle=args.cluster_ca_bundle,
        cluster_cidr=args.cluster_cidr,
    )


async def run(settings: ActuatorSettings, metrics_port: int | None) -> None:
    """Serve until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = ActuatorMetrics()
    if metrics_port is not None:
        start_http_server(metrics_port, registry=metrics.registry)
    async with serve(settings, metrics=metrics) as running:
        # The catalog (thousands of long-lived dicts) is loaded by now: keep it out of the
        # collector's full passes, which otherwise stall a launch for tens of milliseconds.
        gc.freeze()
        log.info(
            "actuator_ready",
            address=running.address,
            cluster=settings.cluster_name,
            region=settings.region,
            tls=settings.tls is not None,
            mutual_tls=settings.tls is not None and settings.tls.client_ca_file is not None,
            token=bool(settings.auth_token or settings.auth_token_file),
            health_port=running.health_port,
            metrics_port=metrics_port,
        )
        print(f"ready {running.address}", flush=True)  # noqa: T201  (the parent reads the port)
        await stop.wait()
        log.info("actuator_stopping")
    log.info("actuator_stopped")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point."""
    args = parse_args(argv)
    configure_logging(args.log_level)
    settings = settings_from_args(args)
    try:
        check_exposure(settings)
        asyncio.run(run(settings, int(args.metrics_port) if args.metrics_port else None))
    except (InsecureListenError, CredentialFileError) as exc:
        raise SystemExit(f"actuator: {exc}") from None


if __name__ == "__main__":
    main()
