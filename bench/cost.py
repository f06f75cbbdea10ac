"""Cost benchmark: what `daiku plan` buys on the bundled catalog with its real prices, against a
proven lower bound and against Karpenter's first-fit-decreasing.

    uv run python -m bench.cost                      # 40 seeded workloads, summary
    uv run python -m bench.cost --workloads 100 --seed 7 --verbose   # one line per workload

Each workload (seeded, so the same seed prints the same figures) is 1-4 pod shapes with 1-60
replicas each, written as Deployments, and one NodePool restricted the ways users restrict them:
by instance family, category, generation, arch, capacity type or an explicit type list (one to
three of these at once). Shapes are drawn again until each fits some type the pool allows, so
every pod is schedulable. The manifests go through `daiku plan --catalog … -f … -o json` (the
bundled us-east-1 catalog written as `daiku catalog -o json` prints it: ~1,270 types, spot and
on-demand offerings in six zones, allocatable below capacity per the EKS AMI rules), and the
bound and FFD read the very objects `daiku plan` converted (``build_input``).

Three costs per workload, in $/h:

* **bound** — an integer program solved with HiGHS. Variables: ``x_t`` nodes of instance type
  ``t`` and ``y_ts`` pods of shape ``s`` on nodes of type ``t`` (non-negative integers).
  Minimise ``sum_t price_t x_t`` subject to ``sum_t y_ts = n_s`` (every pod placed),
  ``sum_s request_sd y_ts <= allocatable_td x_t`` for cpu, memory and pods,
  ``y_ts <= fit_ts x_t`` where ``fit_ts`` is how many pods of shape ``s`` alone one node of type
  ``t`` holds, and, for each resource ``d`` and each request size ``v`` of it, the sum of
  ``y_ts`` over the shapes asking at least ``v`` of ``d`` is ``<= (allocatable_td // v) x_t``.
  Why it is <= the optimum: take any plan; let ``x_t`` be its node count of type ``t`` and
  ``y_ts`` its pods of shape ``s`` on them. Each node holds its pods within its allocatable, so
  summing over the nodes of a type gives the resource rows; a node holds at most ``fit_ts`` pods
  of one shape; a node cannot hold more than ``allocatable_td // v`` pods that each ask at least
  ``v`` of resource ``d`` (together they would need more than all of it), whatever their shapes;
  the plan places every pod. So every plan is a feasible
  point, and ``price_t`` (the cheapest offering of ``t`` the pool allows) is <= what the plan
  pays for each node, so the program's optimum is <= every plan's cost. Types dominated by
  another (no more allocatable in any resource, no cheaper) are left out: an optimal plan exists
  that uses none (swap each such node for its dominator: its pods still fit, the cost does not
  rise), and it is feasible in the smaller program. That program counts room per type, so it
  can be well below what whole nodes allow; a second program counts whole nodes: a column per
  kept type and maximal pattern (pods per shape, at most ``n_s`` of each, that fit one node of
  the type and to which no shape below its ``n_s`` can be added), ``z_p`` non-negative
  integers, minimise ``sum_p price_p z_p`` subject to ``sum_p pods_ps z_p >= n_s``. Why it is
  <= the optimum: take an optimal plan on kept types; every node's pods per shape fit its type
  and are at most ``n_s`` each, so adding pods of shapes that still fit, one at a time, ends
  at a maximal pattern of that type; counting each node as that pattern covers every pod at the
  same cost. It is used when the patterns number at most 200,000, and the printed bound is the
  larger of the two. When HiGHS stops at its time limit each bound is its proven dual bound,
  still <= the optimum.
* **ffd** — first-fit-decreasing as Karpenter's scheduler does it: pods largest first (cpu, then
  memory) each join the first open claim whose remaining instance types still hold all its
  pods, else open a claim with every type that holds the pod; each claim then buys its cheapest
  remaining type.
* **daiku** — ``totalHourlyCost`` of `daiku plan`'s JSON.

Prints the mean and worst ratio daiku/bound, ffd/bound, and how many workloads daiku costs more
than FFD (targets from issue 11: mean <= 1.02, worst <= 1.08, never above FFD).

``--zone-spread`` spreads each workload's first Deployment over zones (maxSkew 1,
DoNotSchedule), as web tiers are: the case where the greedy pass buys a claim per zone. The
bound stays a bound (a plan that keeps the spread is a plan), but ignores the spread, so it is
loose where the pool's zones outnumber the nodes the pods need; FFD is not printed (it ignores
the spread too, so it is no plan).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from typer.testing import CliRunner

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.main import app
from daiku_cli.plan import build_input
from scheduler_svc.core import InstanceType, Operator, Requirement, Requirements, SchedulingInput
from scheduler_svc.core.integer_packing import fits_count
from scheduler_svc.core.pattern_packing import PatternBudget, maximal_patterns
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE

MIB = 1024**2
CPU_MILLIS = (250, 500, 1000, 1500, 2000, 4000)
MEMORY_MIB = (256, 512, 1024, 2048, 4096, 8192, 16384)
FAMILIES = ("c5", "c6g", "c6i", "c7g", "m5", "m6g", "m6i", "m7g", "r5", "r6g", "r6i", "r7g", "t3")
CATEGORIES = ("c", "m", "r", "t")
RESOURCES = ("cpu_millis", "memory_bytes", "pods")
_PATTERN_LIMIT = 200_000  # the node program's columns at most; beyond, the counting bound alone


@dataclass(frozen=True)
class Shape:
    """One Deployment's pods: cpu and memory requests, replica count."""

    cpu_millis: int
    memory_mib: int
    replicas: int


