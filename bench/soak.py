"""Kill/replica soak (issue 13): random kill -9 of two actuator replicas and the scheduler during a
scale-up with ICE, then count what must never happen.

    .venv/bin/python -m bench.soak                          # seed 1, 60 pods, 90 s of kills
    .venv/bin/python -m bench.soak --seed 7 --pods 100 --kill-seconds 180 --logs /tmp/soak

The stack is `daiku up`'s, as local processes on loopback: localcloud (Kubernetes API + EC2
emulator), two `python -m actuator_svc` replicas behind a connection-level round-robin proxy
(what a Service's kube-proxy does: one gRPC connection sticks to one replica until it breaks),
and one `python -m scheduler_svc`. While a Deployment scales up in steps:

- every `--kill-every` seconds (randomised ±50 %) one of actuator-a, actuator-b and the
  scheduler is killed with SIGKILL and started again after 1-4 s, as a kubelet restarts a pod
  (its new log is `<name>-<n>.log`);
- every `--ice-every` seconds a random spot pool of the NodePool's types and zones flips between
  out of capacity (InsufficientInstanceCapacity) and available; a third start out of capacity;
- every `--interrupt-every` seconds a random live spot instance gets a Spot Interruption Warning
  on the interruption queue (without being reclaimed: only daiku acting on it removes it).

Then the kills stop, every process is up (exit 2 when one does not start again), ICE is
cleared, and the stack settles (bounded by `--settle-seconds`): all pods Running, no orphan,
no interrupted instance left, no duplicate.
Printed, and each must be 0 (exit 1 otherwise; exit 2 when the stack did not settle):

- duplicates: instances beyond the first seen live at once for one NodeClaim (sampled every
  second through the run, from the instances' `daiku.dev/nodeclaim` tags);
- orphans: live instances of the cluster whose NodeClaim does not exist, after settling (the
  scheduler's garbage collection terminates those older than 30 s);
- lost events: interruption messages whose instance is still live after settling.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.reaction import CRD_DIR, deployment
from daiku_cli.processes import ManagedProcess, ProcessFailedError, start_module
from daiku_cli.scenario.defaults import default_node_class, default_node_pool
from daiku_cli.up_kube import KubeClient
from daiku_cli.up_runner import install_crds
from daiku_cli.up_stack import INTERRUPTION_QUEUE, free_port, new_stack, start_localcloud

CLUSTER = "daiku"
CLAIM_TAG = "daiku.dev/nodeclaim"
CLUSTER_TAG = "daiku.dev/cluster"
TYPES = ("c5.large", "m5.large", "c5.xlarge", "m5.xlarge")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "localcloud",
    "AWS_SECRET_ACCESS_KEY": "localcloud",
    "AWS_REGION": "us-east-1",
}


# -- the replicas' Service -------------------------------------------------------------------


class RoundRobinProxy:
    """A TCP listener that hands each new connection to the next replica that accepts it, and
    pipes bytes until either side closes (a killed replica breaks its connections; the client
    reconnects and lands on a live one)."""

    def __init__(self, backends: list[int]) -> None:
        self._backends = backends
        self._next = 0
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for _ in self._backends:
            port = self._backends[self._next % len(self._backends)]
            self._next += 1
            with contextlib.suppress(OSError):
                upstream = await asyncio.open_connection("127.0.0.1", port)
                break
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        pipes = [
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer)),
        ]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for task in pipes:
            task.cancel()
        for each in (writer, up_writer):
            each.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


# -- processes that get killed ----------------------------------------------------------------


@dataclass
class Service:
    """One killable process and how to start it again (`start(generation)`)."""

    name: str
    start: Callable[[int], Awaitable[ManagedProcess]]
    process: ManagedProcess | None = None
    generation: int = 0
    kills: int = 0
    restarting: asyncio.Task[None] | None = None
    failed_start: str | None = None  # why a restart did not become ready

    async def launch(self) -> None:
        self.generation += 1
        self.process = await self.start(self.generation)

    def up(self) -> bool:
        return self.process is not None and self.process.process.returncode is None

    async def kill_and_restart(self, delay_seconds: float) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.process.pid, signal.SIGKILL)
        await self.process.process.wait()
        self.kills += 1
        await asyncio.sleep(delay_seconds)  # the kubelet's restart back-off
        await self.launch()

    async def stop(self) -> None:
        if self.restarting is not None:
            self.restarting.cancel()
            await asyncio.gather(self.restarting, return_exceptions=True)
        if self.process is not None:
            await self.process.stop()


def actuator_starter(work_dir: Path, name: str, port: int, ec2_url: str) -> Service:
    async def start(generation: int) -> ManagedProcess:
        return await start_module(
            f"{name}-{generation}",
            "actuator_svc",
            [
                "--listen",
                f"127.0.0.1:{port}",
                "--ec2-endpoint-url",
                ec2_url,
                "--cluster-name",
                CLUSTER,
                "--interruption-queue",
                INTERRUPTION_QUEUE,
            ],
            work_dir,
            env=AWS_ENV,
            ready_timeout_seconds=180,
        )

    return Service(name, start)


def scheduler_starter(work_dir: Path, kubeconfig: Path, actuator_address: str) -> Service:
    async def start(generation: int) -> ManagedProcess:
        return await start_module(
            f"scheduler-{generation}",
            "scheduler_svc",
            [
                "--kubeconfig",
                str(kubeconfig),
                "--actuator-address",
                actuator_address,
                "--cluster-name",
                CLUSTER,
                "--metrics-port",
                "0",
                "--health-port",
                "0",
                "--no-leader-elect",
            ],
            work_dir,
            ready_timeout_seconds=180,
        )

    return Service("scheduler", start)


# -- the cloud's view ---------------------------------------------------------------------------


class Emulator:
    """The EC2 emulator's admin API and its EC2 API (boto3, in a thread)."""

    def __init__(self, url: str) -> None:
        import boto3

        self.url = url
        self._ec2 = boto3.client(
            "ec2",
            endpoint_url=url,
            region_name=AWS_ENV["AWS_REGION"],
            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        )

    def admin(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            f"{self.url}/_localcloud/{path}",
            data=body,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def live_instances(self) -> list[dict[str, Any]]:
        """Pending or running instances of this cluster, with their tags as a dict."""
        pages = self._ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
                {"Name": f"tag:{CLUSTER_TAG}", "Values": [CLUSTER]},
            ]
        )
        return [
            {**i, "Tags": {t["Key"]: t["Value"] for t in i.get("Tags") or []}}
            for page in pages
            for r in page["Reservations"]
            for i in r["Instances"]
        ]


