"""`python -m localcloud`: a local cloud (EC2 emulator) with a Kubernetes cluster in it.

Starts the EC2 emulator, the Kubernetes API server (TLS on loopback) and the control plane
(default-scheduler, kubelets for the cluster's instances, controllers), writes the kubeconfig,
prints the endpoints and a line containing `ready` once everything serves, and runs until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

import structlog

from localcloud.cluster import LocalCloud


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localcloud", description=__doc__)
    parser.add_argument("--kubeconfig", help="where to write the kubeconfig (default: a temp file)")
    parser.add_argument("--kube-port", type=int, default=0, help="API server port (0: free port)")
    parser.add_argument("--ec2-port", type=int, default=0, help="EC2 emulator port (0: free port)")
    parser.add_argument(
        "--boot-seconds", type=float, default=5.0, help="how long a new node stays NotReady"
    )
    parser.add_argument("--cluster-name", default="daiku")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--no-tls", action="store_true", help="serve the API over plain HTTP")
    for behaviour in ("scheduler", "kubelets", "controllers"):
        parser.add_argument(
            f"--no-{behaviour}",
            action="store_true",
            help=f"leave the {behaviour} out (a stiller cluster)",
        )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    return parser


async def _serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with LocalCloud(
        kube_port=args.kube_port,
        ec2_port=args.ec2_port,
        boot_seconds=args.boot_seconds,
        cluster_name=args.cluster_name,
        region=args.region,
        kubeconfig_path=args.kubeconfig,
        tls=not args.no_tls,
        scheduler=not args.no_scheduler,
        kubelets=not args.no_kubelets,
        controllers=not args.no_controllers,
    ) as cloud:
        sys.stdout.write(
            f"kube_url={cloud.kube.url}\n"
            f"ec2_endpoint_url={cloud.ec2.endpoint_url}\n"
            f"interruption_queue_url={cloud.ec2.interruption_queue_url}\n"
            f"kubeconfig={cloud.kubeconfig_path}\n"
            f"localcloud ready cluster_name={cloud.cluster_name}\n"
        )
        sys.stdout.flush()
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # logs go to stderr so that stdout carries only the endpoints and the ready line
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[args.log_level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
