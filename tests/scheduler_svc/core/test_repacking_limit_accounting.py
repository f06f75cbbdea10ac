"""The repacking within a NodePool's limits (``Repacking._within_limits``, ``_give_back``): a
cheaper packing is taken only when its nodes keep the pool within its node, cpu and memory
limits, counted as the greedy pass counts them (one node per claim, its type's capacity); and
the claims it replaces give back what they counted, so the next group of the same pool is
checked against what the pool really holds. Also which pods it may move at all
(``_room_only``) and which waiting pods it packs again within limits (``_limit_bound``)."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_svc.core import (
    InstanceType,
    Node,
    NodePool,
    NodePoolLimits,
    Operator,
    Requirement,
    Resources,
    SchedulingResult,
    Taint,
)
from scheduler_svc.core.model import HostPort, PreferredNodeAffinityTerm
from scheduler_svc.core.requirements import LABEL_ZONE
from scheduler_svc.core.taints import TaintEffect
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"


def _claims(result: SchedulingResult) -> list[tuple[str, tuple[str, ...]]]:
    """(type, pods) of each claim, in a stable order."""
    return sorted((c.instance_type, tuple(sorted(c.pods))) for c in result.new_claims)


def _with_capacity(
    t: InstanceType, *, cpu: float | None = None, memory_gib: float | None = None
) -> InstanceType:
    """``t`` reporting more capacity (what counts against limits) than it has allocatable."""
    capacity = t.capacity
    if cpu is not None:
        capacity = dataclasses.replace(capacity, cpu_millis=int(cpu * 1000))
    if memory_gib is not None:
        capacity = dataclasses.replace(capacity, memory_bytes=int(memory_gib * GIB))
    return dataclasses.replace(t, capacity=capacity)


# A 3.5-cpu db and four 0.3-cpu webs. The greedy pass buys one c8 for all five ($0.215/h); a c4
# (db and one web) and a c1 (three webs) cost $0.169/h: two nodes where the greedy pass had one.
C1 = instance_type("c1", 1, 4, 0.035)
C4 = instance_type("c4", 4, 16, 0.134)
C8 = instance_type("c8", 8, 32, 0.215)
DB_AND_WEBS = [pod("db", 3.5, 1), *(pod(f"web-{i}", 0.3, 0.5) for i in range(4))]
ONE_C8 = [("c8", tuple(sorted(p.key for p in DB_AND_WEBS)))]
C4_AND_C1 = [
    ("c1", ("default/web-0", "default/web-1", "default/web-2")),
    ("c4", ("default/db", "default/web-3")),
]


def test_without_limits_the_cheaper_two_node_packing_is_taken() -> None:
    """The baseline the limited cases below depart from."""
    result = run(DB_AND_WEBS, [C1, C4, C8])

    assert _claims(result) == C4_AND_C1
    assert result.total_price_per_hour == pytest.approx(0.169)


def test_a_node_limit_keeps_the_one_node_greedy_claim() -> None:
    """`nodes: 1`: the cheaper packing needs two nodes, so the greedy c8 stays."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=1))

    result = run(DB_AND_WEBS, [C1, C4, C8], [pool])

    assert _claims(result) == ONE_C8


