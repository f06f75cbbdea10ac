"""Rebalance benchmark: a storm of EC2 rebalance recommendations and spot interruption warnings
over a spot cluster, replayed through the disruption core's `plan_rebalance` with the NodePool
policy Ignore (Karpenter: an Event only) next to Replace (daiku, decision 0015).

    .venv/bin/python -m bench.rebalance                     # 40 nodes, seed 1
    .venv/bin/python -m bench.rebalance --nodes 100 --seed 2

Cluster: `--nodes` spot nodes of the cheapest type holding three 1-cpu / 2Gi pods, spread over
its zones, each full with three (no room elsewhere: every move needs a new node, priced as the
solver picks it; pods evicted by a warning get the cheapest other fitting spot type).

Storm, seeded: within the first `--storm-minutes`, half the nodes get a rebalance
recommendation; 60 % of those then get the two-minute interruption warning 1 to
`--lead-minutes` (15) min later (EC2 gives no lead-time guarantee: the spread is an
assumption), and a tenth of the other nodes get a warning with no recommendation before it.
A launched node runs pods `--boot-seconds` (90) later. Passes every 10 s, as the controller.

Per policy:
* pods moved early: moved onto an Initialized replacement before any warning for their node;
* pods lost to the notice: still on their node when its warning came, so evicted and Pending
  until new capacity booted (the interruption handler acts at once, whatever the policy);
* pending pod-min: minutes those pods waited;
* launches: replacements (Replace) and capacity for evicted pods; "for nothing" counts
  replacements of nodes that were never interrupted (the price of acting on a recommendation);
* node-hours and cost over the run (the old node and its replacement overlap while it boots).
"""

from __future__ import annotations

import argparse
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.churn import bench_catalog
from scheduler_svc.core import InstanceType, NodePool, Pod, Resources
from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    DisruptionSettings,
    DisruptionSnapshot,
    NodePoolState,
    RebalanceRecommendationPolicy,
    plan_rebalance,
)

GIB = 1024**3
STEP_SECONDS = 10
NOTICE_SECONDS = 120
START = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
PODS_PER_NODE = 3


@functools.cache
def catalog() -> tuple[InstanceType, ...]:
    """The bench catalog's spot offerings (bench.churn's NodePool shape)."""
    return bench_catalog("spot")


@dataclass
class SimNode:
    name: str
    zone: str
    price: float
    pods: int
    recommended_at: float | None = None
    replaced_at: float | None = None  # when its replacement is Initialized (Replace)

    def candidate(self, shape: InstanceType, now: float) -> Candidate:
        pods = tuple(
            CandidatePod(
                Pod(
                    f"{self.name}-{i}",
                    labels={"app": "web"},
                    containers=(Resources(1000, 2 * GIB),),
                )
            )
            for i in range(self.pods)
        )
        recommended = self.recommended_at
        return Candidate(
            name=self.name,
            nodeclaim=self.name,
            nodepool="spot",
            created_at=START,
            instance_type=shape.name,
            capacity_type="spot",
            zone=self.zone,
            price_per_hour=self.price,
            allocatable=shape.allocatable,
            labels={
                **shape.labels,
                "kubernetes.io/hostname": self.name,
                "topology.kubernetes.io/zone": self.zone,
                "karpenter.sh/capacity-type": "spot",
                "daiku.dev/nodepool": "spot",
            },
            pods=pods,
            rebalance_recommended_at=None
            if recommended is None or recommended > now
            else START + timedelta(seconds=recommended),
        )


@dataclass
class Figures:
    recommendations: int = 0
    warnings: int = 0
    moved_early: int = 0
    lost_to_notice: int = 0
    pending_pod_seconds: float = 0.0
    launches: int = 0
    for_nothing: int = 0
    node_seconds: float = 0.0
    cost: float = 0.0
    blocked_max: int = 0


@dataclass
class Storm:
    recommend_at: dict[str, float] = field(default_factory=dict)
    warn_at: dict[str, float] = field(default_factory=dict)


