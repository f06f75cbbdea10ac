"""Scheduling benchmark: FACTS §5 (Karpenter's scheduling_benchmark_test.go) side by side.

Prints, per pod count: solve seconds, pods/s, nodes, total hourly price, unschedulable pods,
peak solver memory (tracemalloc, in a second run so it does not slow the timed one), and for
the plain-pods mix the gap to the LP relaxation's lower bound on cost (HiGHS via highspy).

    uv run python -m bench.scheduling                   # 2k 5k 10k 20k, FACTS §5 mix + plain
    uv run python -m bench.scheduling --pods 20000      # one size
    uv run python -m bench.scheduling --realistic       # bundled catalog, 50 Deployments, 10k pods
    uv run python -m bench.scheduling --pods 20000 --existing-nodes 5000   # a cluster with room
    uv run python -m bench.scheduling --small          # 1/10/100/1000 pods, bundled catalog
    uv run python -m bench.scheduling --live           # the live provisioner's round (mirror)

``--live`` runs ``bench.plan_cli``'s manifests as pods through the scheduler's ``ClusterMirror``
(watch events) and one ``Provisioner.provision_once()`` round (see ``bench/live_round.py``).

``--small`` is the reaction-time view (issue 5): p50/p99 solve latency over repeats with the
bundled EC2 catalog (~1,270 types), cold (a fresh catalog index per solve, as ``solve()`` alone)
and warm (one ``CatalogCache`` reused, as the provisioner does).

Workload (FACTS §5): 400 instance types, type i has i vCPU, 2i GiB, 10i pods, price
0.1 x vCPU + 0.1 x GiB (allocatable = capacity, as Karpenter's fake provider), three zones; one
NodePool without limits. Pods: one fifth each plain, zone spread (maxSkew 1), hostname spread,
self-affinity on zone, anti-affinity to app=nginx on hostname; labels my-label in a..g; cpu from
{100, 250, 500, 1000, 1500}m; memory from {100, 256, 512, 1024, 2048, 4096}Mi. Reference (Go,
Apple M3 Pro): 2k 1.54 s, 5k 3.74 s, 10k 8.11 s, 20k 20.19 s.
"""

from __future__ import annotations

import argparse
import math
import random
import time
import tracemalloc
from collections.abc import Callable, Sequence

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    TopologySpreadConstraint,
    solve,
)
from scheduler_svc.core.catalog_index import CatalogCache

GIB = 1024**3
MIB = 1024**2
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REFERENCE_SECONDS = {2000: 1.54, 5000: 3.74, 10000: 8.11, 20000: 20.19}


def benchmark_catalog() -> tuple[InstanceType, ...]:
    """400 types: i vCPU, 2i GiB, 10i pods, 0.1/vCPU + 0.1/GiB, on-demand in three zones."""
    out = []
    for i in range(1, 401):
        size = Resources(i * 1000, 2 * i * GIB, 10 * i, 20 * GIB)
        price = round(0.1 * i + 0.1 * 2 * i, 6)
        offerings = tuple(Offering(z, "on-demand", price) for z in ZONES)
        out.append(InstanceType(f"fake-it-{i}", size, size, {}, offerings))
    return tuple(out)


def benchmark_pods(count: int, seed: int, plain_only: bool = False) -> tuple[Pod, ...]:
    """FACTS §5's diverse pods (or only the plain fifth's kind, ``count`` of them)."""
    rng = random.Random(seed)

    def requests() -> tuple[Resources, ...]:
        cpu = rng.choice((100, 250, 500, 1000, 1500))
        memory = rng.choice((100, 256, 512, 1024, 2048, 4096)) * MIB
        return (Resources(cpu_millis=cpu, memory_bytes=memory),)

    def label() -> dict[str, str]:
        return {"my-label": rng.choice("abcdefg")}

    if plain_only:
        return tuple(Pod(f"plain-{i}", labels=label(), containers=requests()) for i in range(count))
    fifth = count // 5
    pods = [Pod(f"plain-{i}", labels=label(), containers=requests()) for i in range(fifth)]
    for key, prefix in ((ZONE, "zone-spread"), (HOST, "host-spread")):
        for i in range(fifth):
            spread = TopologySpreadConstraint(key, 1, label_selector=LabelSelector.of(label()))
            pods.append(
                Pod(
                    f"{prefix}-{i}",
                    labels=label(),
                    containers=requests(),
                    topology_spread=(spread,),
                )
            )
    for i in range(fifth):
        labels = {"my-affininity": rng.choice("abcdefg")}
        term = PodAffinityTerm(ZONE, LabelSelector.of(labels))
        pods.append(
            Pod(f"affinity-{i}", labels=labels, containers=requests(), pod_affinity=(term,))
        )
    nginx = {"app": "nginx"}
    for i in range(count - 4 * fifth):
        term = PodAffinityTerm(HOST, LabelSelector.of(nginx))
        pods.append(
            Pod(f"anti-{i}", labels=nginx, containers=requests(), pod_anti_affinity=(term,))
        )
    return tuple(pods)