def test_a_cpu_limit_counts_the_capacity_of_the_new_types() -> None:
    """`cpu: 8`, and this c4 reports 7.5 cpu of capacity: the c4 and c1 would count 8.5 cpu
    against the limit where the greedy c8 counts 8, so the greedy claim stays."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=8000))

    result = run(DB_AND_WEBS, [C1, _with_capacity(C4, cpu=7.5), C8], [pool])

    assert _claims(result) == ONE_C8


def test_a_memory_limit_alone_is_checked_too() -> None:
    """`memory: 32Gi` and no cpu limit; this c4 reports 30 GiB: the c4 and c1 would count
    34 GiB, the greedy c8 counts 32, so the greedy claim stays."""
    pool = NodePool("default", limits=NodePoolLimits(memory_bytes=32 * GIB))

    result = run(DB_AND_WEBS, [C1, _with_capacity(C4, memory_gib=30), C8], [pool])

    assert _claims(result) == ONE_C8


# Two groups of one NodePool, apart by the family their pods select. Group a first (its pods
# are the larger): four 4.8-cpu batch pods, greedy one a.large each (4 nodes, 32 cpu, $0.40/h),
# repacked on an a.xlarge (three) and an a.large (2 nodes, 24 cpu, $0.35/h). Then group c, the
# db and webs above on c types: greedy one c.8 (1 node, 8 cpu), repacked on c.4 and c.1 (2 nodes,
# 5 cpu). So the pool holds 5 nodes and 40 cpu before, and group c's repack is checked against
# what group a's left: 3 nodes and 32 cpu.
def _family(name: str, cpu: float, price: float) -> InstanceType:
    return instance_type(name, cpu, 4 * cpu, price, labels={FAMILY: name.split(".", maxsplit=1)[0]})


TWO_FAMILIES = [
    _family("a.large", 8, 0.10),
    _family("a.xlarge", 16, 0.25),
    _family("c.1", 1, 0.035),
    _family("c.4", 4, 0.134),
    _family("c.8", 8, 0.215),
]
BATCH = [pod(f"batch-{i}", 4.8, 1, node_selector={FAMILY: "a"}) for i in range(4)]
FAMILY_C = [
    pod("db", 3.5, 1, node_selector={FAMILY: "c"}),
    *(pod(f"web-{i}", 0.3, 0.5, node_selector={FAMILY: "c"}) for i in range(4)),
]
BATCH_REPACKED = [
    ("a.large", ("default/batch-0",)),
    ("a.xlarge", ("default/batch-1", "default/batch-2", "default/batch-3")),
]


def test_a_repacked_group_gives_back_its_nodes_to_the_next_group() -> None:
    """`nodes: 5`: group a's repack leaves 3 nodes, so group c's two-node packing (4 nodes in
    all) fits and is taken: $0.519/h."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=5))

    result = run([*BATCH, *FAMILY_C], TWO_FAMILIES, [pool])

    assert _claims(result) == [
        *BATCH_REPACKED,
        ("c.1", ("default/web-0", "default/web-1", "default/web-2")),
        ("c.4", ("default/db", "default/web-3")),
    ]
    assert result.total_price_per_hour == pytest.approx(0.35 + 0.169)


def test_a_repacked_group_gives_back_its_cpu_to_the_next_group() -> None:
    """`cpu: 40`: group a's repack leaves 32 cpu counted, and group c's packing (5 cpu in place
    of 8) fits and is taken."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=40_000))

    result = run([*BATCH, *FAMILY_C], TWO_FAMILIES, [pool])

    assert _claims(result) == [
        *BATCH_REPACKED,
        ("c.1", ("default/web-0", "default/web-1", "default/web-2")),
        ("c.4", ("default/db", "default/web-3")),
    ]


def test_the_next_group_is_checked_against_every_claim_the_pool_still_counts() -> None:
    """`cpu: 42`, with this c.8 counting 10 cpu and this c.4 18: the pool counts 42 cpu, 34 once
    group a is repacked (32 of group a given back, 24 counted again). Group c's packing would
    count 19 cpu in place of 10: 43, over the limit, so its greedy c.8 stays."""
    types = [
        *TWO_FAMILIES[:3],
        _with_capacity(TWO_FAMILIES[3], cpu=18),
        _with_capacity(TWO_FAMILIES[4], cpu=10),
    ]
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=42_000))

    result = run([*BATCH, *FAMILY_C], types, [pool])

    assert _claims(result) == [*BATCH_REPACKED, ("c.8", tuple(sorted(p.key for p in FAMILY_C)))]


def test_a_pod_on_an_existing_node_stays_there_when_the_new_claims_are_repacked() -> None:
    """An existing 1-cpu node takes the 0.5-cpu pod; the four 1.2-cpu pods' greedy large are
    repacked on an xlarge and a large. The placement on the node is still in the plan."""
    node = Node("n1", {LABEL_ZONE: "zone-a"}, allocatable=Resources(1000, 8 * GIB, 110))
    types = [instance_type("large", 2, 8, 0.10), instance_type("xlarge", 4, 16, 0.25)]
    webs = [pod(f"web-{i}", 1.2, 1) for i in range(4)]

    result = run([*webs, pod("tiny", 0.5, 1)], types, nodes=(node,))

    assert [(p.node, p.pods) for p in result.existing_placements] == [("n1", ("default/tiny",))]
    assert result.total_price_per_hour == pytest.approx(0.35)


# Which pods the repacking may move: those that only need room.
LARGE_XLARGE = [instance_type("large", 2, 8, 0.10), instance_type("xlarge", 4, 16, 0.25)]
WEBS = [pod(f"web-{i}", 1.2, 1) for i in range(4)]


def test_pods_that_only_need_room_are_repacked_beside_a_class_that_is_not() -> None:
    """A 3.9-cpu agent binding a host port (its own xlarge, left alone) sorts before the webs;
    the webs' four greedy large are still repacked on an xlarge and a large."""
    agent = pod("agent", 3.9, 1, host_ports=(HostPort(9100),))

    result = run([agent, *WEBS], LARGE_XLARGE)

    assert _claims(result) == [
        ("large", ("default/web-0",)),
        ("xlarge", ("default/agent",)),
        ("xlarge", ("default/web-1", "default/web-2", "default/web-3")),
    ]


