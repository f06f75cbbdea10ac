"""The whole stack on loopback: LocalCloud (Kubernetes API + control plane + EC2 emulator,
boot_seconds=0), the actuator serving gRPC on a real socket, and scheduler replicas in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from actuator_svc.cloud.ec2 import AwsEndpoints, RetryPolicy
from actuator_svc.service import ActuatorSettings, RunningActuator, serve
from localcloud.cluster import LocalCloud
from localcloud.ec2.instance_types import emulated_on_demand_prices
from localcloud.ec2.spot_prices import spot_price
from scheduler_svc.disruption import DisruptionControllerSettings
from scheduler_svc.lifecycle.controller import LifecycleSettings
from scheduler_svc.lifecycle.termination import TerminationSettings
from scheduler_svc.nodeclass import NodeClassStatusSettings
from scheduler_svc.service import SchedulerService, ServiceOptions
from scheduler_svc.settings import SchedulerSettings
from tests.polling import until

ROOT = Path(__file__).parents[2]
CRDS = ROOT / "deploy" / "crds"
DEMO = ROOT / "deploy" / "examples" / "demo"


# A small on-demand pool: predictable types and prices for the tests that only need a node.
ON_DEMAND_SMALL = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c5.large", "m5.large"],
    },
]


def pause_pod_spec(cpu: str, memory: str) -> dict[str, Any]:
    """A pod spec of one pause container requesting `cpu` and `memory`, gone at once when
    deleted."""
    return {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }


def free_port() -> int:
    """A TCP port free on loopback now (the scheduler's settings read 0 as "off")."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def demo_object(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEMO / name).read_text())
    return loaded


@dataclass
class RunningScheduler:
    service: SchedulerService
    stop: asyncio.Event
    task: asyncio.Task[None]
    ready_lines: list[str]

    async def halt(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, timeout=20)


# The services' long-running loops (the scheduler's run, watches, campaign and controllers, the
# actuator's catalog refresh and event feed): one that ends with an error while a test runs is
# a crash the test must not pass over. Per-claim work may fail and be retried; it is not here.
SERVICE_PACKAGES = tuple(str(ROOT / package) for package in ("scheduler_svc", "actuator_svc"))
SERVICE_LOOPS = frozenset({"run", "run_watches", "_campaign", "_lead", "keep"})


@dataclass
class CrashWatch:
    """Keeps every service loop task (see SERVICE_LOOPS) started while it watches, through a
    task factory on the event loop; ``stop`` lists those that ended with an error."""

    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.set_task_factory(self._task)

    def stop(self) -> list[str]:
        """Stop watching; the tasks that crashed since it started."""
        if self._loop is not None:
            self._loop.set_task_factory(None)
            self._loop = None
        tasks, self.tasks = self.tasks, []
        return [
            f"task {task.get_name()} ({task.get_coro()!r}): {task.exception()!r}"
            for task in tasks
            if task.done() and not task.cancelled() and task.exception() is not None
        ]

    def _task(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        code = getattr(coro, "cr_code", None)
        if (
            code is not None
            and code.co_name in SERVICE_LOOPS
            and code.co_filename.startswith(SERVICE_PACKAGES)
        ):
            self.tasks.append(task)
        return task


@dataclass
class Stack:
    cloud: LocalCloud
    actuator: RunningActuator
    tmp_path: Path
    schedulers: list[RunningScheduler] = field(default_factory=list)
    crash_watch: CrashWatch = field(default_factory=CrashWatch)

    @property
    def store(self) -> Any:
        return self.cloud.kube.store

    def settings(self, **overrides: Any) -> SchedulerSettings:
        values: dict[str, Any] = {
            "kubeconfig": self.cloud.kubeconfig_path,
            "actuator_address": self.actuator.address,
            "cluster_name": self.cloud.cluster_name,
            "batch_idle_seconds": 0.1,
            "batch_max_seconds": 1.0,
            "health_port": free_port(),
            "metrics_port": free_port(),
            "leader_elect": False,
            "log_format": "json",
        }
        values.update(overrides)
        return SchedulerSettings(**values)

    async def start_scheduler(
        self,
        *,
        lifecycle: LifecycleSettings | None = None,
        wall_clock: Callable[[], datetime] | None = None,
        kubeconfig: Path | None = None,
        wait_ready: bool = True,
        options: ServiceOptions | None = None,
        **overrides: Any,
    ) -> RunningScheduler:
        """A scheduler replica on this stack (`overrides`: SchedulerSettings fields; `options`:
        the service's test knobs, `lifecycle` and `wall_clock` replacing theirs when given)."""
        options = options or ServiceOptions(lifecycle=LifecycleSettings(tick_seconds=0.5))
        if lifecycle is not None:
            options = dataclasses.replace(options, lifecycle=lifecycle)
        if wall_clock is not None:
            options = dataclasses.replace(options, wall_clock=wall_clock)
        if kubeconfig is not None:
            overrides["kubeconfig"] = kubeconfig
        service = SchedulerService(self.settings(**overrides), options=options)
        stop = asyncio.Event()
        lines: list[str] = []
        task = asyncio.create_task(service.run(stop, on_ready=lines.append))
        running = RunningScheduler(service, stop, task, lines)
        self.schedulers.append(running)
        if wait_ready:
            await until(lambda: bool(lines) or task.done(), timeout_seconds=20)
            if task.done():
                task.result()
        return running

    async def apply_pool(
        self,
        *,
        limits: dict[str, Any] | None = None,
        requirements: list[dict[str, Any]] | None = None,
    ) -> None:
        node_class = demo_object("ec2nodeclass.yaml")
        pool = demo_object("nodepool.yaml")
        if limits is not None:
            pool["spec"]["limits"] = limits
        if requirements is not None:
            pool["spec"]["template"]["spec"]["requirements"] = requirements
        await self.store.create("ec2nodeclasses", node_class)
        await self.store.create("nodepools", pool)

    async def create_pods(
        self, count: int, *, cpu: str = "1", memory: str = "1Gi", prefix: str = "app"
    ) -> list[str]:
        names = []
        for i in range(count):
            name = f"{prefix}-{i}"
            await self.store.create(
                "pods",
                {
                    "metadata": {"name": name, "namespace": "default", "labels": {"app": prefix}},
                    "spec": pause_pod_spec(cpu, memory),
                },
                "default",
            )
            names.append(name)
        return names

    async def create_deployment(
        self, replicas: int, *, name: str = "web", cpu: str = "500m", memory: str = "512Mi"
    ) -> None:
        """A Deployment of pause pods labelled app=<name>, each requesting cpu and memory."""
        await self.store.create(
            "deployments",
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": pause_pod_spec(cpu, memory),
                    },
                },
            },
            "default",
        )

    async def delete_workloads(self) -> None:
        """Delete the default namespace's Deployments and ReplicaSets (their pods then go with
        the garbage collector)."""
        for plural in ("deployments", "replicasets"):
            for obj in await self.objects(plural, "default"):
                with contextlib.suppress(Exception):
                    await self.store.delete(plural, obj["metadata"]["name"], "default")

    async def reset(self) -> None:
        """Empty the stack for the next test; then fail if a scheduler or actuator task crashed
        during this one (stopping them here is not the test's doing, so it is not watched)."""
        crashes = self.crash_watch.stop()
        for scheduler in self.schedulers:
            with contextlib.suppress(Exception):
                await scheduler.halt()
        self.schedulers.clear()
        store = self.store
        await self.delete_workloads()  # first, or they would make the pods again
        for plural in ("nodeclaims", "nodes"):
            for obj in await self.objects(plural):
                name = obj["metadata"]["name"]
                with contextlib.suppress(Exception):
                    await store.patch(plural, name, {"metadata": {"finalizers": None}})
                with contextlib.suppress(Exception):
                    await store.delete(plural, name)
        for pod in await self.objects("pods", "default"):
            with contextlib.suppress(Exception):
                await store.delete(
                    "pods", pod["metadata"]["name"], "default", grace_period_seconds=0
                )
        for event in await self.objects("events", "default"):
            with contextlib.suppress(Exception):
                await store.delete("events", event["metadata"]["name"], "default")
        for plural in ("capacitybuffers", "nodepools", "ec2nodeclasses", "nodeoverlays"):
            for obj in await self.objects(plural):
                with contextlib.suppress(Exception):
                    await store.delete(plural, obj["metadata"]["name"])
        for lease in await self.objects("leases", "default"):
            with contextlib.suppress(Exception):
                await store.delete("leases", lease["metadata"]["name"], "default")
        ids = [i["InstanceId"] for i in self.running_instances()]
        if ids:
            self.ec2_client().terminate_instances(InstanceIds=ids)
        self.cloud.ec2.reset_capacity()
        self.cloud.ec2.clear_faults()
        self.cloud.ec2.clear_create_fleet_calls()
        self.actuator.unavailable.clear()

        async def empty() -> bool:
            return not await self.objects("nodes") and not await self.objects("pods", "default")

        await until(empty, timeout_seconds=15)
        if crashes:
            pytest.fail("a service crashed during the test:\n" + "\n".join(crashes))

    def ec2_client(self) -> Any:
        import boto3

        return boto3.client(
            "ec2",
            endpoint_url=self.cloud.ec2.endpoint_url,
            region_name=self.cloud.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    async def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        listed = await self.store.list(plural, namespace)
        return [copy.deepcopy(i) for i in listed.items]

    def running_instances(self) -> list[Any]:
        reservations = self.ec2_client().describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )["Reservations"]
        return [i for r in reservations for i in r["Instances"]]


