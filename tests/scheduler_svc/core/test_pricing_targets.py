"""The instance type a new NodeClaim targets (``Pricing._scan_targets``,
``Pricing._target_keeping_min_values``): the lowest price per unit of the NodePool's pending
demand, priced in the zones and capacity types the pool allows, with each type's room after
the daemonsets, and in a pool with limits and minValues a type whose claim keeps enough
values. The target decides how many pods a claim holds, so a wrong one shows as more (or
dearer) claims. The integer program's second opinion is off (``max_pods=0``, as for batches
larger than ``PackingSettings.max_pods``) so the greedy claims are what is seen."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_svc.core import (
    InstanceType,
    NodePool,
    NodePoolLimits,
    Offering,
    Operator,
    Pod,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, instance_type, pod

GREEDY = PackingSettings(max_pods=0)
FAMILY = "karpenter.k8s.aws/instance-family"
DEFAULT = NodePool("default")


def _solve(
    pods: Sequence[Pod],
    types: Sequence[InstanceType],
    pool: NodePool = DEFAULT,
    daemonsets: Sequence[Pod] = (),
) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (pool,), tuple(types), daemonsets=tuple(daemonsets))
    result = solve(problem, packing=GREEDY)
    assert result.unschedulable == ()
    return result


def _sized(name: str, cpu: int, price: float, **extended: int) -> InstanceType:
    """A type of ``cpu`` cores (4 GiB each) and the given extended resources, on-demand in
    zone-a only."""
    resources = Resources(cpu * 1000, cpu * 4 * GIB, 110, 20 * GIB, tuple(sorted(extended.items())))
    return InstanceType(
        name,
        resources,
        resources,
        {"kubernetes.io/arch": "amd64"},
        (Offering("zone-a", "on-demand", price),),
    )


def _shapes(result: SchedulingResult) -> list[tuple[str, int]]:
    return [(c.instance_type, len(c.pods)) for c in result.new_claims]


def test_target_is_priced_in_the_zones_the_pool_allows() -> None:
    """x (8 cpu) costs $0.40 in zone-a and $0.05 in zone-b; y (4 cpu) $0.15 in zone-a. A
    zone-a NodePool's eight 1-cpu pods cost $0.40 on one x or $0.30 on two y: two y claims.
    (Priced at zone-b's $0.05, x would be the target and its zone-a claim cost $0.40.)"""
    x = InstanceType(
        "x",
        Resources(8000, 32 * GIB, 110, 20 * GIB),
        Resources(8000, 32 * GIB, 110, 20 * GIB),
        {"kubernetes.io/arch": "amd64"},
        (Offering("zone-a", "on-demand", 0.40), Offering("zone-b", "on-demand", 0.05)),
    )
    y = instance_type("y", 4, 16, 0.15, zones=("zone-a",))
    pool = NodePool("default", requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-a",)),))
    result = _solve([pod(f"p-{i}", 1) for i in range(8)], [x, y], pool)
    assert _shapes(result) == [("y", 4), ("y", 4)]
    assert {o.zone for c in result.new_claims for o in c.offerings} == {"zone-a"}


def test_target_is_priced_on_the_capacity_types_the_pool_allows() -> None:
    """x (8 cpu) costs $0.40 on-demand and $0.05 on spot; y (4 cpu) $0.15 on-demand. An
    on-demand NodePool's eight 1-cpu pods cost $0.40 on one x or $0.30 on two y: two y
    claims, not one x priced at the spot price it cannot launch."""
    x = instance_type("x", 8, 32, 0.40, spot_price=0.05)
    y = instance_type("y", 4, 16, 0.15)
    pool = NodePool(
        "default", requirements=(Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),)
    )
    result = _solve([pod(f"p-{i}", 1) for i in range(8)], [x, y], pool)
    assert _shapes(result) == [("y", 4), ("y", 4)]
    assert {o.capacity_type for c in result.new_claims for o in c.offerings} == {"on-demand"}


def test_daemonset_overhead_counts_against_a_types_room() -> None:
    """A 1.5-cpu daemonset runs on every node: small (4 cpu, $0.10) keeps 2.5 cpu, two of
    the three 1-cpu pods, so they need two small nodes ($0.20); big (8 cpu, $0.18) keeps 6.5
    and holds all three. One big claim. (Counting small's whole 4 cpu it would look like
    one $0.10 node.)"""
    daemon = Pod("logger", containers=(Resources(cpu_millis=1500),))
    small = instance_type("small", 4, 16, 0.10)
    big = instance_type("big", 8, 32, 0.18)
    result = _solve([pod(f"p-{i}", 1) for i in range(3)], [small, big], daemonsets=[daemon])
    assert _shapes(result) == [("big", 3)]


def test_two_one_gpu_pods_share_a_two_gpu_node_when_cheaper() -> None:
    """Two pods asking one GPU each: g1 (one GPU, $1.00) needs two nodes, $2.00; g2 (two
    GPUs, $1.50) holds both. A type with a single unit of the resource still counts it."""
    g1 = _sized("g1", 8, 1.00, **{"nvidia.com/gpu": 1})
    g2 = _sized("g2", 8, 1.50, **{"nvidia.com/gpu": 2})
    gpu_pods = [
        Pod(f"gpu-{i}", containers=(Resources(1000, extended=(("nvidia.com/gpu", 1),)),))
        for i in range(2)
    ]
    result = _solve(gpu_pods, [g1, g2])
    assert _shapes(result) == [("g2", 2)]


def test_a_resource_a_type_lacks_does_not_hide_the_ones_it_has() -> None:
    """Four one-GPU pods and a Neuron pod pend. Neither GPU type has Neuron devices (the
    Neuron pod goes to n1); that demand does not rank them, but their GPUs still do: g2 (two
    GPUs, $1.00) needs two nodes for the four pods ($2.00), g4 (four, $1.60) one. The GPU pods
    share one g4 claim. (The extended resources are dimensions in name order, Neuron before
    GPU.)"""
    g2 = _sized("g2", 8, 1.00, **{"nvidia.com/gpu": 2})
    g4 = _sized("g4", 8, 1.60, **{"nvidia.com/gpu": 4})
    n1 = _sized("n1", 2, 0.10, **{"aws.amazon.com/neuron": 1})
    gpu_pods = [
        Pod(f"gpu-{i}", containers=(Resources(1000, extended=(("nvidia.com/gpu", 1),)),))
        for i in range(4)
    ]
    neuron_pod = Pod(
        "neuron-0", containers=(Resources(500, extended=(("aws.amazon.com/neuron", 1),)),)
    )
    result = _solve([*gpu_pods, neuron_pod], [g2, g4, n1])
    assert _shapes(result) == [("g4", 4), ("n1", 1)]


def test_the_target_keeping_minvalues_may_be_first_in_the_catalog() -> None:
    """A NodePool limiting cpu and asking for two instance families. The 1-cpu / 6 GiB pod
    fits m.large (2 cpu, $0.10) and c1.xlarge (4 cpu, $0.40), not r.large (4 GiB). A claim
    targeting m.large keeps only the types no bigger in cpu that hold the pod: m.large, one
    family. Targeting c1.xlarge it keeps m.large and c1.xlarge, two families, so that is the
    target, though it comes first in the catalog (types are ordered by name): the claim buys
    m.large with c1.xlarge as its fallback, and the pod is not refused for minValues."""
    pool = NodePool(
        "default",
        requirements=(Requirement(FAMILY, Operator.IN, ("c", "m", "r"), 2),),
        limits=NodePoolLimits(cpu_millis=100_000),
    )
    types = [
        instance_type("c1.xlarge", 4, 16, 0.40, labels={FAMILY: "c"}),
        instance_type("m.large", 2, 8, 0.10, labels={FAMILY: "m"}),
        instance_type("r.large", 2, 4, 0.11, labels={FAMILY: "r"}),
    ]
    result = _solve([pod("x", 1, 6)], types, pool)
    [claim] = result.new_claims
    assert claim.instance_type == "m.large"
    assert {o.instance_type for o in claim.offerings} == {"m.large", "c1.xlarge"}