@dataclass(frozen=True)
class Workload:
    """A NodePool's requirements (as written in the manifest) and the Deployments."""

    requirements: tuple[dict[str, Any], ...]
    shapes: tuple[Shape, ...]
    # The first Deployment spreads over zones (maxSkew 1, DoNotSchedule), as web tiers do.
    zone_spread: bool = False

    def describe(self) -> str:
        """One line: the pool's restrictions and the shapes."""
        pool = "; ".join(
            f"{r['key'].split('/')[-1]} {r['operator']} {','.join(r.get('values', []))}"
            for r in self.requirements
        )
        shapes = " ".join(f"{s.replicas}x{s.cpu_millis}m/{s.memory_mib}Mi" for s in self.shapes)
        spread = " (first spread over zones)" if self.zone_spread else ""
        return f"[{pool}] {shapes}{spread}"


# ---------------------------------------------------------------------------------------------
# Workloads


def _restriction(rng: random.Random, kind: str, names: list[str]) -> dict[str, Any]:
    if kind == "family":
        values = sorted(rng.sample(FAMILIES, rng.randint(1, 3)))
        return {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": values}
    if kind == "category":
        values = sorted(rng.sample(CATEGORIES, rng.randint(1, 2)))
        return {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": values}
    if kind == "generation":
        gen = str(rng.choice((4, 5, 6)))
        return {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": [gen]}
    if kind == "arch":
        arch = rng.choice(("arm64", "amd64"))
        return {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}
    if kind == "capacity-type":
        capacity_type = rng.choice(("spot", "on-demand"))
        return {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]}
    values = sorted(rng.sample(names, rng.randint(2, 6)))
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": values}


def random_workload(
    rng: random.Random, types: list[InstanceType], *, zone_spread: bool = False
) -> Workload:
    """A pool restricted 1-3 ways and 1-4 shapes that each fit a type it allows (with
    ``zone_spread``, the first shape spread over zones)."""
    names = [t.name for t in types]
    while True:
        kinds = rng.sample(
            ("family", "category", "generation", "arch", "capacity-type", "types"),
            rng.randint(1, 3),
        )
        requirements = tuple(_restriction(rng, kind, names) for kind in sorted(kinds))
        allowed = pool_types(_core_requirements(requirements), types)
        if allowed:
            break
    wanted = rng.randint(1, 4)
    shapes: list[Shape] = []
    while len(shapes) < wanted:
        shape = Shape(rng.choice(CPU_MILLIS), rng.choice(MEMORY_MIB), rng.randint(1, 60))
        if any(_fits_one(t, shape) for t, _ in allowed):
            shapes.append(shape)
    return Workload(requirements, tuple(shapes), zone_spread)


def _fits_one(instance_type: InstanceType, shape: Shape) -> bool:
    a = instance_type.allocatable
    return a.cpu_millis >= shape.cpu_millis and a.memory_bytes >= shape.memory_mib * MIB


def manifests(workload: Workload) -> list[dict[str, Any]]:
    """The NodePool and one Deployment per shape."""
    nodepool = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": list(workload.requirements)}}},
    }
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": LABEL_ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "shape-0"}},
            }
        ]
    }
    deployments = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"shape-{i}"},
            "spec": {
                "replicas": shape.replicas,
                "selector": {"matchLabels": {"app": f"shape-{i}"}},
                "template": {
                    "metadata": {"labels": {"app": f"shape-{i}"}},
                    "spec": {
                        **(spread if workload.zone_spread and i == 0 else {}),
                        "containers": [
                            {
                                "name": "app",
                                "image": "registry.k8s.io/pause:3.9",
                                "resources": {
                                    "requests": {
                                        "cpu": f"{shape.cpu_millis}m",
                                        "memory": f"{shape.memory_mib}Mi",
                                    }
                                },
                            }
                        ],
                    },
                },
            },
        }
        for i, shape in enumerate(workload.shapes)
    ]
    return [nodepool, *deployments]


