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

from daiku_cli.processes import ManagedProcess, start_module
from daiku_cli.scenario.observe import PriceBook
from scheduler_svc.actuator_client import ActuatorClient, ActuatorDeadlines

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


@dataclass(frozen=True)
class StackPorts:
    """Ports chosen up front, so the actuator and the scheduler can start while localcloud
    is still starting (each spends seconds importing its libraries)."""

    ec2: int
    actuator: int

    @classmethod
    def free(cls) -> StackPorts:
        return cls(ec2=free_port(), actuator=free_port())

    @property
    def ec2_endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ec2}"

    @property
    def actuator_address(self) -> str:
        return f"127.0.0.1:{self.actuator}"


@dataclass
class Stack:
    """The running processes and where they serve; `stop()` stops them all."""

    work_dir: Path
    cluster_name: str
    ports: StackPorts
    kubeconfig: Path
    localcloud: ManagedProcess | None = None
    actuator: ManagedProcess | None = None
    scheduler: ManagedProcess | None = None
    scheduler_metrics_port: int = 0
    processes: list[ManagedProcess] = field(default_factory=list)

    @property
    def actuator_address(self) -> str:
        return self.ports.actuator_address

    def add(self, process: ManagedProcess) -> ManagedProcess:
        self.processes.append(process)
        return process

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


def new_stack(work_dir: Path, cluster_name: str) -> Stack:
    return Stack(
        work_dir=work_dir,
        cluster_name=cluster_name,
        ports=StackPorts.free(),
        kubeconfig=work_dir / "kubeconfig",
    )


async def start_localcloud(stack: Stack, *, boot_seconds: float) -> None:
    process = await start_module(
        "localcloud",
        "localcloud",
        [
            "--kubeconfig",
            str(stack.kubeconfig),
            "--ec2-port",
            str(stack.ports.ec2),
            "--boot-seconds",
            str(boot_seconds),
            "--cluster-name",
            stack.cluster_name,
            "--log-level",
            "warning",
        ],
        stack.work_dir,
    )
    stack.localcloud = stack.add(process)


async def start_actuator(stack: Stack) -> None:
    """The actuator on its chosen port; it may start before the EC2 emulator serves (it
    fetches the catalog again on first use when its start-up prefetch fails)."""
    process = await start_module(
        "actuator",
        "actuator_svc",
        [
            "--listen",
            stack.ports.actuator_address,
            "--ec2-endpoint-url",
            stack.ports.ec2_endpoint_url,
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
    stack.actuator = stack.add(process)


async def start_scheduler(stack: Stack, extra_args: list[str] | None = None) -> None:
    """The scheduler against localcloud's kubeconfig (which must exist) and the actuator's
    address (which need not serve yet: gRPC connects when the first call is made)."""
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
            stack.ports.actuator_address,
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
    stack.scheduler = stack.add(process)


async def price_book(
    actuator_address: str, timeout_seconds: float = 30.0, serving_wait_seconds: float = 60.0
) -> PriceBook:
    """Every offering's price as the actuator reports it (what the scheduler chose from).

    Waits first (at most `serving_wait_seconds`) for the actuator's health to say SERVING,
    which it does once its catalog is loaded: started next to a slow EC2, its first catalog
    fetch may fail and be retried, and a list asked meanwhile would hit its deadline."""
    deadlines = ActuatorDeadlines(list_instance_types_seconds=timeout_seconds)
    async with ActuatorClient.connect(actuator_address, deadlines=deadlines) as actuator:
        await actuator.wait_until_serving(serving_wait_seconds)  # else the list reports why
        instance_types = await actuator.list_instance_types()
    return {
        (t.name, o.zone, o.capacity_type): o.price_per_hour
        for t in instance_types
        for o in t.offerings
    }


async def stop_quietly(stop: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await stop()
