"""Pods left waiting on a NodePool limit, packed again within what the limits leave
(``Repacking._repack_within_limits``): the new packing is taken only when it places more pods
than the greedy claims held, counts memory limits in memory, and a pod it leaves out says
which limit its NodePool reached; otherwise the greedy claims get the usual cheaper-packing
second opinion."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_svc.core import NodePool, NodePoolLimits, SchedulingResult
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run


def _placed(result: SchedulingResult) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.instance_type, c.pods) for c in result.new_claims]


def _waiting(result: SchedulingResult) -> dict[str, str]:
    return {u.pod: u.reason for u in result.unschedulable}


def test_a_memory_limit_is_packed_within_on_fewer_larger_nodes() -> None:
    """`memory: 8Gi`, pods of 1.1 GiB: the greedy pass buys one-pod 2 GiB nodes (cheapest per
    pod) and stops at four; one 8 GiB node holds seven within the limit, the eighth waits."""
    types = [instance_type("m1", 1, 2, 0.02), instance_type("m4", 2, 8, 0.10)]
    pool = NodePool("default", limits=NodePoolLimits(memory_bytes=8 * GIB))

    result = run([pod(f"p{i}", 0.1, 1.1) for i in range(8)], types, [pool])

    assert [(kind, len(pods)) for kind, pods in _placed(result)] == [("m4", 7)]
    assert list(_waiting(result).values()) == ["NodePool default limit memory=8Gi reached"]


def test_a_placed_pod_left_out_waits_on_the_limit_its_class_reached() -> None:
    """`cpu: 4` on 4-cpu nodes: the greedy pass places one 3-cpu pod and one 1-cpu pod; four
    1-cpu pods fit instead. The 3-cpu pod it had placed waits, with the reason its class got
    when its other pods reached the limit."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=4000))
    big = [pod(f"big-{i}", 3, 1) for i in range(3)]
    small = [pod(f"small-{i}", 1, 1) for i in range(4)]

    result = run([*big, *small], [instance_type("c4", 4, 16, 0.20)], [pool])

    assert _placed(result) == [("c4", tuple(p.key for p in small))]
    assert _waiting(result) == {p.key: "NodePool default limit cpu=4 reached" for p in big}


def test_a_placed_pod_whose_class_met_no_limit_waits_on_its_nodepools_limit() -> None:
    """The same with a single 3-cpu pod: its class was never refused, so it waits with the
    NodePool's limit named in general terms."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=4000))
    small = [pod(f"small-{i}", 1, 1) for i in range(4)]

    result = run([pod("big", 3, 1), *small], [instance_type("c4", 4, 16, 0.20)], [pool])

    assert _placed(result) == [("c4", tuple(p.key for p in small))]
    assert _waiting(result) == {"default/big": "NodePool default limit reached"}


def test_a_packing_that_places_no_more_pods_leaves_the_greedy_claim() -> None:
    """`nodes: 1`: a 3.8-cpu pod's 4-cpu claim has no room for a 0.5-cpu pod. A cheap 1-cpu
    node for the small pod would place as many (one), so the big pod keeps its claim."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=1))
    types = [instance_type("c1", 1, 4, 0.05), instance_type("c4", 4, 16, 0.20)]

    result = run([pod("big", 3.8, 1), pod("small", 0.5, 1)], types, [pool])

    assert _placed(result) == [("c4", ("default/big",))]
    assert _waiting(result) == {"default/small": "NodePool default limit nodes=1 reached"}


def test_greedy_claims_at_a_limit_still_get_the_cheaper_packing_of_their_pods() -> None:
    """`cpu: 8`; xlarge counts 6 cpu against the limit (4 allocatable). The greedy pass buys
    four one-pod large ($0.40/h) and a fifth pod waits; no packing within 8 cpu places five, but
    an xlarge with three and a large with one cost $0.36/h and fit the limit."""
    large = instance_type("large", 2, 8, 0.10)
    xlarge = instance_type("xlarge", 4, 16, 0.26)
    xlarge = dataclasses.replace(
        xlarge, capacity=dataclasses.replace(xlarge.capacity, cpu_millis=6000)
    )
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=8000))

    result = run([pod(f"web-{i}", 1.2, 1) for i in range(5)], [large, xlarge], [pool])

    assert sorted(len(pods) for _, pods in _placed(result)) == [1, 3]
    assert result.total_price_per_hour == pytest.approx(0.36)
    assert list(_waiting(result).values()) == ["NodePool default limit cpu=8 reached"]