# ---------------------------------------------------------------------------------------------
# What the pool may launch


def _core_requirements(requirements: tuple[dict[str, Any], ...]) -> Requirements:
    return Requirements.of(
        Requirement(r["key"], Operator(r["operator"]), tuple(r.get("values", ())))
        for r in requirements
    )


def pool_types(
    requirements: Requirements, types: list[InstanceType] | tuple[InstanceType, ...]
) -> list[tuple[InstanceType, float]]:
    """Each type the pool allows, with the cheapest available offering the pool allows."""
    out = []
    for t in types:
        prices = [
            o.price_per_hour
            for o in t.offerings
            if o.available
            and requirements.matches(
                {**t.labels, LABEL_ZONE: o.zone, LABEL_CAPACITY_TYPE: o.capacity_type}
            )
        ]
        if prices:
            out.append((t, min(prices)))
    return out


def _pool_matrix(problem: SchedulingInput) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(allocatable per type x (cpu, memory, pods), cheapest price per type, names)."""
    (nodepool,) = problem.nodepools
    allowed = pool_types(Requirements.of(nodepool.requirements), problem.instance_types)
    allocatable = np.array(
        [[getattr(t.allocatable, r) for r in RESOURCES] for t, _ in allowed], dtype=np.int64
    )
    prices = np.array([price for _, price in allowed], dtype=float)
    return allocatable, prices, [t.name for t, _ in allowed]


def _pod_requests(problem: SchedulingInput) -> list[tuple[int, int, int]]:
    out = []
    for pod in problem.pods:
        r = pod.requests()
        out.append((r.cpu_millis, r.memory_bytes, r.pods))
    return out


# ---------------------------------------------------------------------------------------------
# The lower bound


def _undominated(allocatable: np.ndarray, prices: np.ndarray) -> list[int]:
    """Types no other type dominates (as much of every resource, no dearer; ties by index)."""
    keep = []
    for t in range(len(prices)):
        covers = (allocatable >= allocatable[t]).all(axis=1) & (prices <= prices[t])
        strictly = (allocatable > allocatable[t]).any(axis=1) | (prices < prices[t])
        earlier = np.arange(len(prices)) < t
        dominators = covers & (strictly | earlier)
        dominators[t] = False
        if not dominators.any():
            keep.append(t)
    return keep


def lower_bound(problem: SchedulingInput, time_limit_seconds: float = 20.0) -> float:
    """The integer program of the module docstring, solved by HiGHS (its dual bound)."""
    import highspy

    allocatable, prices, _ = _pool_matrix(problem)
    shapes: dict[tuple[int, int, int], int] = {}
    for request in _pod_requests(problem):
        shapes[request] = shapes.get(request, 0) + 1
    types = _undominated(allocatable, prices)
    solver = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy ships no hints here
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", time_limit_seconds)
    solver.setOptionValue("mip_rel_gap", 1e-6)
    inf = highspy.kHighsInf
    # Columns: x_t for each kept type, then y_ts for each (type, shape) where one pod fits.
    x = {t: i for i, t in enumerate(types)}
    y: dict[tuple[int, tuple[int, int, int]], int] = {}
    fit: dict[tuple[int, tuple[int, int, int]], int] = {}
    for t in types:
        for shape in shapes:
            most = min(
                int(allocatable[t][d]) // amount for d, amount in enumerate(shape) if amount > 0
            )
            if most > 0:
                y[(t, shape)] = len(x) + len(y)
                fit[(t, shape)] = most
    count = len(x) + len(y)
    costs = np.zeros(count)
    for t, column in x.items():
        costs[column] = prices[t]
    solver.addVars(count, np.zeros(count), np.full(count, inf))
    solver.changeColsCost(count, np.arange(count, dtype=np.int32), costs)
    solver.changeColsIntegrality(
        count,
        np.arange(count, dtype=np.int32),
        np.full(count, highspy.HighsVarType.kInteger),
    )

    def row(low: float, high: float, entries: dict[int, float]) -> None:
        columns = np.array(list(entries), dtype=np.int32)
        solver.addRow(low, high, len(columns), columns, np.array(list(entries.values())))

    for shape, n in shapes.items():
        row(n, n, {column: 1.0 for (t, s), column in y.items() if s == shape})
    for t in types:
        on_type = [(s, column) for (u, s), column in y.items() if u == t]
        for d in range(len(RESOURCES)):
            # Memory in MiB keeps the coefficients within a range HiGHS handles well.
            scale = MIB if d == 1 else 1
            entries = {column: s[d] / scale for s, column in on_type if s[d]}
            entries[x[t]] = -int(allocatable[t][d]) / scale
            row(-inf, 0.0, entries)
        for s, column in on_type:
            row(-inf, 0.0, {column: 1.0, x[t]: -float(fit[(t, s)])})
        for d in range(len(RESOURCES)):
            # A node holds at most A // v pods that each ask at least v of resource d.
            for v in sorted({s[d] for s, _ in on_type if s[d]}):
                large = {column: 1.0 for s, column in on_type if s[d] >= v}
                if len(large) > 1:
                    row(-inf, 0.0, {**large, x[t]: -float(int(allocatable[t][d]) // v)})
    solver.run()
    info = solver.getInfo()
    # mip_dual_bound is the proven bound whether or not HiGHS closed the gap.
    counted = float(info.mip_dual_bound)
    by_nodes = _node_bound(allocatable[types], prices[types], shapes, time_limit_seconds)
    return counted if by_nodes is None else max(counted, by_nodes)


def _node_bound(
    allocatable: np.ndarray,
    prices: np.ndarray,
    shapes: dict[tuple[int, int, int], int],
    time_limit_seconds: float,
) -> float | None:
    """The node program's dual bound (module docstring), None when its patterns are too many."""
    import highspy

    requests, counts = list(shapes), list(shapes.values())
    budget = PatternBudget(patterns=_PATTERN_LIMIT, visits=20 * _PATTERN_LIMIT)
    columns: list[tuple[float, tuple[int, ...]]] = []
    for room, price in zip(allocatable.tolist(), prices.tolist(), strict=True):
        bounds = [min(n, fits_count(r, room)) for r, n in zip(requests, counts, strict=True)]
        found = maximal_patterns(requests, bounds, room, budget)
        if found is None:
            return None
        columns += [(price, pattern) for pattern in found]
    solver = highspy.Highs()  # type: ignore[no-untyped-call]
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", time_limit_seconds)
    solver.setOptionValue("mip_rel_gap", 1e-6)
    count = len(columns)
    solver.addVars(count, np.zeros(count), np.full(count, highspy.kHighsInf))
    solver.changeColsCost(
        count, np.arange(count, dtype=np.int32), np.array([p for p, _ in columns])
    )
    solver.changeColsIntegrality(
        count, np.arange(count, dtype=np.int32), np.full(count, highspy.HighsVarType.kInteger)
    )
    for s, n in enumerate(counts):
        holding = [i for i, (_, pattern) in enumerate(columns) if pattern[s]]
        values = [float(columns[i][1][s]) for i in holding]
        solver.addRow(
            float(n),
            highspy.kHighsInf,
            len(holding),
            np.array(holding, dtype=np.int32),
            np.array(values),
        )
    solver.run()
    return float(solver.getInfo().mip_dual_bound)


