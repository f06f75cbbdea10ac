"""The catalog index cache: reusing an index across solves never changes a plan."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.plan import instance_types_from_document
from scheduler_svc.core import (
    InstanceType,
    NodePool,
    Operator,
    Pod,
    Requirement,
    Resources,
    SchedulingInput,
    UnavailableOffering,
    solve,
)
from scheduler_svc.core.catalog_index import BASE_DIMENSIONS, CatalogCache
from tests.scheduler_svc.core.test_properties import instance_types, nodepools, pods

MIB = 1024**2


@pytest.fixture(scope="module")
def bundled() -> tuple[InstanceType, ...]:
    return tuple(instance_types_from_document(bundled_catalog_document(), "bundled"))


def _pods(count: int, cpu_millis: int, prefix: str) -> tuple[Pod, ...]:
    return tuple(
        Pod(f"{prefix}-{i}", containers=(Resources(cpu_millis, 512 * MIB),)) for i in range(count)
    )


def test_reused_index_plans_like_a_fresh_one(bundled: tuple[InstanceType, ...]) -> None:
    """A sequence of solves sharing one cache (different pods, pools, exhausted offerings, an
    extended resource) gives exactly the plans of solves that each build their own index."""
    cache = CatalogCache()
    pool = NodePool(
        "default",
        requirements=(
            Requirement("karpenter.k8s.aws/instance-category", Operator.IN, ("c", "m", "r")),
        ),
    )
    spot = NodePool(
        "spot",
        requirements=(Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),),
    )
    exhausted = frozenset({UnavailableOffering("m7i.large", "us-east-1a", "on-demand")})
    gpu = Pod(
        "gpu",
        containers=(Resources(1000, 1024 * MIB, extended=(("nvidia.com/gpu", 1),)),),
    )
    problems = [
        SchedulingInput(_pods(1, 500, "a"), (pool,), bundled),
        SchedulingInput(_pods(10, 2000, "b"), (pool,), bundled),
        SchedulingInput(_pods(300, 250, "c"), (pool, spot), bundled),
        SchedulingInput(_pods(5, 500, "d"), (pool,), bundled, unavailable_offerings=exhausted),
        SchedulingInput((*_pods(3, 500, "e"), gpu), (spot,), bundled),
        SchedulingInput(_pods(1, 500, "a"), (pool,), bundled),
    ]
    for problem in problems:
        assert solve(problem, catalogs=cache) == solve(problem)
    # One index per distinct (catalog, dimensions, exhausted offerings): the last solve and the
    # spot-pool solve reused theirs.
    assert cache.builds == 3


def test_equal_catalog_reuses_and_changed_catalog_rebuilds(
    bundled: tuple[InstanceType, ...],
) -> None:
    """An equal catalog in a new sequence gets the cached index; a changed one gets a new index."""
    cache = CatalogCache()
    first = cache.index(bundled, BASE_DIMENSIONS)
    assert cache.index(list(bundled), BASE_DIMENSIONS) is first
    assert cache.index(bundled[1:], BASE_DIMENSIONS) is not first
    assert cache.builds == 2


def test_least_recently_used_index_is_dropped(bundled: tuple[InstanceType, ...]) -> None:
    """A cache of size 2 keeps the two most recently used catalogs and rebuilds the third."""
    cache = CatalogCache(size=2)
    a, b, c = bundled[:10], bundled[10:20], bundled[20:30]
    index_a = cache.index(a, BASE_DIMENSIONS)
    cache.index(b, BASE_DIMENSIONS)
    assert cache.index(a, BASE_DIMENSIONS) is index_a
    cache.index(c, BASE_DIMENSIONS)  # drops b, the least recently used
    assert cache.index(a, BASE_DIMENSIONS) is index_a
    builds = cache.builds
    cache.index(b, BASE_DIMENSIONS)
    assert cache.builds == builds + 1


def test_size_below_one_is_refused() -> None:
    """A cache that could hold nothing is a configuration error naming the size."""
    with pytest.raises(ValueError, match="size"):
        CatalogCache(size=0)


SHARED = CatalogCache()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance_types(), pods(), nodepools(), st.integers(0, 2))
def test_shared_cache_is_deterministic(
    catalog: tuple[InstanceType, ...],
    pending: tuple[Pod, ...],
    pools: tuple[NodePool, ...],
    repeat: int,
) -> None:
    """For random catalogs, pods and pools, solving through a cache shared by every example
    (warm memo tables from earlier solves) gives the plan a fresh index gives."""
    problem = SchedulingInput(pending, pools, catalog)
    fresh = solve(problem)
    for _ in range(repeat + 1):
        assert solve(problem, catalogs=SHARED) == fresh
