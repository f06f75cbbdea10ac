"""Property tests: for random pods, pools and catalogs the plan never breaks a hard rule."""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_svc.core import (
    HostPort,
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    solve,
)

GIB = 1024**3
ZONES = ("z1", "z2", "z3")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ARCH = "kubernetes.io/arch"


@st.composite
def instance_types(draw: st.DrawFn) -> tuple[InstanceType, ...]:
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        cpu = draw(st.integers(1, 16))
        memory = draw(st.integers(1, 64))
        price = draw(st.integers(1, 100)) / 100
        spot_zones = draw(st.sets(st.sampled_from(ZONES)))
        offerings = [Offering(z, "on-demand", price) for z in ZONES]
        offerings += [
            Offering(z, "spot", price * draw(st.sampled_from([0.3, 0.7, 1.2])))
            for z in sorted(spot_zones)
        ]
        size = Resources(cpu * 1000, memory * GIB, draw(st.integers(2, 30)), 20 * GIB)
        arch = draw(st.sampled_from(["amd64", "arm64"]))
        out.append(InstanceType(f"t{i}", size, size, {ARCH: arch}, tuple(offerings)))
    return tuple(out)


@st.composite
def pods(draw: st.DrawFn) -> tuple[Pod, ...]:
    count = draw(st.integers(1, 30))
    out = []
    for i in range(count):
        kind = draw(
            st.sampled_from(
                ["plain", "anti", "spread", "port", "arch", "tolerant", "affinity", "prefers"]
            )
        )
        request = Resources(draw(st.integers(1, 40)) * 100, draw(st.integers(1, 40)) * GIB // 4)
        kwargs: dict[str, object] = {}
        labels = {"kind": kind}
        if kind == "anti":
            kwargs["pod_anti_affinity"] = (
                PodAffinityTerm(HOST, LabelSelector.of({"kind": "anti"})),
            )
        elif kind == "spread":
            skew = draw(st.integers(1, 2))
            kwargs["topology_spread"] = (
                TopologySpreadConstraint(
                    ZONE, skew, label_selector=LabelSelector.of({"kind": "spread"})
                ),
            )
        elif kind == "port":
            kwargs["host_ports"] = (HostPort(8080),)
        elif kind == "arch":
            kwargs["node_selector"] = {ARCH: draw(st.sampled_from(["amd64", "arm64"]))}
        elif kind == "tolerant":
            kwargs["tolerations"] = (Toleration("team", "Exists"),)
        elif kind == "affinity":
            kwargs["pod_affinity"] = (
                PodAffinityTerm(ZONE, LabelSelector.of({"kind": "affinity"})),
            )
        elif kind == "prefers":
            zone = draw(st.sampled_from([*ZONES, "nowhere"]))
            kwargs["preferred_node_affinity"] = (
                PreferredNodeAffinityTerm(5, (Requirement(ZONE, Operator.IN, (zone,)),)),
            )
        out.append(Pod(f"p{i}", labels=labels, containers=(request,), **kwargs))  # type: ignore[arg-type]
    return tuple(out)


@st.composite
def nodepools(draw: st.DrawFn) -> tuple[NodePool, ...]:
    out = []
    for i in range(draw(st.integers(1, 2))):
        limits = NodePoolLimits(
            cpu_millis=draw(st.none() | st.integers(1, 40).map(lambda c: c * 1000)),
            nodes=draw(st.none() | st.integers(1, 6)),
        )
        taints = (Taint("team", TaintEffect.NO_SCHEDULE, "ml"),) if draw(st.booleans()) else ()
        out.append(
            NodePool(f"pool{i}", taints=taints, weight=draw(st.integers(0, 3)), limits=limits)
        )
    return tuple(out)


def _check(problem: SchedulingInput, result: SchedulingResult) -> None:  # noqa: PLR0912 - one branch per rule checked
    by_key = {p.key: p for p in problem.pods}
    types = {t.name: t for t in problem.instance_types}
    pools = {p.name: p for p in problem.nodepools}
    placed = [p for c in result.new_claims for p in c.pods]
    placed += [p for e in result.existing_placements for p in e.pods]
    # Every pod exactly once: placed or with a reason.
    assert Counter(placed + [u.pod for u in result.unschedulable]) == Counter(list(by_key))
    assert all(u.reason for u in result.unschedulable)
    used_cpu: dict[str, int] = defaultdict(int)
    affinity_zones: set[str] = set()
    spread_zones: Counter[str] = Counter()
    for placement in result.existing_placements:
        if any(by_key[k].pod_affinity for k in placement.pods):
            affinity_zones.add("z1")  # the only existing node is in z1
        spread_zones["z1"] += sum(1 for k in placement.pods if by_key[k].topology_spread)
    for claim in result.new_claims:
        members = [by_key[k] for k in claim.pods]
        if any(p.pod_affinity for p in members):
            assert len({o.zone for o in claim.offerings}) == 1
            affinity_zones.add(claim.offerings[0].zone)
        need = [
            sum(getattr(p.requests(), f) for p in members)
            for f in ("cpu_millis", "memory_bytes", "pods")
        ]
        assert claim.offerings, "a claim without offerings"
        pool = pools[claim.nodepool]
        for offering in claim.offerings:
            alloc = types[offering.instance_type].allocatable
            # Requests include DaemonSet overhead: it must fit as well.
            assert claim.requests.cpu_millis <= alloc.cpu_millis
            assert claim.requests.memory_bytes <= alloc.memory_bytes
            # No node overcommitted, whichever fallback the actuator ends up launching.
            assert need[0] <= alloc.cpu_millis
            assert need[1] <= alloc.memory_bytes
            assert need[2] <= alloc.pods
            for pod in members:
                for key, value in pod.node_selector.items():
                    assert types[offering.instance_type].labels.get(key) == value
        prices = [o.price_per_hour for o in claim.offerings]
        assert prices == sorted(prices)
        for pod in members:
            assert all(any(t.tolerates(taint) for t in pod.tolerations) for taint in pool.taints)
        assert sum(1 for p in members if p.pod_anti_affinity) <= 1
        assert sum(1 for p in members if p.host_ports) <= 1
        if any(p.topology_spread for p in members):
            assert len({o.zone for o in claim.offerings}) == 1
            spread_zones[claim.offerings[0].zone] += sum(1 for p in members if p.topology_spread)
        used_cpu[claim.nodepool] += max(
            types[o.instance_type].capacity.cpu_millis for o in claim.offerings
        )
    for name, pool in pools.items():
        if pool.limits.cpu_millis is not None:
            assert used_cpu[name] <= pool.limits.cpu_millis
        if pool.limits.nodes is not None:
            assert sum(1 for c in result.new_claims if c.nodepool == name) <= pool.limits.nodes
    assert len(affinity_zones) <= 1, "pods with affinity to each other split across zones"
    skews = [p.topology_spread[0].max_skew for p in problem.pods if p.topology_spread]
    # Spread domains are the zones a spread pod could land in: every zone when some NodePool
    # has no taint (spread pods tolerate none), else only the existing node's zone. A pool whose
    # taint the pod does not tolerate opens no domain: kube-scheduler could not use it either.
    spread_domains = ZONES if any(not pool.taints for pool in problem.nodepools) else ("z1",)
    if skews and spread_zones:
        counts = [spread_zones.get(z, 0) for z in spread_domains]
        assert max(counts) - min(counts) <= max(skews)
    for placement in result.existing_placements:
        node = next(n for n in problem.nodes if n.name == placement.node)
        members = [*node.pods, *(by_key[k] for k in placement.pods)]
        assert not any(by_key[k].pod_anti_affinity or by_key[k].host_ports for k in placement.pods)
        assert sum(p.requests().cpu_millis for p in members) <= node.allocatable.cpu_millis
        assert sum(p.requests().memory_bytes for p in members) <= node.allocatable.memory_bytes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance_types(), pods(), nodepools(), st.booleans(), st.integers(0, 500))
def test_plans_keep_every_hard_rule(
    catalog: tuple[InstanceType, ...],
    pending: tuple[Pod, ...],
    pools: tuple[NodePool, ...],
    with_node: bool,
    daemon_cpu_millis: int,
) -> None:
    """No node is overcommitted, every hard constraint and limit holds, every pod is placed or
    has a reason, and the same input gives the same plan."""
    # The existing node already runs an anti-affinity pod and a port-8080 pod: pending pods
    # of those kinds must not join it.
    running = (
        Pod("old-anti", labels={"kind": "anti"}, containers=(Resources(cpu_millis=100),)),
        Pod("old-port", host_ports=(HostPort(8080),), containers=(Resources(cpu_millis=100),)),
    )
    nodes = (
        (
            Node(
                "n1",
                {ZONE: "z1", ARCH: "amd64"},
                allocatable=Resources(4000, 8 * GIB, 10),
                pods=running,
            ),
        )
        if with_node
        else ()
    )
    daemons = (Pod("agent", containers=(Resources(cpu_millis=daemon_cpu_millis),)),)
    problem = SchedulingInput(pending, pools, catalog, nodes, daemons if daemon_cpu_millis else ())
    result = solve(problem)
    _check(problem, result)
    assert solve(problem) == result