# ---------------------------------------------------------------------------------------------
# First-fit-decreasing, as Karpenter's scheduler


def first_fit_decreasing(problem: SchedulingInput) -> float:
    """Karpenter's way: pods by cpu then memory, largest first, each into the first open claim
    whose remaining types still hold all its pods; each claim buys its cheapest remaining type."""
    allocatable, prices, _ = _pool_matrix(problem)
    requests = sorted(_pod_requests(problem), key=lambda r: (-r[0], -r[1]))
    claims: list[tuple[np.ndarray, np.ndarray]] = []  # (types still possible, requests so far)
    for request in requests:
        vector = np.array(request, dtype=np.int64)
        for index, (possible, used) in enumerate(claims):
            after = used + vector
            still = possible & (allocatable >= after).all(axis=1)
            if still.any():
                claims[index] = (still, after)
                break
        else:
            holds = np.asarray((allocatable >= vector).all(axis=1))
            if not holds.any():
                raise ValueError(f"no type holds a pod of {request}")
            claims.append((holds, vector))
    return float(sum(prices[possible].min() for possible, _ in claims))


# ---------------------------------------------------------------------------------------------
# daiku, through `daiku plan`


def daiku_plan(manifest_file: Path, catalog_file: Path) -> dict[str, Any]:
    """`daiku plan --catalog … -f … -o json`, in process, parsed."""
    result = CliRunner().invoke(
        app,
        [
            *("plan", "--catalog", str(catalog_file), "-f", str(manifest_file), "-o", "json"),
            "--allow-unschedulable",
        ],
    )
    if result.exit_code != 0:
        raise RuntimeError(f"daiku plan failed ({result.exit_code}): {result.output}")
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@dataclass(frozen=True)
class Outcome:
    """One workload's three costs."""

    workload: Workload
    bound: float
    ffd: float
    daiku: float
    daiku_nodes: int
    plan_cpu: float