@contextlib.asynccontextmanager
async def local_cloud_with_crds(tmp_path: Path) -> AsyncIterator[LocalCloud]:
    """LocalCloud (boot 0, fast EC2 polling) with daiku's CRDs installed, and the emulator's
    dummy AWS credentials in the environment for the actuator's client."""
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            patch.setenv(variable, value)
        async with LocalCloud(
            boot_seconds=0, ec2_poll_seconds=0.05, kubeconfig_path=tmp_path / "kubeconfig"
        ) as cloud:
            for crd in sorted(CRDS.glob("*.yaml")):
                await cloud.kube.store.create(
                    "customresourcedefinitions", yaml.safe_load(crd.read_text())
                )
            yield cloud


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """One LocalCloud + actuator per module: the actuator's catalog prefetch through moto takes
    ~10 s, too long to pay per test."""
    tmp_path = tmp_path_factory.mktemp("e2e")
    async with local_cloud_with_crds(tmp_path) as cloud:
        settings = ActuatorSettings(
            listen="127.0.0.1:0",
            cluster_name=cloud.cluster_name,
            endpoints=AwsEndpoints(ec2=cloud.ec2.endpoint_url, pricing=cloud.ec2.endpoint_url),
            retry=RetryPolicy(max_attempts=3, base_seconds=0.01, max_seconds=0.05),
        )
        async with serve(settings) as actuator:
            yield Stack(cloud, actuator, tmp_path)


