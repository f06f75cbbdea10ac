"""Karpenter's first-fit-decreasing packing as the repacking's second candidate (decision 0002):
in a NodePool with minValues the integer program's cheapest packing may leave a claim with
fewer instance families than the pool asks for; the first-fit-decreasing packing, which keeps
minValues claim by claim, is then what makes the plan cheaper than the greedy claims."""

from __future__ import annotations

import pytest

from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import InstanceType, NodePool, Pod, SchedulingInput, SchedulingResult
from scheduler_svc.core.requirements import Operator, Requirement
from scheduler_svc.core.solver import solve
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
# Every claim must keep types of both families.
POOL = NodePool("default", requirements=(Requirement(FAMILY, Operator.IN, ("a", "b"), 2),))


def _type(name: str, cpu: float, memory_gib: float, price: float) -> InstanceType:
    family = name.split(".", maxsplit=1)[0]
    return instance_type(name, cpu, memory_gib, price, labels={FAMILY: family})


def cost(result: SchedulingResult) -> float:
    return sum(c.offerings[0].price_per_hour for c in result.new_claims)


def claims(result: SchedulingResult) -> list[tuple[str, tuple[str, ...]]]:
    """(type bought, pods) per claim, in a stable order."""
    return sorted((c.offerings[0].instance_type, tuple(sorted(c.pods))) for c in result.new_claims)


def greedy_only(pods: list[Pod], types: list[InstanceType]) -> SchedulingResult:
    return solve(SchedulingInput(tuple(pods), (POOL,), tuple(types)), packing=PackingSettings(0))


def families_kept(result: SchedulingResult) -> list[set[str]]:
    return [{o.instance_type.split(".")[0] for o in c.offerings} for c in result.new_claims]


# b.2xlarge, the only 8-cpu type, is the cheapest per cpu: the program's packing puts most pods
# on it, and its claim would keep one family. Of the 4-cpu types b.xlarge is the cheaper; the
# pricier a.xlarge sorts first by name, so a plan priced at the wrong type of a claim would
# lose to the greedy claims.
MIXED_TYPES = [
    _type("a.large", 2, 8, 0.135),
    _type("a.xlarge", 4, 16, 0.33),
    _type("b.large", 2, 8, 0.117),
    _type("b.xlarge", 4, 16, 0.274),
    _type("b.2xlarge", 8, 32, 0.358),
]
MIXED_PODS = [
    *(pod(f"web-{i}", 1.5, 2) for i in range(4)),
    pod("api", 1.2, 1),
    *(pod(f"worker-{i}", 0.7, 1) for i in range(3)),
    pod("sidecar", 0.1, 0.25),
]


def test_first_fit_decreasing_beats_the_greedy_claims_when_the_program_keeps_one_family() -> None:
    """Largest first, each pod joins the first claim whose remaining types (of both families)
    still hold it: two webs per 4-cpu claim (a third needs the 8-cpu b type alone), the api on
    a claim of its own, a worker on each claim, the sidecar on the first one. Each claim buys
    its cheapest remaining type: b.xlarge, b.xlarge, b.large, $0.665/h against the greedy
    claims' $0.742/h."""
    result = run(MIXED_PODS, MIXED_TYPES, [POOL])

    assert result.unschedulable == ()
    assert claims(result) == [
        ("b.large", ("default/api", "default/worker-2")),
        ("b.xlarge", ("default/sidecar", "default/web-0", "default/web-1", "default/worker-0")),
        ("b.xlarge", ("default/web-2", "default/web-3", "default/worker-1")),
    ]
    assert cost(result) == pytest.approx(0.274 + 0.274 + 0.117)
    assert cost(greedy_only(MIXED_PODS, MIXED_TYPES)) == pytest.approx(0.742)
    assert all(kept == {"a", "b"} for kept in families_kept(result))


def test_without_min_values_the_program_packs_cheaper_on_the_one_family_type() -> None:
    """The contrast: without minValues the program's packing (on b.2xlarge) wins, so it is
    minValues alone that leaves the plan to first-fit-decreasing."""
    result = run(MIXED_PODS, MIXED_TYPES)

    assert cost(result) < 0.274 + 0.274 + 0.117
    assert "b.2xlarge" in {c.offerings[0].instance_type for c in result.new_claims}


# Memory is the binding resource here (2 GiB per cpu) and pods of half a cpu come in two
# memory sizes.
MEMORY_TYPES = [
    _type("a.large", 2, 4, 0.107),
    _type("a.2xlarge", 8, 16, 0.54),
    _type("b.large", 2, 4, 0.109),
    _type("b.xlarge", 4, 8, 0.237),
    _type("b.2xlarge", 8, 16, 0.408),
]
MEMORY_PODS = [
    *(pod(f"cache-{i}", 0.7, 5) for i in range(3)),
    *(pod(f"large-{i}", 0.5, 5) for i in range(2)),
    *(pod(f"small-{i}", 0.5, 3) for i in range(3)),
]


def test_first_fit_decreasing_breaks_cpu_ties_by_memory() -> None:
    """Karpenter sorts pods by cpu, then memory, both largest first. The three 0.7-cpu caches
    fill one 16 GiB node; of the half-cpu pods the 5 GiB ones come before the 3 GiB ones, so
    two of each fill the second node's 16 GiB exactly and the third small pod gets an
    a.large: $0.923/h against the greedy claims' $1.053/h."""
    result = run(MEMORY_PODS, MEMORY_TYPES, [POOL])

    assert claims(result) == [
        ("a.large", ("default/small-2",)),
        ("b.2xlarge", ("default/cache-0", "default/cache-1", "default/cache-2")),
        (
            "b.2xlarge",
            ("default/large-0", "default/large-1", "default/small-0", "default/small-1"),
        ),
    ]
    assert cost(result) == pytest.approx(0.107 + 2 * 0.408)
    assert cost(greedy_only(MEMORY_PODS, MEMORY_TYPES)) == pytest.approx(1.053)
    assert all(kept == {"a", "b"} for kept in families_kept(result))


def test_first_fit_decreasing_sorts_by_cpu_before_memory() -> None:
    """The 2.5-cpu db opens the first claim although the caches ask for as much memory, and
    a web fills it to 4 cpu; the other web and both caches (3.9 cpu, 13 GiB) share the second
    claim. Both claims keep a.xlarge and b.xlarge and buy a.xlarge: $0.45/h against the
    greedy claims' $0.486/h."""
    types = [
        _type("a.xlarge", 4, 16, 0.225),
        _type("a.2xlarge", 8, 32, 0.419),
        _type("b.large", 2, 8, 0.087),
        _type("b.xlarge", 4, 16, 0.271),
    ]
    pods = [
        pod("db", 2.5, 5),
        *(pod(f"web-{i}", 1.5, 3) for i in range(2)),
        *(pod(f"cache-{i}", 1.2, 5) for i in range(2)),
    ]

    result = run(pods, types, [POOL])

    assert claims(result) == [
        ("a.xlarge", ("default/cache-0", "default/cache-1", "default/web-1")),
        ("a.xlarge", ("default/db", "default/web-0")),
    ]
    assert cost(result) == pytest.approx(2 * 0.225)
    assert cost(greedy_only(pods, types)) == pytest.approx(0.486)
