"""The cheapest nodes on the bundled catalog's real prices (issue 11's measured cases), and the
integer program's second opinion never making a plan dearer than the greedy one."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.plan import instance_types_from_document
from scheduler_svc.core import (
    InstanceType,
    NodePool,
    NodePoolLimits,
    Operator,
    PackingSettings,
    Pod,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.catalog_index import CatalogCache

MIB = 1024**2
GIB = 1024**3
SPOT = Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",))
TWO_TYPES = NodePool(
    "default",
    requirements=(
        SPOT,
        Requirement(
            "node.kubernetes.io/instance-type", Operator.IN, ("c6g.2xlarge", "c6gd.medium")
        ),
    ),
)
ARM64_SPOT = NodePool(
    "default", requirements=(SPOT, Requirement("kubernetes.io/arch", Operator.IN, ("arm64",)))
)
GREEDY_ONLY = PackingSettings(max_pods=0)


@pytest.fixture(scope="module")
def bundled() -> tuple[InstanceType, ...]:
    return tuple(instance_types_from_document(bundled_catalog_document(), "bundled"))


@pytest.fixture(scope="module")
def catalogs() -> CatalogCache:
    return CatalogCache()


def pods(count: int, cpu_millis: int, memory_bytes: int, prefix: str = "p") -> tuple[Pod, ...]:
    return tuple(
        Pod(f"{prefix}-{i}", containers=(Resources(cpu_millis, memory_bytes),))
        for i in range(count)
    )


def plan(
    pending: tuple[Pod, ...],
    pool: NodePool,
    types: tuple[InstanceType, ...],
    catalogs: CatalogCache,
    packing: PackingSettings | None = None,
) -> SchedulingResult:
    result = solve(SchedulingInput(pending, (pool,), types), catalogs=catalogs, packing=packing)
    assert result.unschedulable == ()
    assert sum(len(c.pods) for c in result.new_claims) == len(pending)
    return result


def test_sixteen_small_pods_take_the_big_node_and_one_small(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """16 pods of 500m/512Mi on spot [c6g.2xlarge, c6gd.medium]: one c6g.2xlarge holding 15
    and one c6gd.medium, not 16 c6gd.medium."""
    result = plan(pods(16, 500, 512 * MIB), TWO_TYPES, bundled, catalogs)
    assert sorted(c.instance_type for c in result.new_claims) == ["c6g.2xlarge", "c6gd.medium"]


def test_five_memory_pods_share_one_larger_r_node(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """5 pods of 1 cpu / 8Gi on arm64 spot: one node holds all five, cheaper than five
    r7g.large."""
    five_large = 5 * min(
        o.price_per_hour
        for t in bundled
        if t.name == "r7g.large"
        for o in t.offerings
        if o.capacity_type == "spot"
    )
    result = plan(pods(5, 1000, 8 * GIB), ARM64_SPOT, bundled, catalogs)
    assert len(result.new_claims) == 1
    assert result.total_price_per_hour < five_large


@pytest.mark.parametrize("pool", [TWO_TYPES, ARM64_SPOT], ids=["two-types", "arm64-spot"])
def test_cost_grows_with_replicas_by_at_most_one_cheapest_node(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache, pool: NodePool
) -> None:
    """One shape, 1 to 100 replicas: the plan never gets cheaper with one more pod, and never
    dearer by more than the cheapest node that holds one pod."""
    one = plan(pods(1, 500, 512 * MIB), pool, bundled, catalogs).total_price_per_hour
    costs = [
        plan(pods(n, 500, 512 * MIB), pool, bundled, catalogs).total_price_per_hour
        for n in range(1, 101)
    ]
    steps = [later - earlier for earlier, later in itertools.pairwise(costs)]
    assert min(steps) >= -1e-9, f"cheaper with one more pod: {costs}"
    assert max(steps) <= one + 1e-9, f"a step dearer than one node: {costs}"


def test_the_integer_program_never_makes_a_plan_dearer(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """On mixed shapes under several pools the improved plan costs at most the greedy one and
    places every pod."""
    pending = (
        pods(7, 1500, 3 * GIB, "a") + pods(23, 250, 256 * MIB, "b") + pods(4, 4000, 8 * GIB, "c")
    )
    for pool in (TWO_TYPES, ARM64_SPOT, NodePool("any")):
        greedy = plan(pending, pool, bundled, catalogs, GREEDY_ONLY).total_price_per_hour
        improved = plan(pending, pool, bundled, catalogs).total_price_per_hour
        assert improved <= greedy + 1e-9


def test_pods_with_topology_keep_the_greedy_plan(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """Pods with a hostname anti-affinity are left to the greedy solver: one per node."""
    from scheduler_svc.core import LabelSelector, PodAffinityTerm

    term = PodAffinityTerm("kubernetes.io/hostname", LabelSelector.of({"app": "db"}))
    pending = tuple(
        Pod(
            f"db-{i}",
            labels={"app": "db"},
            containers=(Resources(500, 512 * MIB),),
            pod_anti_affinity=(term,),
        )
        for i in range(4)
    )
    result = plan(pending, TWO_TYPES, bundled, catalogs)
    assert [len(c.pods) for c in result.new_claims] == [1, 1, 1, 1]


def cheapest(types: tuple[InstanceType, ...], name: str) -> float:
    """The lowest price of ``name`` among its offerings."""
    return min(o.price_per_hour for t in types if t.name == name for o in t.offerings)


def test_large_pods_per_node_are_counted_per_resource(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """arm64, 59 pods of 4 cpu (8Gi or 2Gi) and 7 of 500m: a c6g.12xlarge (47.8 cpu) holds
    only 11 of the 4-cpu pods, which the program did not know (it counted cpu per type), so its
    five c6g.12xlarge left four pods to dearer stragglers ($2.94/h); four c6g.metal hold all
    ($2.77/h)."""
    pool = NodePool(
        "default", requirements=(Requirement("kubernetes.io/arch", Operator.IN, ("arm64",)),)
    )
    pending = (
        pods(30, 4000, 8 * GIB, "a") + pods(7, 500, 256 * MIB, "b") + pods(29, 4000, 2 * GIB, "c")
    )
    result = plan(pending, pool, bundled, catalogs)
    assert result.total_price_per_hour <= 4 * cheapest(bundled, "c6g.metal") + 1e-9


def test_counts_that_do_not_split_into_nodes_are_packed_as_whole_nodes(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """c7gn.2xlarge (7.9 cpu, 13.8Gi) and c8i.24xlarge: 37 pods of 8Gi need a node each on the
    small type, so greedy buys 37 c7gn.2xlarge ($5.69/h); the program's counts per type did not
    split into nodes. One c8i.24xlarge holding twenty of them and 22 c7gn.2xlarge do
    ($5.60/h)."""
    pool = NodePool(
        "default",
        requirements=(
            Requirement("karpenter.k8s.aws/instance-category", Operator.IN, ("c", "r")),
            Requirement("karpenter.k8s.aws/instance-generation", Operator.GT, ("4",)),
            Requirement(
                "node.kubernetes.io/instance-type",
                Operator.IN,
                ("c7gn.2xlarge", "c8i.24xlarge", "m8id.8xlarge"),
            ),
        ),
    )
    pending = (
        pods(19, 2000, 512 * MIB, "a") + pods(37, 500, 8 * GIB, "b") + pods(31, 1000, 4 * GIB, "c")
    )
    result = plan(pending, pool, bundled, catalogs)
    small, large = cheapest(bundled, "c7gn.2xlarge"), cheapest(bundled, "c8i.24xlarge")
    assert result.total_price_per_hour <= large + 22 * small + 1e-9
    assert result.total_price_per_hour < 37 * small - 1e-9


def _limited(pool: NodePool, **limits: int) -> NodePool:
    return dataclasses.replace(pool, limits=NodePoolLimits(**limits))


def test_a_pool_with_limits_gets_the_same_cheap_plan_when_they_do_not_bind(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """`make up`'s NodePool has `limits.cpu: 100`: 16 pods of 500m/512Mi there cost what they
    cost without the limit (c6g.2xlarge + c6gd.medium), not 16 one-pod c6gd.medium (+80 %)."""
    free = plan(pods(16, 500, 512 * MIB), TWO_TYPES, bundled, catalogs)
    limited = plan(
        pods(16, 500, 512 * MIB), _limited(TWO_TYPES, cpu_millis=100_000), bundled, catalogs
    )

    assert sorted(c.instance_type for c in limited.new_claims) == ["c6g.2xlarge", "c6gd.medium"]
    assert limited.total_price_per_hour == pytest.approx(free.total_price_per_hour)


@pytest.mark.parametrize(
    "limits",
    [{"cpu_millis": 9_000}, {"nodes": 2}],
    ids=["cpu", "nodes"],
)
def test_the_second_opinion_keeps_within_the_pools_limits(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache, limits: dict[str, int]
) -> None:
    """A cheaper packing the limits do not admit is not taken: with 9 vCPU left, or two nodes,
    the 16 pods still fit as the greedy pass placed them, and the plan stays within them."""
    pool = _limited(TWO_TYPES, **limits)
    result = solve(SchedulingInput(pods(16, 500, 512 * MIB), (pool,), bundled), catalogs=catalogs)

    capacity = {t.name: t.capacity.cpu_millis for t in bundled}
    if "nodes" in limits:
        assert len(result.new_claims) <= limits["nodes"]
    else:
        assert sum(capacity[c.instance_type] for c in result.new_claims) <= limits["cpu_millis"]
