"""Reaction benchmark: how fast the whole stack turns unschedulable pods into launch requests
and running pods (issue 5), and the scheduler's memory with a large cluster.

    uv run python bench/reaction.py                    # N = 1, 100, 1000 (a fresh stack each)
    uv run python bench/reaction.py --pods 1 100       # chosen sizes
    uv run python bench/reaction.py --pods 100 --batch-idle-seconds 0.1   # another idle window
    uv run python bench/reaction.py --rss              # 10,000 pods on ~1,000 nodes: scheduler RSS
                                                       # (prints RSS every 30 s while it grows,
                                                       # then restarts the scheduler: relist RSS)

The stack is what `daiku up` runs (localcloud, actuator, scheduler as separate processes on
loopback, scheduler defaults: batch idle 1 s / max 10 s), boot delay 0. For each N, a Deployment
of N pods (500m / 512Mi) is scaled 0 -> N and the script records:

- unschedulable: when this script (polling every ~50 ms) sees all N pods marked
  PodScheduled=False/Unschedulable by localcloud's default-scheduler;
- batch closed: the scheduler's provisioning round start (its `provisioning_solved` log event's
  time minus its `solve_seconds`);
- launch requests: when the actuator received each LaunchNodeClaim (its `rpc_finished` log
  event's time minus `duration_ms`), and when the EC2 emulator received each CreateFleet
  (its recorded calls, `/_localcloud/create-fleet-calls`, on the shared monotonic clock);
- all running: when this script sees all N pods Running.

Targets: 1 pod -> launch request <= 150 ms after the batch closes; 1,000 pods -> all launch
requests <= 2 s (after the batch closes); scheduler RSS <= 300 MB with 1,000 nodes and 10,000 pods.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from daiku_cli.scenario.defaults import default_node_class, default_node_pool
from daiku_cli.up_kube import KubeClient
from daiku_cli.up_runner import install_crds
from daiku_cli.up_stack import (
    Stack,
    new_stack,
    start_actuator,
    start_localcloud,
    start_scheduler,
)

CRD_DIR = Path(__file__).resolve().parents[1] / "deploy" / "crds"
POLL_SECONDS = 0.05


def deployment(name: str, cpu: str, memory: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


def wall_to_monotonic(iso: str) -> float:
    """A log timestamp (UTC ISO) on this machine's monotonic clock."""
    offset = time.time() - time.monotonic()
    return datetime.fromisoformat(iso).timestamp() - offset


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == event:
            found.append(record)
    return found


def create_fleet_received(stack: Stack) -> list[float]:
    url = f"{stack.ports.ec2_endpoint_url}/_localcloud/create-fleet-calls"
    with urllib.request.urlopen(url, timeout=30) as response:
        calls = json.loads(response.read())
    return sorted(c["received_monotonic_seconds"] for c in calls if not c["idempotent_replay"])


def rss_megabytes(pid: int, field: str = "VmRSS") -> float:
    """The process's resident memory now (VmRSS) or its high-water mark so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stack_cpu_seconds(stack: Stack) -> str:
    """Each stack process's CPU seconds so far: on a shared machine wall time alone misleads."""
    return ", ".join(
        f"{process.name} {cpu_seconds(process.process.pid):.1f} s"
        for process in stack.processes
        if process.process.returncode is None
    )


@dataclass
class Round:
    pods: int
    scaled: float = 0.0
    unschedulable: float | None = None
    all_running: float | None = None


async def start(
    work_dir: Path, node_pool: dict[str, Any], scheduler_args: list[str] | None = None
) -> tuple[Stack, KubeClient]:
    stack = new_stack(work_dir, "daiku")
    actuator = asyncio.create_task(start_actuator(stack))
    kube: KubeClient | None = None
    try:
        await start_localcloud(stack, boot_seconds=0)
        kube = await KubeClient.from_kubeconfig(stack.kubeconfig)
        await install_crds(kube, CRD_DIR)
        for obj in (default_node_class("daiku"), node_pool):
            await kube.apply(obj)
        await actuator
        await start_scheduler(stack, scheduler_args)
    except BaseException:
        actuator.cancel()
        await asyncio.gather(actuator, return_exceptions=True)
        if kube is not None:
            await kube.close()
        await stack.stop()
        raise
    return stack, kube


