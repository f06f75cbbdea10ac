"""Binding NodePool limits (issue 11): when the greedy pass reaches a limit with pods left over,
the integer program packs the placed and the waiting pods again within what the limits leave
(decision 0002), on the bundled catalog's real prices."""

from __future__ import annotations

import dataclasses

import pytest

from daiku_cli.catalog import bundled_catalog_document
from daiku_cli.plan import instance_types_from_document
from scheduler_svc.core import (
    InstanceType,
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    Requirement,
    Resources,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.catalog_index import CatalogCache

MIB = 1024**2
TWO_TYPES = NodePool(
    "default",
    requirements=(
        Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),
        Requirement(
            "node.kubernetes.io/instance-type", Operator.IN, ("c6g.2xlarge", "c6gd.medium")
        ),
    ),
)


@pytest.fixture(scope="module")
def bundled() -> tuple[InstanceType, ...]:
    return tuple(instance_types_from_document(bundled_catalog_document(), "bundled"))


@pytest.fixture(scope="module")
def catalogs() -> CatalogCache:
    return CatalogCache()


def plan_small_pods(
    count: int, limits: NodePoolLimits, types: tuple[InstanceType, ...], catalogs: CatalogCache
) -> SchedulingResult:
    """``count`` pods of 500m/512Mi on spot [c6g.2xlarge, c6gd.medium] under ``limits``."""
    pods = tuple(Pod(f"p-{i}", containers=(Resources(500, 512 * MIB),)) for i in range(count))
    pool = dataclasses.replace(TWO_TYPES, limits=limits)
    return solve(SchedulingInput(pods, (pool,), types), catalogs=catalogs)


def test_two_nodes_hold_sixteen_pods_when_the_limit_allows_two(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """The greedy pass opened two one-pod c6gd.medium and left 14 pods at `nodes: 2`; one
    c6g.2xlarge (15 pods) and one c6gd.medium hold all 16."""
    result = plan_small_pods(16, NodePoolLimits(nodes=2), bundled, catalogs)
    assert result.unschedulable == ()
    assert sorted(c.instance_type for c in result.new_claims) == ["c6g.2xlarge", "c6gd.medium"]
    assert sorted(p for c in result.new_claims for p in c.pods) == sorted(
        f"default/p-{i}" for i in range(16)
    )
    assert result.total_price_per_hour == pytest.approx(0.1040, abs=1e-4)


def test_a_cpu_limit_is_packed_within_too(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """`cpu: 9`: 9 one-pod c6gd.medium (1 vCPU each) would reach it with 7 pods left; the
    c6g.2xlarge (8 vCPU) and one c6gd.medium hold all 16 within 9 vCPU."""
    result = plan_small_pods(16, NodePoolLimits(cpu_millis=9_000), bundled, catalogs)
    assert result.unschedulable == ()
    capacity = {t.name: t.capacity.cpu_millis for t in bundled}
    assert sum(capacity[c.instance_type] for c in result.new_claims) <= 9_000


def test_as_many_pods_as_the_limit_holds_are_placed_and_the_rest_say_why(
    bundled: tuple[InstanceType, ...], catalogs: CatalogCache
) -> None:
    """`nodes: 1` cannot hold 16: one c6g.2xlarge takes 15 (the greedy pass placed one), and
    the 16th waits with the limit named."""
    result = plan_small_pods(16, NodePoolLimits(nodes=1), bundled, catalogs)
    (claim,) = result.new_claims
    assert claim.instance_type == "c6g.2xlarge"
    assert len(claim.pods) == 15
    (waiting,) = result.unschedulable
    assert "NodePool default limit nodes=1 reached" in waiting.reason
    assert waiting.pod not in claim.pods