def run(count: int, seed: int, verbose: bool, *, zone_spread: bool = False) -> list[Outcome]:
    """Plan ``count`` seeded workloads and print one line each when ``verbose``."""
    outcomes = []
    refused: list[int] = []
    with tempfile.TemporaryDirectory() as scratch:
        catalog_file = Path(scratch) / "catalog.json"
        catalog_file.write_text(json.dumps(bundled_catalog_document()), encoding="utf-8")
        manifest_file = Path(scratch) / "workload.yaml"
        types: list[InstanceType] | None = None
        for index in range(count):
            rng = random.Random(seed * 100_003 + index)
            if types is None:
                manifest_file.write_text("", encoding="utf-8")
                types = list(build_input([str(manifest_file)], str(catalog_file)).instance_types)
            workload = random_workload(rng, types, zone_spread=zone_spread)
            manifest_file.write_text(yaml.safe_dump_all(manifests(workload)), encoding="utf-8")
            started = time.process_time()
            document = daiku_plan(manifest_file, catalog_file)
            plan_cpu = time.process_time() - started
            if document["unschedulable"] and zone_spread:
                # Every pod fits some type the pool allows, so a spread pod left waiting is a
                # solver limit worth seeing, not a workload to skip quietly.
                print(
                    f"{index:>3} {len(document['unschedulable'])} pods unschedulable: "
                    f"{document['unschedulable'][0]['reason']}  {workload.describe()}"
                )
                refused.append(index)
                continue
            if document["unschedulable"]:
                raise RuntimeError(f"workload {index}: unschedulable pods: {document}")
            problem = build_input([str(manifest_file)], str(catalog_file))
            outcome = Outcome(
                workload,
                lower_bound(problem),
                first_fit_decreasing(problem),
                float(document["totalHourlyCost"]),
                len(document["nodeClaims"]),
                plan_cpu,
            )
            outcomes.append(outcome)
            if verbose:
                print(
                    f"{index:>3} bound=${outcome.bound:7.4f} ffd=${outcome.ffd:7.4f} "
                    f"daiku=${outcome.daiku:7.4f} ({outcome.daiku / outcome.bound:5.3f}, "
                    f"{outcome.daiku_nodes} nodes, {outcome.plan_cpu:.2f}s cpu)  "
                    f"{workload.describe()}"
                )
    if refused:
        print(
            f"{len(refused)} of {count} workloads left spread pods unschedulable "
            f"(workloads {', '.join(map(str, refused))}; not in the ratios below)"
        )
    return outcomes


def summary(outcomes: list[Outcome], *, zone_spread: bool = False) -> str:
    """Mean and worst ratios to the bound, and how often daiku costs more than FFD (not with
    ``zone_spread``: this FFD ignores the spread, so it is no plan to compare with)."""
    daiku = [o.daiku / o.bound for o in outcomes]
    cpu = [o.plan_cpu for o in outcomes]
    if zone_spread:
        return (
            f"workloads={len(outcomes)} (first shape spread over zones)  daiku/bound "
            f"mean={statistics.mean(daiku):.4f} worst={max(daiku):.4f}  (the bound ignores "
            f"the spread, so it is loose where zones outnumber the nodes a plan needs)  daiku "
            f"plan cpu: max={max(cpu):.2f}s total={sum(cpu):.1f}s"
        )
    ffd = [o.ffd / o.bound for o in outcomes]
    above = sum(1 for o in outcomes if o.daiku > o.ffd + 1e-9)
    return (
        f"workloads={len(outcomes)}  daiku/bound mean={statistics.mean(daiku):.4f} "
        f"worst={max(daiku):.4f}  ffd/bound mean={statistics.mean(ffd):.4f} "
        f"worst={max(ffd):.4f}  daiku>ffd in {above}  "
        f"(targets: mean<=1.02 worst<=1.08 daiku>ffd in 0)  daiku plan cpu: "
        f"max={max(cpu):.2f}s total={sum(cpu):.1f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="one line per workload")
    parser.add_argument(
        "--zone-spread",
        action="store_true",
        help="spread each workload's first Deployment over zones (maxSkew 1)",
    )
    args = parser.parse_args()
    outcomes = run(args.workloads, args.seed, args.verbose, zone_spread=args.zone_spread)
    print(summary(outcomes, zone_spread=args.zone_spread))


if __name__ == "__main__":
    main()