def test_pods_with_a_node_preference_keep_their_greedy_claims() -> None:
    """Pods preferring zone-b are not ones that only need room (module docstring: no
    preference): their four greedy large in zone-b stay, though an xlarge and a large would
    cost less."""
    prefer_b = PreferredNodeAffinityTerm(1, (Requirement(LABEL_ZONE, Operator.IN, ("zone-b",)),))
    pods = [pod(f"web-{i}", 1.2, 1, preferred_node_affinity=(prefer_b,)) for i in range(4)]

    result = run(pods, LARGE_XLARGE)

    assert _claims(result) == [("large", (p.key,)) for p in pods]
    assert {c.offerings[0].zone for c in result.new_claims} == {"zone-b"}


# Pods left waiting on a limit: `memory: 8Gi`, 1.1 GiB pods. The greedy pass buys one-pod 2 GiB
# m1 and stops at four; one 8 GiB m4 holds seven within the limit, the eighth waits.
M_TYPES = [instance_type("m1", 1, 2, 0.02), instance_type("m4", 2, 8, 0.10)]
M_POOL = NodePool("default", limits=NodePoolLimits(memory_bytes=8 * GIB))
M_PODS = [pod(f"p{i}", 0.1, 1.1) for i in range(8)]
SEVEN_ON_M4 = [("m4", tuple(f"default/p{i}" for i in range(7)))]


def test_limit_bound_pods_are_packed_again_past_a_pod_that_fits_nowhere() -> None:
    """A 100-cpu pod binding a host port fits no type and waits first (largest first); the
    pods the limit left waiting behind it are still packed again within the limit."""
    huge = pod("huge", 100, 1, host_ports=(HostPort(9100),))

    result = run([huge, *M_PODS], M_TYPES, [M_POOL])

    assert _claims(result) == SEVEN_ON_M4
    assert sorted(u.pod for u in result.unschedulable) == ["default/huge", "default/p7"]


def test_limit_bound_pods_refused_first_by_a_heavier_pool_for_another_reason() -> None:
    """A heavier NodePool with a taint the pods do not tolerate refuses them first; the limit
    they reached is the lighter pool's, and they are packed again within it."""
    tainted = NodePool("gpu", taints=(Taint("gpu", TaintEffect.NO_SCHEDULE, "true"),), weight=10)

    result = run(M_PODS, M_TYPES, [tainted, M_POOL])

    assert _claims(result) == SEVEN_ON_M4
    assert [u.pod for u in result.unschedulable] == ["default/p7"]