@dataclass
class Tally:
    """What the run saw."""

    duplicate_ids: dict[str, set[str]] = field(default_factory=dict)  # claim -> instance ids
    interrupted: dict[str, str] = field(default_factory=dict)  # instance id -> claim
    interrupted_while_scheduler_down: int = 0
    ice_flips: int = 0
    most_instances_per_claim: int = 0

    def observe(self, instances: list[dict[str, Any]]) -> None:
        by_claim: dict[str, set[str]] = {}
        for instance in instances:
            claim = instance["Tags"].get(CLAIM_TAG, "")
            by_claim.setdefault(claim, set()).add(instance["InstanceId"])
        for claim, ids in by_claim.items():
            if claim:
                self.most_instances_per_claim = max(self.most_instances_per_claim, len(ids))
            if claim and len(ids) > 1:
                self.duplicate_ids.setdefault(claim, set()).update(ids)

    @property
    def duplicates(self) -> int:
        return sum(len(ids) - 1 for ids in self.duplicate_ids.values())


# -- the run --------------------------------------------------------------------------------------


def soak_pool() -> dict[str, Any]:
    pool = default_node_pool()
    pool["spec"]["limits"] = {"cpu": "1000"}
    # Consolidation off: an instance daiku terminates is one it was told to (interruption) or
    # one it garbage-collects, so "acted on" means what it says.
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(TYPES)},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)},
    ]
    return pool


@dataclass
class Options:
    seed: int
    pods: int
    kill_seconds: float
    kill_every: float
    ice_every: float
    interrupt_every: float
    settle_seconds: float


