"""Churn benchmark: a simulated day of a fluctuating workload, daiku's disruption policy next to
a naive "remove whatever is removable now" policy.

    uv run python -m bench.churn                      # 24 h in 1-minute steps
    uv run python -m bench.churn --hours 6 --seed 2   # shorter, another cron phase

Workload: a Deployment ``web`` (500m / 1Gi pods) following a diurnal sinusoid between 8 and
80 replicas, plus a CronJob every 10 minutes that runs 16 pods of 1 cpu / 2Gi for 3 minutes;
one DaemonSet pod (50m / 64Mi) on every node. Provisioning is ``solve()`` each step against the
bundled catalog (c/m/r, generation > 4, amd64, on-demand; loaded once per run). A launched node
takes its pods at once and runs them one step (60 s) later; the pods of a removed node are
re-provisioned in the same step (onto room elsewhere or a new node). "pending pod-min" counts
pod-minutes spent waiting (pending or on a booting node).

Policies (all through ``scheduler_svc.core.disruption``):
* daiku: the NodePool defaults (WhenEmptyOrUnderutilized, consolidateAfter 0s, budget 10 %)
  with daiku's consolidation: a saving of >= 10 % and $0.01/h, a pass every 10 s within each
  step (the controller's interval), a consolidation acted on at the first pass after its 15 s
  validation wait if it still holds, suspended while pods are pending or nodes boot.
* daiku b100%: the same with a budget of 100 % (10 % of a small cluster is one or two nodes,
  which rules out merging several nodes at once, as in Karpenter).
* daiku ca5m: the defaults with consolidateAfter 5m (shorter than the cron period: the burst
  nodes are kept a while, then taken away just before the next burst).
* balanced, balanced k1, balanced b100%: ``consolidationPolicy: Balanced`` with
  consolidationThreshold 2 (default) or 1, budget 10 % or 100 % (Karpenter v1.14: a move only
  when its savings fraction is at least 1/k of its disruption fraction; every pod here costs 1).
* naive: consolidateAfter 0s, budget 100 %, no saving threshold, acted on at once, never
  suspended for pending pods or booting nodes, and passes repeated within a step while
  anything is removable (up to 20).

Prints per policy: launches, terminations, evictions, pods moved twice (evicted again within
30 minutes of their last eviction), pod-minutes pending, node-hours, cost.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from scheduler_svc.core import (
    InstanceType,
    Node,
    NodeClaimPlan,
    NodePool,
    Pod,
    Resources,
    SchedulingInput,
    solve,
)
from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    ConsolidationPolicy,
    DisruptionDecision,
    DisruptionSettings,
    DisruptionSnapshot,
    NodePoolState,
    plan_disruption,
    validate,
)

MIB = 1024**2
GIB = 1024**3
STEP_SECONDS = 60
BOOT_SECONDS = 60  # a launched node runs its pods one step later (EC2 boot + join)
START = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
DAEMON = Pod("aws-node", namespace="kube-system", containers=(Resources(50, 64 * MIB),))


def bench_catalog(capacity_type: str) -> tuple[InstanceType, ...]:
    """The bundled catalog's c/m/r, generation > 4, amd64 types with only their
    ``capacity_type`` offerings: what the churn and rebalance benches' NodePools allow."""
    from daiku_cli.catalog import bundled_catalog_document
    from daiku_cli.plan import instance_types_from_document

    out = []
    for t in instance_types_from_document(bundled_catalog_document(), "bundled"):
        labels = t.labels
        if labels.get("karpenter.k8s.aws/instance-category") not in ("c", "m", "r"):
            continue
        if int(labels.get("karpenter.k8s.aws/instance-generation", "0")) <= 4:
            continue
        if labels.get("kubernetes.io/arch") != "amd64":
            continue
        offered = tuple(o for o in t.offerings if o.capacity_type == capacity_type)
        if offered:
            out.append(InstanceType(t.name, t.capacity, t.allocatable, t.labels, offered))
    return tuple(out)


