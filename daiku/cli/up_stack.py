"""Start the processes behind `daiku up`: localcloud, the actuator and the scheduler.

Each runs as its own `python -m` process talking over loopback, as in production: the
scheduler reads the Kubernetes API of localcloud and calls the actuator over gRPC; the actuator
calls localcloud's EC2 emulator over HTTP. Logs go to `<work_dir>/<name>.log`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from daiku.actuator.v1 import actuator_pb2, actuator_pb2_grpc
from daiku.cli.processes import ManagedProcess, start_module
from daiku.scenario.observe import PriceBook

INTERRUPTION_QUEUE = "daiku-interruption"


class SchedulerUnavailableError(RuntimeError):
    """This installation has no runnable scheduler service (`python -m scheduler_svc`)."""


def scheduler_problem() -> str | None:
    """Why `python -m scheduler_svc` cannot run here, or None when it can."""
    try:
        spec = importlib.util.find_spec("scheduler_svc.__main__")
    except ImportError as error:
        return f"scheduler_svc cannot be imported: {error}"
    if spec is None:
        return "scheduler_svc has no __main__ module (python -m scheduler_svc)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Stack:
    """The running processes and where they serve."""

    work_dir: Path
    cluster_name: str
    kubeconfig: Path
    localcloud: ManagedProcess
    ec2_endpoint_url: str
    actuator: ManagedProcess | None = None
    actuator_address: str = ""
    scheduler: ManagedProcess | None = None
    scheduler_metrics_port: int = 0
    processes: list[ManagedProcess] = field(default_factory=list)

    async def stop(self) -> dict[str, int]:
        """Stop every process, the last started first; their exit codes by name."""
        codes: dict[str, int] = {}
        for process in reversed(self.processes):
            codes[process.name] = await process.stop()
        return codes

    def exited(self) -> list[str]:
        """Names and exit codes of processes that have stopped on their own."""
        return [
            f"{p.name} (exit {p.process.returncode}; log {p.log_path})"
            for p in self.processes
            if p.process.returncode is not None
        ]


async def start_localcloud(
    work_dir: Path, *, cluster_name: str, boot_seconds: float, kube_port: int = 0
) -> Stack:
    kubeconfig = work_dir / "kubeconfig"
    process = await start_module(
        "localcloud",
        "localcloud",
        [
            "--kubeconfig",
            str(kubeconfig),
            "--kube-port",
            str(kube_port),
            "--boot-seconds",
            str(boot_seconds),
            "--cluster-name",
            cluster_name,
            "--log-level",
            "warning",
        ],
        work_dir,
    )
    stack = Stack(
        work_dir=work_dir,
        cluster_name=cluster_name,
        kubeconfig=kubeconfig,
        localcloud=process,
        ec2_endpoint_url=process.ready_field("ec2_endpoint_url"),
    )
    stack.processes.append(process)
    return stack


async def start_actuator(stack: Stack) -> None:
    process = await start_module(
        "actuator",
        "actuator_svc",
        [
            "--listen",
            "127.0.0.1:0",
            "--ec2-endpoint-url",
            stack.ec2_endpoint_url,
            "--cluster-name",
            stack.cluster_name,
            "--interruption-queue",
            INTERRUPTION_QUEUE,
        ],
        stack.work_dir,
        # The emulator accepts any credentials; real ones must never be needed or sent.
        env={
            "AWS_ACCESS_KEY_ID": "localcloud",
            "AWS_SECRET_ACCESS_KEY": "localcloud",
            "AWS_REGION": "us-east-1",
        },
    )
    stack.processes.append(process)
    stack.actuator = process
    stack.actuator_address = process.ready_address()


async def start_scheduler(stack: Stack, extra_args: list[str] | None = None) -> None:
    problem = scheduler_problem()
    if problem is not None:
        raise SchedulerUnavailableError(problem)
    stack.scheduler_metrics_port = free_port()
    process = await start_module(
        "scheduler",
        "scheduler_svc",
        [
            "--kubeconfig",
            str(stack.kubeconfig),
            "--actuator-address",
            stack.actuator_address,
            "--cluster-name",
            stack.cluster_name,
            "--metrics-port",
            str(stack.scheduler_metrics_port),
            "--health-port",
            "0",
            "--no-leader-elect",
            *(extra_args or []),
        ],
        stack.work_dir,
    )
    stack.processes.append(process)
    stack.scheduler = process


async def price_book(actuator_address: str, timeout_seconds: float = 30.0) -> PriceBook:
    """Every offering's price as the actuator reports it (what the scheduler chose from)."""
    async with grpc.aio.insecure_channel(actuator_address) as channel:
        stub = actuator_pb2_grpc.ActuatorStub(channel)
        response = await stub.ListInstanceTypes(
            actuator_pb2.ListInstanceTypesRequest(), timeout=timeout_seconds
        )
    return {
        (o.instance_type, o.zone, o.capacity_type): o.price
        for t in response.instance_types
        for o in t.offerings
    }


async def stop_quietly(stop: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await stop()