def existing_nodes(count: int, seed: int) -> tuple[Node, ...]:
    """``count`` 8-cpu/16-GiB nodes across the zones, each running six pods (about half full)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        running = tuple(
            Pod(
                f"running-{i}-{j}",
                namespace="prod",
                labels={"app": f"svc-{j}"},
                containers=(
                    Resources(
                        cpu_millis=rng.choice((250, 500, 1000)),
                        memory_bytes=rng.choice((256, 512, 1024)) * MIB,
                    ),
                ),
            )
            for j in range(6)
        )
        labels = {ZONE: ZONES[i % len(ZONES)], HOST: f"node-{i}"}
        nodes.append(
            Node(f"node-{i}", labels, allocatable=Resources(8000, 16 * GIB, 110), pods=running)
        )
    return tuple(nodes)


def lp_lower_bound(problem: SchedulingInput) -> float:
    """The LP relaxation's optimum: fractional nodes of each type covering total cpu, memory
    and pods (a valid lower bound on any plan's hourly cost)."""
    import highspy
    import numpy as np

    demand = [0, 0, 0]
    for pod in problem.pods:
        r = pod.requests()
        demand[0] += r.cpu_millis
        demand[1] += r.memory_bytes
        demand[2] += r.pods
    types = problem.instance_types
    solver = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy ships no hints here
    solver.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    n = len(types)
    costs = np.array([min(o.price_per_hour for o in t.offerings) for t in types], dtype=float)
    empty_int = np.array([], dtype=np.int32)
    solver.addCols(n, costs, np.zeros(n), np.full(n, inf), 0, empty_int, empty_int, np.array([]))
    for d, field in enumerate(("cpu_millis", "memory_bytes", "pods")):
        scale = GIB if field == "memory_bytes" else 1
        values = np.array([getattr(t.allocatable, field) / scale for t in types], dtype=float)
        solver.addRows(
            1,
            np.array([demand[d] / scale]),
            np.array([inf]),
            n,
            np.array([0], dtype=np.int32),
            np.arange(n, dtype=np.int32),
            values,
        )
    solver.run()
    return float(solver.getInfo().objective_function_value)


def measure(problem: SchedulingInput) -> tuple[SchedulingResult, float, float, float]:
    """(result, wall seconds, cpu seconds, peak traced MiB in a second, traced run).

    CPU seconds are shown beside wall seconds because the machine may be shared: the gap
    between them is time spent waiting for a core."""
    started, started_cpu = time.perf_counter(), time.process_time()
    result = solve(problem)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - started_cpu
    tracemalloc.start()
    solve(problem)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, seconds, cpu_seconds, peak / MIB


def report(label: str, problem: SchedulingInput, with_bound: bool, reference: float | None) -> None:
    result, seconds, cpu_seconds, peak_mib = measure(problem)
    pods = len(problem.pods)
    line = (
        f"{label:<22} pods={pods:>6}  solve={seconds:5.2f}s (cpu {cpu_seconds:5.2f}s)  "
        f"pods/s={pods / seconds:>7.0f}  "
        f"nodes={len(result.new_claims):>5}  cost=${result.total_price_per_hour:>9.2f}/h  "
        f"unschedulable={len(result.unschedulable):>4}  peak={peak_mib:6.1f}MiB"
    )
    if reference is not None:
        line += f"  (reference {reference:.2f}s)"
    if with_bound:
        bound = lp_lower_bound(problem)
        line += (
            f"  LP bound=${bound:.2f}/h gap={100 * (result.total_price_per_hour / bound - 1):.2f}%"
        )
    print(line, flush=True)


def realistic(pods_total: int, seed: int) -> SchedulingInput:
    """The bundled catalog and ``pods_total`` pods from 50 Deployments with mixed shapes and
    constraints (zone spread, hostname anti-affinity, arm64, spot-only, GPU-free)."""
    from daiku_cli.catalog import bundled_catalog_document
    from daiku_cli.plan import instance_types_from_document

    rng = random.Random(seed)
    catalog = instance_types_from_document(bundled_catalog_document(), "bundled")
    pods: list[Pod] = []
    per = pods_total // 50
    for d in range(50):
        cpu = rng.choice((100, 250, 500, 1000, 2000, 4000))
        memory = rng.choice((128, 256, 512, 1024, 2048, 4096, 8192)) * MIB
        labels = {"app": f"app-{d}"}
        kwargs: dict[str, object] = {}
        flavour = d % 5
        if flavour == 1:
            kwargs["topology_spread"] = (
                TopologySpreadConstraint(ZONE, 1, label_selector=LabelSelector.of(labels)),
            )
        elif flavour == 2 and per <= 300:
            kwargs["pod_anti_affinity"] = (PodAffinityTerm(HOST, LabelSelector.of(labels)),)
        elif flavour == 3:
            kwargs["node_selector"] = {"kubernetes.io/arch": "arm64"}
        elif flavour == 4:
            kwargs["node_selector"] = {"karpenter.sh/capacity-type": "spot"}
        pods.extend(
            Pod(
                f"app-{d}-{i}",
                labels=labels,
                containers=(Resources(cpu_millis=cpu, memory_bytes=memory),),
                **kwargs,  # type: ignore[arg-type]
            )
            for i in range(per)
        )
    pool = NodePool(
        "default",
        requirements=(
            Requirement("karpenter.k8s.aws/instance-generation", Operator.GT, ("4",)),
            Requirement("karpenter.k8s.aws/instance-category", Operator.IN, ("c", "m", "r")),
        ),
    )
    return SchedulingInput(tuple(pods), (pool,), tuple(catalog))


def small_solves(counts: Sequence[int], repeats: int, seed: int) -> None:
    """p50/p99 solve latency for small batches on the bundled catalog, cold and warm index."""
    from daiku_cli.catalog import bundled_catalog_document
    from daiku_cli.plan import instance_types_from_document

    catalog = tuple(instance_types_from_document(bundled_catalog_document(), "bundled"))
    pool = NodePool(
        "default",
        requirements=(
            Requirement("karpenter.k8s.aws/instance-category", Operator.IN, ("c", "m", "r")),
        ),
    )
    print(f"bundled catalog: {len(catalog)} instance types; {repeats} repeats per row")
    print(f"{'pods':>6} {'index':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'claims':>6}")
    for count in counts:
        problem = SchedulingInput(benchmark_pods(count, seed), (pool,), catalog)
        for label, cache in (("cold", None), ("warm", CatalogCache())):
            if cache is not None:
                solve(problem, catalogs=cache)  # the provisioner builds it when it warms up
            seconds = []
            result = None
            for _ in range(repeats):
                started = time.perf_counter()
                result = solve(problem, catalogs=cache)
                seconds.append(time.perf_counter() - started)
            seconds.sort()
            p50 = seconds[len(seconds) // 2] * 1000
            p99 = seconds[min(len(seconds) - 1, math.ceil(len(seconds) * 0.99) - 1)] * 1000
            claims = len(result.new_claims) if result is not None else 0
            line = f"{count:>6} {label:>5} {p50:>8.1f} {p99:>8.1f} {seconds[-1] * 1000:>8.1f}"
            print(f"{line} {claims:>6}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--pods", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--realistic", action="store_true", help="only the realistic mix")
    parser.add_argument(
        "--small", action="store_true", help="1/10/100/1000-pod latency, bundled catalog"
    )
    parser.add_argument("--repeats", type=int, default=50, help="solves per --small row")
    parser.add_argument(
        "--live", action="store_true", help="the live provisioner's round through the mirror"
    )
    parser.add_argument(
        "--existing-nodes",
        type=int,
        default=0,
        help="also run the FACTS §5 mix on a cluster of this many 8-cpu nodes, half full",
    )
    args = parser.parse_args(argv)
    if args.live:
        from bench.live_round import run  # imports the scheduler service's modules

        run(args.pods, args.seed)
        return
    if args.small:
        small_solves([1, 10, 100, 1000], args.repeats, args.seed)
        return
    if args.realistic:
        report("realistic (bundled)", realistic(10_000, args.seed), False, None)
        return
    catalog = benchmark_catalog()
    pool = (NodePool("default"),)
    runs: list[tuple[str, Callable[[int], tuple[Pod, ...]], bool]] = [
        ("FACTS §5 diverse mix", lambda n: benchmark_pods(n, args.seed), False),
        ("plain pods", lambda n: benchmark_pods(n, args.seed, plain_only=True), True),
    ]
    if args.existing_nodes:
        nodes = existing_nodes(args.existing_nodes, args.seed)
        for count in args.pods:
            problem = SchedulingInput(benchmark_pods(count, args.seed), pool, catalog, nodes)
            report(f"+{args.existing_nodes} nodes", problem, False, None)
    for label, make, with_bound in runs:
        for count in args.pods:
            problem = SchedulingInput(make(count), pool, catalog)
            reference = REFERENCE_SECONDS.get(count) if not with_bound else None
            report(label, problem, with_bound, reference)


if __name__ == "__main__":
    main()