@functools.cache
def catalog() -> tuple[InstanceType, ...]:
    """The on-demand bench catalog (loaded once per run)."""
    return bench_catalog("on-demand")


@functools.cache
def catalog_by_name() -> dict[str, InstanceType]:
    return {t.name: t for t in catalog()}


@dataclass
class SimPod:
    pod: Pod
    owner_kind: str
    ends_at: float | None = None  # seconds since start (Job pods)


@dataclass
class SimNode:
    name: str
    instance_type: InstanceType
    zone: str
    price_per_hour: float
    created_at: float
    pods: dict[str, SimPod] = field(default_factory=dict)
    last_event_at: float = 0.0
    ready_at: float = 0.0
    # A replacement of a consolidation in waves: the deferred nodes it waits for, until when.
    room_held_for: frozenset[str] = frozenset()
    room_held_until: datetime | None = None

    def labels(self) -> dict[str, str]:
        return {
            **self.instance_type.labels,
            "kubernetes.io/hostname": self.name,
            "topology.kubernetes.io/zone": self.zone,
            "karpenter.sh/capacity-type": "on-demand",
            "daiku.dev/nodepool": "default",
        }

    def candidate(self, now: float, *, track_readiness: bool) -> Candidate:
        daemon = CandidatePod(DAEMON, owner_kind="DaemonSet")
        return Candidate(
            name=self.name,
            nodeclaim=self.name,
            nodepool="default",
            created_at=START + timedelta(seconds=self.created_at),
            instance_type=self.instance_type.name,
            capacity_type="on-demand",
            zone=self.zone,
            price_per_hour=self.price_per_hour,
            allocatable=self.instance_type.allocatable,
            labels=self.labels(),
            pods=(daemon, *(CandidatePod(p.pod, p.owner_kind) for p in self.pods.values())),
            last_pod_event_at=START + timedelta(seconds=self.last_event_at),
            is_initialized=not track_readiness or now >= self.ready_at,
            room_held_for=self.room_held_for,
            room_held_until=self.room_held_until,
        )


@dataclass
class Figures:
    launches: int = 0
    terminations: int = 0
    evictions: int = 0
    pending_pod_minutes: int = 0
    node_hours: float = 0.0
    cost: float = 0.0
    peak_nodes: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    # Evictions of a pod evicted before within MOVED_AGAIN_SECONDS (moved twice in a row).
    moved_twice: int = 0
    last_evicted: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    name: str
    settings: DisruptionSettings
    options: ConsolidationOptions
    validates: bool
    suspends_for_pending: bool
    passes_per_step: int = 1
    # Validating policies pass this often within a step (the controller's interval_seconds).
    pass_interval_seconds: float = 10.0


def daiku_policy(
    name: str,
    consolidate_after_seconds: float,
    budget: Budget,
    consolidation: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
    threshold: int = 2,
) -> Policy:
    """daiku's consolidation (threshold, validation, no fighting a scale-up) with
    ``consolidate_after_seconds``, ``budget`` and ``consolidation`` (``threshold``: Balanced's
    consolidationThreshold)."""
    return Policy(
        name,
        DisruptionSettings(
            consolidation,
            consolidate_after_seconds,
            None,
            None,
            (budget,),
            consolidation_threshold=threshold,
        ),
        ConsolidationOptions(),
        validates=True,
        suspends_for_pending=True,
    )


POLICIES = (
    daiku_policy("daiku", 0.0, Budget(percent=10)),
    daiku_policy("daiku b100%", 0.0, Budget(percent=100)),
    daiku_policy("daiku ca5m", 300.0, Budget(percent=10)),
    daiku_policy("balanced", 0.0, Budget(percent=10), ConsolidationPolicy.BALANCED),
    daiku_policy("balanced k1", 0.0, Budget(percent=10), ConsolidationPolicy.BALANCED, 1),
    daiku_policy("balanced b100%", 0.0, Budget(percent=100), ConsolidationPolicy.BALANCED),
)
NAIVE = Policy(
    "naive",
    DisruptionSettings(
        ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, 0.0, None, None, (Budget(percent=100),)
    ),
    ConsolidationOptions(min_saving_fraction=0.0, min_saving_per_hour=0.0),
    validates=False,
    suspends_for_pending=False,
    passes_per_step=20,
)