@pytest_asyncio.fixture(loop_scope="module")
async def stack(shared_stack: Stack) -> AsyncIterator[Stack]:
    """The shared stack, emptied after the test: schedulers stopped, every object the test
    made deleted, instances terminated, capacity and faults reset; the test fails if a
    scheduler or actuator task crashed while it ran, or when any of daiku's writes carried a
    field its kind does not declare (the API server's fieldValidation warnings; a real
    cluster under kubectl's Strict default refuses them)."""
    shared_stack.crash_watch.start(asyncio.get_running_loop())
    yield shared_stack
    await shared_stack.reset()
    warnings = shared_stack.cloud.kube.api.field_warnings
    unknown_fields, warnings[:] = list(warnings), []
    assert not unknown_fields, f"daiku wrote fields the API does not declare: {unknown_fields}"


def pods_running(names: list[str]) -> Callable[[dict[str, Any]], bool]:
    def check(pod: dict[str, Any]) -> bool:
        return pod["metadata"]["name"] in names and pod.get("status", {}).get("phase") == "Running"

    return check


class FrozenClock:
    """Wall time (UTC) that moves only when the test moves it (the disruption controller's
    clock: consolidateAfter, expireAfter, validation waits, budget schedules)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def set(self, moment: datetime) -> None:
        assert moment >= self.now, f"the clock only moves forward ({self.now} -> {moment})"
        self.now = moment


@contextlib.contextmanager
def api_server_clock(stack: Stack, clock: Callable[[], datetime]) -> Iterator[None]:
    """The API server stamps creation/deletion times from `clock` for the block: node ages
    then move with the clock the disruption controller reads, as in a real cluster, instead of
    every node born after a jump of the clock looking that much older."""
    with stack.store.using_clock(clock):
        yield


FAST_TERMINATION = LifecycleSettings(
    tick_seconds=0.5,
    termination=TerminationSettings(
        poll_seconds=0.05,
        eviction_backoff_base_seconds=0.1,
        eviction_backoff_max_seconds=0.3,
        instance_poll_seconds=0.1,
    ),
)


async def start_with_disruption_clock(
    stack: Stack,
    clock: FrozenClock,
    *,
    lifecycle: LifecycleSettings = FAST_TERMINATION,
    nodeclass: NodeClassStatusSettings | None = None,
) -> RunningScheduler:
    """A scheduler whose disruption controller reads `clock` and passes every 0.2 s (soon
    after changes), with fast termination polls unless `lifecycle` says otherwise; ready when
    it returns."""
    options = ServiceOptions(
        lifecycle=lifecycle,
        disruption=DisruptionControllerSettings(
            interval_seconds=0.2, min_interval_seconds=0.05, poll_seconds=0.05
        ),
        disruption_clock=clock,
        nodeclass=nodeclass or NodeClassStatusSettings(),
    )
    return await stack.start_scheduler(options=options)


class ApiWatch:
    """Every change to one collection as the API server streams it over HTTP (`?watch=1`,
    from the resourceVersion of a first list, resumed after the server closes the stream);
    `on_event(type, object)` runs for each, in order. Use as an async context manager."""

    def __init__(
        self, cloud: LocalCloud, path: str, on_event: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self._url = f"{cloud.kube.url}{path}"
        self._headers = {"Authorization": f"Bearer {cloud.kube.token}"}
        self._ca_pem = cloud.kube.ca_pem
        self._on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self.events = 0

    async def __aenter__(self) -> ApiWatch:
        context = None
        if self._ca_pem is not None:
            context = ssl.create_default_context(cadata=self._ca_pem.decode())
        self._session = aiohttp.ClientSession(
            headers=self._headers, connector=aiohttp.TCPConnector(ssl=context or True)
        )
        try:
            async with self._session.get(self._url) as response:
                response.raise_for_status()
                listed = await response.json()
        except BaseException:
            await self._session.close()
            raise
        for item in listed.get("items") or []:
            self._on_event("ADDED", item)
        self._task = asyncio.create_task(self._follow(str(listed["metadata"]["resourceVersion"])))
        return self

    async def _follow(self, version: str) -> None:
        while True:
            params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "300"}
            async with self._session.get(
                self._url, params=params, timeout=aiohttp.ClientTimeout(total=None)
            ) as response:
                response.raise_for_status()
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise AssertionError(f"watch {self._url} failed: {obj}")
                    version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                    if event.get("type") != "BOOKMARK":
                        self.events += 1
                        self._on_event(str(event["type"]), obj)

    def check(self) -> None:
        """Raise what stopped the watch, if it stopped."""
        if self._task is not None and self._task.done():
            self._task.result()

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._session.close()


def emulator_price(region: str, instance_type: str, zone: str, capacity_type: str) -> float:
    """USD/hour the EC2 emulator charges for one offering (its own price model, independent
    of what the scheduler believes)."""
    on_demand = emulated_on_demand_prices(region)[instance_type]
    if capacity_type == "spot":
        return spot_price(instance_type, zone, on_demand)
    return on_demand


async def mirror_saw_pods_leave(scheduler: RunningScheduler, nodes: set[str]) -> None:
    """Until the scheduler's cluster mirror shows no pod bound to `nodes`. The disruption
    controller counts a node's quiet time from its clock's reading when it saw the last pod
    go, so a test moves that clock only after this (synchronisation, not an assertion)."""
    mirror = scheduler.service.mirror
    await until(lambda: not any(mirror.pods_on_node(n) for n in nodes))


async def mirror_saw_pods_on(scheduler: RunningScheduler, nodes: set[str]) -> None:
    """Until the scheduler's cluster mirror shows a pod bound to each of `nodes` (called before
    deleting them, so that `mirror_saw_pods_leave` waits for the deletion, not the binding)."""
    mirror = scheduler.service.mirror
    await until(lambda: all(mirror.pods_on_node(n) for n in nodes))