async def chaos(
    options: Options,
    *,
    rng: random.Random,
    services: list[Service],
    emulator: Emulator,
    tally: Tally,
    kube: KubeClient,
) -> None:
    """Scale up in steps while killing, flipping ICE and interrupting, for kill_seconds."""
    pools = [(t, z) for t in TYPES for z in ZONES]
    iced = set(rng.sample(pools, len(pools) // 3))
    for instance_type, zone in iced:
        emulator.admin("POST", "capacity", _pool(instance_type, zone, available=False))
    steps = [round(options.pods * (i + 1) / 4) for i in range(4)]
    started = time.monotonic()
    next_step = next_kill = next_ice = next_interrupt = started
    loop_end = started + options.kill_seconds
    while (now := time.monotonic()) < loop_end:
        if steps and now >= next_step:
            await kube.scale_deployment("default", "soak", steps.pop(0))
            next_step = now + options.kill_seconds / 5
        if now >= next_kill:
            next_kill = now + options.kill_every * rng.uniform(0.5, 1.5)
            candidates = [s for s in services if s.up() and s.restarting is None]
            if candidates:
                victim = rng.choice(candidates)
                print(f"  {now - started:5.1f} s: kill -9 {victim.name}", flush=True)
                victim.restarting = asyncio.create_task(
                    _restart(victim, rng.uniform(1.0, 4.0)), name=f"restart-{victim.name}"
                )
        if now >= next_ice:
            next_ice = now + options.ice_every
            pool = rng.choice(pools)
            available = pool in iced
            (iced.discard if available else iced.add)(pool)
            emulator.admin("POST", "capacity", _pool(*pool, available=available))
            tally.ice_flips += 1
        if now >= next_interrupt:
            next_interrupt = now + options.interrupt_every
            await interrupt_one(rng, services, emulator, tally)
        await asyncio.sleep(0.2)


async def _restart(service: Service, delay_seconds: float) -> None:
    try:
        await service.kill_and_restart(delay_seconds)
    except ProcessFailedError as error:  # reported as a stack that did not settle
        service.failed_start = str(error)
        print(f"  {service.name} did not start again: {error}", flush=True)
    finally:
        service.restarting = None


def _pool(instance_type: str, zone: str, *, available: bool) -> dict[str, Any]:
    return {
        "instance_type": instance_type,
        "zone": zone,
        "capacity_type": "spot",
        "available": available,
    }


async def interrupt_one(
    rng: random.Random, services: list[Service], emulator: Emulator, tally: Tally
) -> None:
    instances = await asyncio.to_thread(emulator.live_instances)
    spot = [
        i
        for i in instances
        if i.get("InstanceLifecycle") == "spot"
        and i["InstanceId"] not in tally.interrupted
        and i["Tags"].get(CLAIM_TAG)
    ]
    if not spot:
        return
    chosen = rng.choice(spot)
    await asyncio.to_thread(
        emulator.admin, "POST", "interrupt", {"instance_id": chosen["InstanceId"]}
    )
    tally.interrupted[chosen["InstanceId"]] = chosen["Tags"][CLAIM_TAG]
    if not next(s for s in services if s.name == "scheduler").up():
        tally.interrupted_while_scheduler_down += 1


async def sample(emulator: Emulator, tally: Tally, stop: asyncio.Event) -> None:
    """Look for duplicates every second until stopped."""
    while not stop.is_set():
        with contextlib.suppress(Exception):  # an emulator busy past the timeout: next second
            tally.observe(await asyncio.to_thread(emulator.live_instances))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


@dataclass
class Final:
    running_pods: int
    orphans: list[str]
    lost: list[str]
    claims: int
    live_instances: int


async def settle(
    options: Options, emulator: Emulator, tally: Tally, kube: KubeClient
) -> tuple[Final, float | None]:
    """Wait (bounded) until everything is as it should be; the last look either way."""
    started = time.monotonic()
    while True:
        final = await look(emulator, tally, kube)
        done = (
            final.running_pods == options.pods
            and not final.orphans
            and not final.lost
            and tally.most_instances_per_claim <= 1
        )
        if done:
            return final, time.monotonic() - started
        if time.monotonic() - started > options.settle_seconds:
            return final, None
        await asyncio.sleep(2.0)


async def look(emulator: Emulator, tally: Tally, kube: KubeClient) -> Final:
    instances = await asyncio.to_thread(emulator.live_instances)
    tally.observe(instances)
    claims = {c["metadata"]["name"] for c in await kube.list("daiku.dev/v1", "NodeClaim")}
    status = (await kube.call("GET", "/apis/apps/v1/namespaces/default/deployments/soak")).get(
        "status"
    ) or {}
    live = {i["InstanceId"] for i in instances}
    return Final(
        running_pods=int(status.get("readyReplicas") or 0),
        orphans=sorted(
            i["InstanceId"] for i in instances if i["Tags"].get(CLAIM_TAG) not in claims
        ),
        lost=sorted(i for i in tally.interrupted if i in live),
        claims=len(claims),
        live_instances=len(instances),
    )


async def soak(options: Options, work_dir: Path) -> int:
    rng = random.Random(options.seed)
    stack = new_stack(work_dir, CLUSTER)
    ports = [free_port(), free_port()]
    proxy = RoundRobinProxy(ports)
    await proxy.start()
    ec2_url = stack.ports.ec2_endpoint_url
    services = [
        actuator_starter(work_dir, "actuator-a", ports[0], ec2_url),
        actuator_starter(work_dir, "actuator-b", ports[1], ec2_url),
        scheduler_starter(work_dir, stack.kubeconfig, f"127.0.0.1:{proxy.port}"),
    ]
    kube: KubeClient | None = None
    stop_sampling = asyncio.Event()
    sampler: asyncio.Task[None] | None = None
    try:
        await start_localcloud(stack, boot_seconds=0)
        kube = await KubeClient.from_kubeconfig(stack.kubeconfig)
        await install_crds(kube, CRD_DIR)
        for obj in (default_node_class(CLUSTER), soak_pool(), deployment("soak", "900m", "1Gi")):
            await kube.apply(obj)
        # One replica after the other: two catalog prefetches at once starve the emulator.
        for service in services:
            await service.launch()
        emulator = Emulator(ec2_url)
        tally = Tally()
        sampler = asyncio.create_task(sample(emulator, tally, stop_sampling))
        print(
            f"soak: seed {options.seed}, {options.pods} pods, {options.kill_seconds:.0f} s of "
            f"kills (every ~{options.kill_every:.0f} s), logs in {work_dir}",
            flush=True,
        )
        await chaos(options, rng=rng, services=services, emulator=emulator, tally=tally, kube=kube)
        await asyncio.gather(*(s.restarting for s in services if s.restarting is not None))
        if any(s.failed_start for s in services):
            print("DID NOT SETTLE: a killed process did not start again (above)")
            return 2
        await kube.scale_deployment("default", "soak", options.pods)  # every step sent
        emulator.admin("DELETE", "capacity")
        final, settled = await settle(options, emulator, tally, kube)
        stop_sampling.set()
        await sampler
        return report(options, services, tally, final, settled)
    finally:
        stop_sampling.set()
        if sampler is not None:
            await asyncio.gather(sampler, return_exceptions=True)
        for service in reversed(services):
            with contextlib.suppress(Exception):
                await service.stop()
        if kube is not None:
            await kube.close()
        await stack.stop()
        await proxy.close()


def report(
    options: Options, services: list[Service], tally: Tally, final: Final, settled: float | None
) -> int:
    kills = Counter({s.name: s.kills for s in services})
    print(
        f"kills: {sum(kills.values())} ("
        + ", ".join(f"{name} {n}" for name, n in kills.items())
        + f"); ICE flips: {tally.ice_flips}; interruptions sent: {len(tally.interrupted)} "
        f"({tally.interrupted_while_scheduler_down} while the scheduler was down)"
    )
    state = f"settled in {settled:.1f} s" if settled is not None else "DID NOT SETTLE"
    print(
        f"{state}: {final.running_pods}/{options.pods} pods Running, {final.claims} NodeClaims, "
        f"{final.live_instances} live instances"
    )
    print(
        f"duplicates: {tally.duplicates} (most instances live at once for one NodeClaim: "
        f"{tally.most_instances_per_claim})"
        + (f" {sorted(tally.duplicate_ids.items())}" if tally.duplicates else "")
    )
    print(f"orphans: {len(final.orphans)}" + (f" {final.orphans}" if final.orphans else ""))
    print(
        f"lost events: {len(final.lost)} of {len(tally.interrupted)}"
        + (f" {final.lost}" if final.lost else "")
    )
    if tally.duplicates or final.orphans or final.lost:
        return 1
    return 0 if settled is not None else 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pods", type=int, default=60)
    parser.add_argument("--kill-seconds", type=float, default=90.0)
    parser.add_argument("--kill-every", type=float, default=8.0)
    parser.add_argument("--ice-every", type=float, default=3.0)
    parser.add_argument("--interrupt-every", type=float, default=10.0)
    parser.add_argument("--settle-seconds", type=float, default=240.0)
    parser.add_argument("--logs", type=Path, default=None, help="keep the processes' logs here")
    args = parser.parse_args(argv)
    options = Options(
        seed=args.seed,
        pods=args.pods,
        kill_seconds=args.kill_seconds,
        kill_every=args.kill_every,
        ice_every=args.ice_every,
        interrupt_every=args.interrupt_every,
        settle_seconds=args.settle_seconds,
    )
    work_dir = args.logs or Path(tempfile.mkdtemp(prefix="daiku-soak-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(soak(options, work_dir))


if __name__ == "__main__":
    sys.exit(main())