# A pod evicted again this soon after its last eviction counts as moved twice in a row.
MOVED_AGAIN_SECONDS = 1800.0


def web_replicas(seconds: float) -> int:
    """Diurnal: 8 replicas 9 hours into the day, 80 at 21 hours (69 at the start, falling)."""
    phase = (seconds / 86400.0 - 0.375) * 2 * math.pi
    return round(44 - 36 * math.cos(phase))


class Simulation:
    def __init__(self, policy: Policy, seed: int) -> None:
        self.policy = policy
        self.nodes: dict[str, SimNode] = {}
        self.pending: dict[str, SimPod] = {}
        self.web_serial = 0
        self.job_serial = 0
        self.node_serial = 0
        self.cron_offset = (seed * 7 * STEP_SECONDS) % 600  # a whole number of steps
        self.figures = Figures()
        self.awaiting: list[DisruptionDecision] = []
        self.pool = NodePool("default")

    # -- workload --------------------------------------------------------------------------

    def web_pods(self) -> list[tuple[str | None, str, float]]:
        """(node or None if pending, key, created-at order) of every web pod."""
        out: list[tuple[str | None, str, float]] = []
        for node in self.nodes.values():
            out += [(node.name, k, 0.0) for k, p in node.pods.items() if p.owner_kind != "Job"]
        out += [(None, k, 0.0) for k, p in self.pending.items() if p.owner_kind != "Job"]
        return out

    def scale(self, now: float) -> None:
        want = web_replicas(now)
        current = self.web_pods()
        if want > len(current):
            for _ in range(want - len(current)):
                self.web_serial += 1
                pod = Pod(
                    f"web-{self.web_serial}",
                    labels={"app": "web"},
                    containers=(Resources(500, GIB),),
                )
                self.pending[pod.key] = SimPod(pod, "ReplicaSet")
        else:
            # A ReplicaSet removes pending pods first, then the newest.
            doomed = sorted(current, key=lambda c: (c[0] is not None, -int(c[1].split("-")[-1])))
            for node_name, key, _ in doomed[: len(current) - want]:
                if node_name is None:
                    del self.pending[key]
                else:
                    node = self.nodes[node_name]
                    del node.pods[key]
                    node.last_event_at = now
        if int(now - self.cron_offset) % 600 == 0:
            for _ in range(16):
                self.job_serial += 1
                pod = Pod(
                    f"job-{self.job_serial}",
                    labels={"app": "job"},
                    containers=(Resources(1000, 2 * GIB),),
                )
                self.pending[pod.key] = SimPod(pod, "Job", ends_at=now + 180)
        for node in self.nodes.values():
            done = [k for k, p in node.pods.items() if p.ends_at is not None and p.ends_at <= now]
            for key in done:
                del node.pods[key]
                node.last_event_at = now

    # -- provisioning ----------------------------------------------------------------------

    def core_nodes(self) -> tuple[Node, ...]:
        return tuple(
            Node(
                n.name,
                labels=n.labels(),
                allocatable=n.instance_type.allocatable,
                pods=(DAEMON, *(p.pod for p in n.pods.values())),
            )
            for n in self.nodes.values()
        )

    def provision(self, now: float) -> None:
        if not self.pending:
            return
        result = solve(
            SchedulingInput(
                pods=tuple(p.pod for p in self.pending.values()),
                nodepools=(self.pool,),
                instance_types=catalog(),
                nodes=self.core_nodes(),
                daemonsets=(DAEMON,),
            )
        )
        for placement in result.existing_placements:
            node = self.nodes[placement.node]
            for key in placement.pods:
                node.pods[key] = self.pending.pop(key)
            node.last_event_at = now
        for claim in result.new_claims:
            node = self.launch(claim, now)
            for key in claim.pods:
                node.pods[key] = self.pending.pop(key)

    # -- disruption ------------------------------------------------------------------------

    def snapshot(self, now: float) -> DisruptionSnapshot:
        pending = tuple(p.pod for p in self.pending.values())
        track = self.policy.suspends_for_pending
        return DisruptionSnapshot(
            candidates=tuple(n.candidate(now, track_readiness=track) for n in self.nodes.values()),
            nodepools=(NodePoolState(self.pool, self.policy.settings),),
            instance_types=catalog(),
            daemonsets=(DAEMON,),
            pending_pods=pending if self.policy.suspends_for_pending else (),
            # Nodes of decisions waiting for validation are taken, as the controller's are.
            disrupting=frozenset(n for d in self.awaiting for n in d.nodes),
        )

    def act(self, decision: DisruptionDecision, now: float) -> None:
        reason = decision.reason.value
        self.figures.decisions[reason] = self.figures.decisions.get(reason, 0) + 1
        for name in decision.nodes:
            node = self.nodes.pop(name)
            self.figures.terminations += 1
            self.figures.evictions += len(node.pods)
            for key in node.pods:
                before = self.figures.last_evicted.get(key)
                if before is not None and now - before <= MOVED_AGAIN_SECONDS:
                    self.figures.moved_twice += 1
                self.figures.last_evicted[key] = now
            self.pending.update(node.pods)
        if decision.deferred:
            self.launch_held_replacements(decision, now)
        self.provision(now)

    def launch_held_replacements(self, decision: DisruptionDecision, now: float) -> None:
        """A consolidation in waves: launch every replacement now, holding its room for the
        deferred nodes, as the controller does (other decisions re-provision the moved pods,
        which buys what their replacements would be)."""
        for claim in decision.replacements:
            self.launch(
                claim,
                now,
                room_held_for=frozenset(decision.deferred_nodeclaims),
                room_held_until=decision.room_held_until,
            )

    def launch(
        self,
        claim: NodeClaimPlan,
        now: float,
        *,
        room_held_for: frozenset[str] = frozenset(),
        room_held_until: datetime | None = None,
    ) -> SimNode:
        """A node for ``claim`` at its first offering, booting from ``now`` (holding room for
        the deferred nodes of a consolidation in waves, when given)."""
        self.node_serial += 1
        choice = claim.offerings[0]
        node = SimNode(
            f"node-{self.node_serial}",
            catalog_by_name()[choice.instance_type],
            choice.zone,
            choice.price_per_hour,
            created_at=now,
            last_event_at=now,
            ready_at=now + BOOT_SECONDS,
            room_held_for=room_held_for,
            room_held_until=room_held_until,
        )
        self.nodes[node.name] = node
        self.figures.launches += 1
        return node

    def disrupt(self, now: float) -> None:
        if not self.policy.validates:
            self.disrupt_at_once(now)
            return
        # daiku passes every pass_interval_seconds; a consolidation acts on the first pass
        # after its validation wait (and only if it still holds then).
        offset = 0.0
        while offset < STEP_SECONDS:
            self.disruption_pass(now + offset)
            offset += self.policy.pass_interval_seconds

    def disruption_pass(self, seconds: float) -> None:
        moment = START + timedelta(seconds=seconds)
        wait = timedelta(seconds=self.policy.options.validation_wait_seconds)
        due = [d for d in self.awaiting if d.decided_at + wait <= moment]
        self.awaiting = [d for d in self.awaiting if d not in due]
        for decision in due:
            if (
                all(n in self.nodes for n in decision.nodes)
                and validate(decision, self.snapshot(seconds), moment, self.policy.options).is_valid
            ):
                self.act(decision, seconds)
        plan = plan_disruption(self.snapshot(seconds), moment, self.policy.options)
        for decision in plan.decisions:
            if decision.needs_validation:
                self.awaiting.append(decision)
            elif all(n in self.nodes for n in decision.nodes):
                self.act(decision, seconds)

    def disrupt_at_once(self, now: float) -> None:
        """The naive policy: acts on every decision at once, passing again while anything is
        removable."""
        moment = START + timedelta(seconds=now)
        for _ in range(self.policy.passes_per_step):
            plan = plan_disruption(self.snapshot(now), moment, self.policy.options)
            for decision in plan.decisions:
                if all(n in self.nodes for n in decision.nodes):
                    self.act(decision, now)
            if not plan.decisions:
                break

    # -- the day ---------------------------------------------------------------------------

    def step(self, now: float) -> None:
        self.scale(now)
        self.provision(now)
        self.disrupt(now)
        hours = STEP_SECONDS / 3600
        # Pods wait while pending and while their node boots.
        booting = sum(len(n.pods) for n in self.nodes.values() if n.ready_at > now)
        self.figures.pending_pod_minutes += (len(self.pending) + booting) * STEP_SECONDS // 60
        self.figures.node_hours += len(self.nodes) * hours
        self.figures.cost += sum(n.price_per_hour for n in self.nodes.values()) * hours
        self.figures.peak_nodes = max(self.figures.peak_nodes, len(self.nodes))