def _unschedulable(pod: dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return True
    return False


async def watch_pods(kube: KubeClient, name: str, run: Round, timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        pods = [
            p for p in await kube.list("v1", "Pod") if p["metadata"]["name"].startswith(name + "-")
        ]
        now = time.monotonic()
        if run.unschedulable is None and len(pods) == run.pods:
            marked = sum(
                1 for p in pods if _unschedulable(p) or (p.get("spec") or {}).get("nodeName")
            )
            if marked == run.pods:
                run.unschedulable = now
        if len(pods) == run.pods and all(
            (p.get("status") or {}).get("phase") == "Running" for p in pods
        ):
            run.all_running = now
            return
        await asyncio.sleep(POLL_SECONDS)


def ms(later: float | None, earlier: float | None) -> str:
    if later is None or earlier is None:
        return "n/a"
    return f"{(later - earlier) * 1000:,.0f} ms"


@dataclass(frozen=True)
class LaunchTimes:
    """When each new NodeClaim's LaunchNodeClaim reached the actuator (idempotent repeats for
    a claim already launched are left out), and each CreateFleet reached the emulator."""

    batch_closed: float | None
    solve_seconds: float | None
    launches: list[float]
    create_fleet: list[float]
    rounds: int = 0  # provisioning rounds that created claims


def launch_times(
    work_dir: Path, since: float, fleet: list[float], until: float = float("inf")
) -> LaunchTimes:
    solved = [
        r
        for r in log_events(work_dir / "scheduler.log", "provisioning_solved")
        if r["new_claims"] and since <= wall_to_monotonic(r["timestamp"]) < until
    ]
    batch_closed = (
        wall_to_monotonic(solved[0]["timestamp"]) - solved[0]["solve_seconds"] if solved else None
    )
    first_by_claim: dict[str, float] = {}
    for record in log_events(work_dir / "actuator.log", "nodeclaim_launched"):
        received = wall_to_monotonic(record["timestamp"]) - record["latency_ms"] / 1000
        if since <= received < until:
            first_by_claim.setdefault(record["nodeclaim"], received)
    return LaunchTimes(
        batch_closed=batch_closed,
        solve_seconds=solved[0]["solve_seconds"] if solved else None,
        launches=sorted(first_by_claim.values()),
        create_fleet=[t for t in fleet if since <= t < until],
        rounds=len(solved),
    )


def print_round(title: str, run: Round, times: LaunchTimes, idle_seconds: float) -> None:
    first = times.launches[0] if times.launches else None
    last = times.launches[-1] if times.launches else None
    print(
        f"{title}: N = {run.pods:,} pods (500m/512Mi) -> {len(times.launches)} NodeClaims "
        f"launched in {times.rounds} round(s), {len(times.create_fleet)} CreateFleet"
    )
    rows = [
        ("scale -> all unschedulable", ms(run.unschedulable, run.scaled)),
        (
            f"unschedulable -> batch closed (idle {idle_seconds:g} s)",
            ms(times.batch_closed, run.unschedulable),
        ),
        (
            "solve (scheduler's solve_seconds)",
            f"{times.solve_seconds * 1000:,.0f} ms" if times.solve_seconds is not None else "n/a",
        ),
        ("batch closed -> first LaunchNodeClaim", ms(first, times.batch_closed)),
        ("batch closed -> last LaunchNodeClaim", ms(last, times.batch_closed)),
        (
            "batch closed -> last CreateFleet",
            ms(times.create_fleet[-1] if times.create_fleet else None, times.batch_closed),
        ),
        ("unschedulable -> last LaunchNodeClaim", ms(last, run.unschedulable)),
        ("unschedulable -> all pods Running", ms(run.all_running, run.unschedulable)),
    ]
    for label, value in rows:
        print(f"  {label:<42} {value:>10}")
    sys.stdout.flush()


def bench_node_pool() -> dict[str, Any]:
    """The default NodePool with room for 1,000 pods of 500m (limits.cpu 1000)."""
    pool = default_node_pool()
    pool["spec"]["limits"] = {"cpu": "1000"}
    return pool


async def scale_and_watch(kube: KubeClient, name: str, pods: int) -> Round:
    await kube.apply(deployment(name, "500m", "512Mi"))
    run = Round(pods)
    run.scaled = time.monotonic()
    await kube.scale_deployment("default", name, pods)
    await watch_pods(kube, name, run, timeout_seconds=120)
    if run.all_running is None:
        print(f"  ({name}: not all {pods} pods Running after 120 s)")
    return run


async def reaction(pods: int, keep_logs: Path, idle_seconds: float) -> None:
    """A warm-up pod first (the scheduler fetches the catalog on its first round: that round is
    printed as `cold`), then N pods on the warm stack."""
    work_dir = keep_logs / f"n{pods}"
    stack, kube = await start(
        work_dir, bench_node_pool(), ["--batch-idle-seconds", str(idle_seconds)]
    )
    try:
        cold = await scale_and_watch(kube, "warmup", 1)
        warm = await scale_and_watch(kube, "bench", pods)
        await asyncio.sleep(1.0)  # let the last log lines reach the files
    finally:
        await kube.close()
        fleet = create_fleet_received(stack)
        await stack.stop()
    if pods == 1:
        print_round(
            "cold (the scheduler's first round)",
            cold,
            launch_times(work_dir, cold.scaled, fleet, until=warm.scaled),
            idle_seconds,
        )
    print_round("warm", warm, launch_times(work_dir, warm.scaled, fleet), idle_seconds)


async def rss(keep_logs: Path, pods: int, instance_type: str, cpu: str) -> None:
    """`pods` pods pinned to one instance type so that about pods/10 nodes are launched."""
    pool = default_node_pool()
    pool["spec"]["limits"] = {"cpu": "100000"}
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    work_dir = keep_logs / "rss"
    stack, kube = await start(work_dir, pool)
    assert stack.scheduler is not None
    pid = stack.scheduler.process.pid
    try:
        print(f"scheduler RSS at start: {rss_megabytes(pid):.0f} MB")
        print(f"CPU seconds at start: {stack_cpu_seconds(stack)}", flush=True)
        await kube.apply(deployment("big", cpu, "128Mi"))
        run = Round(pods)
        run.scaled = time.monotonic()
        await kube.scale_deployment("default", "big", pods)
        peak = 0.0
        deadline = time.monotonic() + 900
        next_report = time.monotonic() + 30
        while time.monotonic() < deadline:
            peak = max(peak, rss_megabytes(pid))
            if time.monotonic() >= next_report:
                next_report += 30
                launched = len(log_events(work_dir / "actuator.log", "nodeclaim_launched"))
                print(
                    f"  {time.monotonic() - run.scaled:5.0f} s: {launched} instances launched, "
                    f"scheduler RSS {rss_megabytes(pid):.0f} MB (peak {peak:.0f} MB)",
                    flush=True,
                )
            # The Deployment's status, not a list of 10k pods: the bench must not load the stack.
            status = (
                await kube.call("GET", "/apis/apps/v1/namespaces/default/deployments/big")
            ).get("status") or {}
            if int(status.get("readyReplicas") or 0) >= pods:
                run.all_running = time.monotonic()
                break
            await asyncio.sleep(2.0)
        nodes = len(await kube.list("v1", "Node"))
        await asyncio.sleep(5.0)  # the mirror settles; steady-state RSS
        steady = rss_megabytes(pid)
        peak = max(peak, steady, rss_megabytes(pid, "VmHWM"))
        print(
            f"{pods:,} pods ({cpu}) on {nodes:,} nodes ({instance_type}): all Running after "
            f"{ms(run.all_running, run.scaled)}; scheduler RSS steady {steady:.0f} MB, "
            f"peak {peak:.0f} MB (VmHWM) (target <= 300 MB)",
            flush=True,
        )
        print(f"CPU seconds so far: {stack_cpu_seconds(stack)}", flush=True)
        # A restarted (or newly elected) scheduler lists the whole cluster at once: the LIST
        # answers are its transient peak. It prints `ready` once every resource is mirrored.
        await stack.scheduler.stop()
        stack.scheduler.log_path.rename(work_dir / "scheduler-ramp.log")  # keep the ramp's log
        restarted = time.monotonic()
        await start_scheduler(stack)
        pid = stack.scheduler.process.pid
        synced_rss = rss_megabytes(pid)
        await asyncio.sleep(5.0)
        print(
            f"restarted scheduler: cluster relisted and mirrored in "
            f"{ms(time.monotonic() - 5.0, restarted)}; RSS when synced {synced_rss:.0f} MB, "
            f"5 s later {rss_megabytes(pid):.0f} MB, peak {rss_megabytes(pid, 'VmHWM'):.0f} MB "
            f"(VmHWM)",
            flush=True,
        )
    finally:
        await kube.close()
        await stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, nargs="*", default=[1, 100, 1000])
    parser.add_argument("--rss", action="store_true", help="the RSS mode instead")
    parser.add_argument("--rss-pods", type=int, default=10_000)
    parser.add_argument("--rss-instance-type", default="m5.xlarge")
    parser.add_argument("--rss-cpu", default="380m", help="pod CPU request (10 per m5.xlarge)")
    parser.add_argument("--logs", type=Path, default=None, help="keep the processes' logs here")
    parser.add_argument(
        "--batch-idle-seconds",
        type=float,
        default=1.0,
        help="the scheduler's batch idle window (its default: 1 s)",
    )
    args = parser.parse_args()
    logs = args.logs or Path(tempfile.mkdtemp(prefix="daiku-bench-"))
    print(f"logs in {logs}")
    if args.rss:
        asyncio.run(rss(logs, args.rss_pods, args.rss_instance_type, args.rss_cpu))
        return
    for pods in args.pods:
        asyncio.run(reaction(pods, logs, args.batch_idle_seconds))


if __name__ == "__main__":
    main()