def storm(names: Sequence[str], storm_minutes: float, lead_minutes: float, seed: int) -> Storm:
    rng = random.Random(seed)
    out = Storm()
    shuffled = list(names)
    rng.shuffle(shuffled)
    recommended, rest = shuffled[: len(names) // 2], shuffled[len(names) // 2 :]
    for name in recommended:
        at = rng.uniform(0, storm_minutes * 60)
        out.recommend_at[name] = at
        if rng.random() < 0.6:
            out.warn_at[name] = at + rng.uniform(60, lead_minutes * 60)
    for name in rest:
        if rng.random() < 0.1:
            out.warn_at[name] = rng.uniform(0, storm_minutes * 60)
    return out


def _fits(shape: InstanceType) -> bool:
    return (
        shape.allocatable.cpu_millis >= PODS_PER_NODE * 1000
        and shape.allocatable.memory_bytes >= PODS_PER_NODE * 2 * GIB
    )


def cluster_shape() -> InstanceType:
    """The type the provisioner would have chosen for a node's pods: the cheapest spot
    offering that holds them (so neither policy gains by leaving a dear type)."""
    fitting = [t for t in catalog() if _fits(t)]
    return min(fitting, key=lambda t: min(o.price_per_hour for o in t.offerings))


def relaunch_price(shape: InstanceType) -> float:
    """What the provisioner pays for pods an interruption evicted: the cheapest fitting spot
    offering of another type (the interrupted pool is marked unavailable)."""
    return min(
        o.price_per_hour
        for t in catalog()
        if _fits(t) and t.name != shape.name
        for o in t.offerings
    )


def run(policy: RebalanceRecommendationPolicy, budget: str, args: argparse.Namespace) -> Figures:
    """One policy over the storm (the module docstring says what is counted)."""
    shape = cluster_shape()
    offerings = sorted(shape.offerings, key=lambda o: o.zone)
    nodes: dict[str, SimNode] = {}
    for i in range(args.nodes):
        offering = offerings[i % len(offerings)]
        nodes[f"n{i:03d}"] = SimNode(
            f"n{i:03d}", offering.zone, offering.price_per_hour, PODS_PER_NODE
        )
    events = storm(sorted(nodes), args.storm_minutes, args.lead_minutes, args.seed)
    relaunch = relaunch_price(shape)
    for name, at in events.recommend_at.items():
        nodes[name].recommended_at = at
    settings = DisruptionSettings(
        budgets=(Budget(percent=int(budget.removesuffix("%"))),), rebalance_policy=policy
    )
    pool = NodePoolState(NodePool("spot"), settings)
    figures = Figures(recommendations=len(events.recommend_at), warnings=len(events.warn_at))
    # Capacity being launched: (ready at, price, pods it takes when ready).
    booting: list[tuple[float, float, int]] = []
    names: list[str] = []  # of the nodes launched during the run
    end = (args.storm_minutes + 20) * 60
    now = 0.0
    while now <= end:
        for node in list(nodes.values()):
            warned = events.warn_at.get(node.name)
            if warned is not None and warned <= now:
                # The interruption handler: cordon and drain at once; the pods wait for
                # capacity (the replacement already booting, else a new launch).
                del nodes[node.name]
                figures.lost_to_notice += node.pods
                if node.replaced_at is not None:
                    figures.pending_pod_seconds += node.pods * max(0.0, node.replaced_at - now)
                else:
                    figures.launches += 1
                    figures.pending_pod_seconds += node.pods * args.boot_seconds
                    booting.append((now + args.boot_seconds, relaunch, node.pods))
            elif node.replaced_at is not None and node.replaced_at <= now:
                del nodes[node.name]  # its pods moved onto the Initialized replacement
                figures.moved_early += node.pods
                figures.for_nothing += node.name not in events.warn_at
        for item in [b for b in booting if b[0] <= now]:
            booting.remove(item)
            name = f"r{len(names):04d}"
            names.append(name)
            nodes[name] = SimNode(name, offerings[0].zone, item[1], item[2])
        snapshot = DisruptionSnapshot(
            candidates=tuple(n.candidate(shape, now) for n in nodes.values()),
            nodepools=(pool,),
            instance_types=catalog(),
            disrupting=frozenset(n.name for n in nodes.values() if n.replaced_at is not None),
        )
        plan = plan_rebalance(snapshot, START + timedelta(seconds=now))
        figures.blocked_max = max(figures.blocked_max, len(plan.blocked))
        for decision in plan.decisions:
            node = nodes[decision.nodes[0]]
            # Nodes are full: every decision launches a replacement; the node goes when it
            # is Initialized (the controller's wait), its pods moving then.
            node.replaced_at = now + args.boot_seconds
            figures.launches += len(decision.replacements)
            booting.append((node.replaced_at, decision.new_price_per_hour, node.pods))
        running = [n.price for n in nodes.values()] + [b[1] for b in booting]
        figures.node_seconds += STEP_SECONDS * len(running)
        figures.cost += sum(running) * STEP_SECONDS / 3600
        now += STEP_SECONDS
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance", description=__doc__)
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--storm-minutes", type=float, default=10.0)
    parser.add_argument("--lead-minutes", type=float, default=15.0)
    parser.add_argument("--boot-seconds", type=float, default=90.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    ignore, replace = RebalanceRecommendationPolicy.IGNORE, RebalanceRecommendationPolicy.REPLACE
    rows = [
        ("Ignore (Karpenter)", run(ignore, "10%", args)),
        ("Replace, budget 10%", run(replace, "10%", args)),
        ("Replace, budget 100%", run(replace, "100%", args)),
    ]
    first = rows[0][1]
    print(
        f"{args.nodes} spot {cluster_shape().name} nodes x {PODS_PER_NODE} pods; "
        f"{first.recommendations} "
        f"rebalance recommendations, {first.warnings} interruption warnings over "
        f"{args.storm_minutes:g} min, warnings 1-{args.lead_minutes:g} min after their "
        f"recommendation; boot {args.boot_seconds:g} s; seed {args.seed}"
    )
    print(
        "| policy | pods moved early | pods lost to the 2-min notice | pending pod-min "
        "| launches | for nothing | held by budget (max) | node-hours | cost |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, f in rows:
        print(
            f"| {name} | {f.moved_early} | {f.lost_to_notice} | {f.pending_pod_seconds / 60:.1f} "
            f"| {f.launches} | {f.for_nothing} | {f.blocked_max} | {f.node_seconds / 3600:.1f} "
            f"| ${f.cost:.2f} |"
        )


if __name__ == "__main__":
    main()