def run(
    policy: Policy, hours: float, seed: int, *, progress: bool = False
) -> tuple[Figures, float]:
    """Simulate ``hours``; with ``progress``, the running totals after each simulated hour go
    to stderr (a long run can be read while it goes)."""
    sim = Simulation(policy, seed)
    started = time.perf_counter()
    steps_per_hour = 3600 // STEP_SECONDS
    for step in range(int(hours * 3600 / STEP_SECONDS)):
        sim.step(float(step * STEP_SECONDS))
        if progress and (step + 1) % steps_per_hour == 0:
            f = sim.figures
            print(
                f"{policy.name} hour {(step + 1) // steps_per_hour}: launches {f.launches}, "
                f"evictions {f.evictions}, moved twice {f.moved_twice}, pending pod-min "
                f"{f.pending_pod_minutes}, node-hours {f.node_hours:.1f}, cost ${f.cost:.2f}, "
                f"cpu {time.process_time():.0f}s",
                file=sys.stderr,
                flush=True,
            )
    return sim.figures, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--policy",
        action="append",
        choices=[p.name for p in (*POLICIES, NAIVE)],
        help="run only this policy (repeatable; default: all), e.g. to run rows in parallel",
    )
    parser.add_argument(
        "--progress", action="store_true", help="running totals per simulated hour on stderr"
    )
    args = parser.parse_args(argv)
    print(f"catalog: {len(catalog())} on-demand instance types (c/m/r, gen > 4, amd64)")
    print(
        f"{'policy':<14} {'launches':>8} {'terminated':>10} {'evictions':>9} "
        f"{'moved twice':>11} {'pending pod-min':>15} {'peak nodes':>10} {'node-hours':>10} "
        f"{'cost $':>8} {'sim s':>6}  decisions"
    )
    chosen = [p for p in (*POLICIES, NAIVE) if not args.policy or p.name in args.policy]
    for policy in chosen:
        figures, seconds = run(policy, args.hours, args.seed, progress=args.progress)
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(figures.decisions.items()))
        print(
            f"{policy.name:<14} {figures.launches:>8} {figures.terminations:>10} "
            f"{figures.evictions:>9} {figures.moved_twice:>11} {figures.pending_pod_minutes:>15} "
            f"{figures.peak_nodes:>10} {figures.node_hours:>10.1f} {figures.cost:>8.2f} "
            f"{seconds:>6.1f}  {decisions}",
            flush=True,
        )


if __name__ == "__main__":
    main()
