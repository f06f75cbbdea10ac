"""The price floor that spares a merge its simulation, at its edges: the free room of every
staying node summed, each resource's shortfall priced on its own, a shortfall of one unit or
none, a resource no pod asks for; and the catalog it prices, as the NodePools may launch it
(by zone, by a type's label, past a requirement on a key it cannot judge)."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_svc.core import NodePool, Pod, Resources
from scheduler_svc.core.disruption import CandidatePod, plan_disruption
from scheduler_svc.core.disruption.multi_node import (
    admitted_types,
    capacity_price_floor,
    could_fit,
    free_room,
    types_holding,
)
from scheduler_svc.core.requirements import LABEL_ZONE, Operator, Requirement
from tests.scheduler_svc.core.builders import GIB, MIB, instance_type
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    snapshot,
)

# 2 CPUs and 4 GiB for $0.20/h: $0.0001/h a millicore, $0.05/h a GiB.
TWO_BY_FOUR = instance_type("t.large", 2.0, 4.0, 0.20)
PER_MILLI = 0.20 / 2000
PER_MIB = 0.20 / 4096
FAMILY = "karpenter.k8s.aws/instance-family"


def mixed_cpu_pods() -> list[Pod]:
    """1,500m and 1,024 MiB in two shapes (so no whole-pod floor applies)."""
    return [app_pod("a", 1000, 512), app_pod("b", 500, 512)]


def room(cpu_millis: int, memory_mib: int) -> dict[str, int]:
    """A staying node's free room, with slots for 100 more pods."""
    return {"cpu": cpu_millis, "memory": memory_mib * MIB, "pods": 100}


def test_the_free_room_of_every_staying_node_is_summed() -> None:
    """Two staying nodes with 200m each leave a 1,100m shortfall (memory: 824 MiB, cheaper)."""
    rooms = [room(200, 100), room(200, 100)]
    floor = capacity_price_floor(mixed_cpu_pods(), [TWO_BY_FOUR], rooms, 4)
    assert floor == pytest.approx(1100 * PER_MILLI)


def test_with_no_room_staying_the_whole_request_is_priced() -> None:
    assert capacity_price_floor(mixed_cpu_pods(), [TWO_BY_FOUR], [], 4) == pytest.approx(
        1500 * PER_MILLI
    )


def test_a_memory_shortfall_is_priced_per_memory() -> None:
    """Five GiB asked with little cpu: memory sets the floor ($0.25/h, not $0.0384/h)."""
    pods = [app_pod("a", 256, 3072), app_pod("b", 128, 2048)]
    floor = capacity_price_floor(pods, [TWO_BY_FOUR], [], 4)
    assert floor == pytest.approx(5120 * PER_MIB)


def test_a_shortfall_of_one_millicore_still_costs_something() -> None:
    rooms = [room(1499, 4096)]
    floor = capacity_price_floor(mixed_cpu_pods(), [TWO_BY_FOUR], rooms, 4)
    assert floor == pytest.approx(PER_MILLI)


def test_pods_the_staying_room_holds_exactly_need_no_new_node() -> None:
    """No shortfall: the floor is 0 even with nothing left to launch."""
    assert capacity_price_floor(mixed_cpu_pods(), [], [room(1500, 1024)], 4) == 0.0


def test_pods_asking_no_memory_are_priced_on_cpu() -> None:
    pods = [app_pod("a", 1000, 0), app_pod("b", 500, 0)]
    floor = capacity_price_floor(pods, [TWO_BY_FOUR], [], 4)
    assert floor == pytest.approx(1500 * PER_MILLI)


def test_a_zone_requirement_keeps_only_that_zones_offerings() -> None:
    """A NodePool pinned to zone-a may launch each type only there: every type stays, with its
    zone-a offerings alone."""
    pinned = NodePool("a", requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-a",)),))
    (admitted,) = admitted_types([TWO_BY_FOUR], [pinned])
    assert admitted.name == "t.large"
    assert [o.zone for o in admitted.offerings] == ["zone-a"]
    assert admitted.allocatable == TWO_BY_FOUR.allocatable


def test_a_label_requirement_is_judged_on_each_types_labels() -> None:
    c4 = instance_type("c4.large", 1.93, 3.0, 0.10, labels={FAMILY: "c4"})
    m5 = instance_type("m5.large", 1.93, 7.5, 0.096, labels={FAMILY: "m5"})
    only_c4 = NodePool("c4", requirements=(Requirement(FAMILY, Operator.IN, ("c4",)),))
    assert admitted_types([c4, m5], [only_c4]) == (c4,)


def test_a_requirement_on_a_key_no_type_defines_leaves_the_others_judged() -> None:
    """A key the floor cannot judge (``example.com/team``) is left to the solver; the zone
    requirement after it still narrows the offerings."""
    team_then_zone = NodePool(
        "team",
        requirements=(
            Requirement("example.com/team", Operator.EXISTS, ()),
            Requirement(LABEL_ZONE, Operator.IN, ("zone-b",)),
        ),
    )
    (admitted,) = admitted_types([TWO_BY_FOUR], [team_then_zone])
    assert [o.zone for o in admitted.offerings] == ["zone-b"]


def test_pods_asking_neither_cpu_nor_memory_set_no_floor() -> None:
    """Two shapes asking only ephemeral storage: nothing the floor prices is short."""
    pods = [
        Pod("a", containers=(Resources(ephemeral_storage_bytes=GIB),)),
        Pod("b", containers=(Resources(ephemeral_storage_bytes=2 * GIB),)),
    ]
    assert capacity_price_floor(pods, [TWO_BY_FOUR], [], 4) == 0.0


def test_two_full_nodes_no_single_node_can_hold_are_not_simulated() -> None:
    """Two c4.2xlarge of seven 1-CPU pods each, in a catalog of c4.2xlarge alone: fewer nodes
    means one, and one holds seven pods, not fourteen, so the merge is refused unsimulated."""
    full = [
        candidate(
            f"n{i}",
            "c4.2xlarge",
            tuple(CandidatePod(app_pod(f"p{i}-{j}", 1000)) for j in range(7)),
        )
        for i in range(2)
    ]
    only_2xlarge = [t for t in CATALOG if t.name == "c4.2xlarge"]
    plan = plan_disruption(snapshot(full, [consolidating()], only_2xlarge), at(600))
    assert plan.decisions == ()
    assert blocked_messages(plan)["n0"].endswith(
        "(2: would cost more: no node saving 10% on $0.7960/h has room for the pods of 2 nodes "
        "(nor do 1))"
    )


def one_cpu_pods(count: int) -> list[Pod]:
    return [app_pod(f"p{i}", 1000) for i in range(count)]


def test_whole_pods_the_staying_room_takes_are_not_priced() -> None:
    """Five 1-CPU pods, a staying node with room for two whole ones: three are priced, each at
    a t.large's price for the two it holds."""
    rooms = [room(2500, 4096)]
    assert capacity_price_floor(one_cpu_pods(5), [TWO_BY_FOUR], rooms, 4) == pytest.approx(
        3 * 0.20 / 2
    )


def test_one_whole_pod_left_over_is_priced() -> None:
    """Three 1.2-CPU pods, room for two: the third needs a t.large of its own ($0.20/h), more
    than its 1,200m priced per millicore ($0.12/h)."""
    pods = [app_pod(f"p{i}", 1200) for i in range(3)]
    rooms = [room(2400, 4096)]
    assert capacity_price_floor(pods, [TWO_BY_FOUR], rooms, 4) == pytest.approx(0.20)


def test_pods_of_one_shape_the_staying_room_holds_need_nothing_launchable() -> None:
    assert capacity_price_floor(one_cpu_pods(2), [], [room(2000, 4096)], 4) == 0.0


def test_a_types_pod_limit_caps_the_whole_pods_it_holds() -> None:
    """Eight CPUs but room for two pods (maxPods): two 1-CPU pods a node, not eight."""
    capped = instance_type("capped.2xlarge", 8.0, 32.0, 0.40, pods=2)
    assert capacity_price_floor(one_cpu_pods(4), [capped], [], 4) == pytest.approx(0.80)


def test_a_staying_node_without_the_pods_extended_resource_takes_none_of_them() -> None:
    """GPU pods: the staying node has cpu and memory to spare but no GPU, so both are priced."""
    gpu_pods = [
        Pod(f"g{i}", containers=(Resources(500, 512 * MIB, extended=(("nvidia.com/gpu", 1),)),))
        for i in range(2)
    ]
    gpu_type = instance_type("g4dn.xlarge", 4.0, 16.0, 0.526, gpus=1)
    floor = capacity_price_floor(gpu_pods, [gpu_type], [room(8000, 32768)], 4)
    assert floor == pytest.approx(2 * 0.526)


def test_a_memory_shortfall_counts_when_cpu_has_room() -> None:
    """The staying room has all the cpu but no memory: memory is still priced."""
    rooms = [room(4000, 0)]
    floor = capacity_price_floor(mixed_cpu_pods(), [TWO_BY_FOUR], rooms, 4)
    assert floor == pytest.approx(1024 * PER_MIB)


def test_types_without_offerings_or_without_the_resource_are_not_priced() -> None:
    """A type the NodePools may no longer launch (no offerings) and one with no memory to give
    set no price; a type with a single millicore still counts, however small."""
    gone = dataclasses.replace(TWO_BY_FOUR, name="gone", offerings=())
    no_memory = instance_type("cpu.only", 64.0, 0.0, 0.01)
    floor = capacity_price_floor(mixed_cpu_pods(), [gone, no_memory, TWO_BY_FOUR], [], 4)
    assert floor == pytest.approx(max(1500 * 0.01 / 64000, 1024 * PER_MIB))
    tiny = instance_type("tiny", 0.001, 4.0, 0.20)
    assert capacity_price_floor(mixed_cpu_pods(), [tiny], [], 2000) == pytest.approx(1500 * 0.20)


def test_a_shortfall_the_allowed_nodes_hold_exactly_is_priced_not_refused() -> None:
    """1,500m short with at most one new node of 1,500m: it fits exactly, so the floor is
    finite."""
    exact = instance_type("exact", 1.5, 4.0, 0.15)
    assert capacity_price_floor(mixed_cpu_pods(), [exact], [], 1) == pytest.approx(0.15)


def test_a_type_too_small_for_one_pod_is_left_out_of_the_whole_pods_floor() -> None:
    """A 1.9-CPU type holds no whole 2-CPU pod, however cheap: the 4-CPU type prices the two
    pods, two to a node."""
    small = instance_type("small", 1.9, 4.0, 0.01)
    big = instance_type("big", 4.0, 16.0, 0.40)
    pods = [app_pod(f"p{i}", 2000) for i in range(2)]
    assert capacity_price_floor(pods, [small, big], [], 4) == pytest.approx(0.40)


def test_a_type_holds_pods_that_fill_it_exactly_but_not_a_resource_it_lacks() -> None:
    """types_holding: 2,000m on a 2-CPU type fits (to the millicore); a GPU pod fits only the
    type with a GPU."""
    exact = [app_pod("a", 1000), app_pod("b", 1000)]
    assert types_holding(exact, [TWO_BY_FOUR]) == (TWO_BY_FOUR,)
    gpu_pod = Pod("g", containers=(Resources(500, 512 * MIB, extended=(("nvidia.com/gpu", 1),)),))
    gpu_type = instance_type("g4dn.xlarge", 4.0, 16.0, 0.526, gpus=1)
    assert types_holding([gpu_pod], [TWO_BY_FOUR, gpu_type]) == (gpu_type,)


def test_a_merge_refused_on_its_floor_states_the_floor() -> None:
    """Three c4.large of one 1-CPU pod ($0.30/h) and one cheaper type, x.large, holding two
    such pods for $0.19/h: no cheaper node holds all three, and two x.large would cost at least
    $0.285/h, short of a 10 % saving. Refused unsimulated, the floor stated."""
    x_large = instance_type("x.large", 2.0, 8.0, 0.19)
    nodes = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1000)),)) for i in range(3)
    ]
    plan = plan_disruption(snapshot(nodes, [consolidating()], [x_large]), at(600))
    assert plan.decisions == ()
    assert blocked_messages(plan)["n0"].endswith(
        "(3: would cost more: no node saving 10% on $0.3000/h has room for the pods of 3 nodes "
        "(fewer would cost at least $0.2850/h))"
    )


def test_a_full_resource_leaves_no_room_and_an_unused_one_all_of_it() -> None:
    """free_room: a node whose pods take all its cpu has 0 cpu left (not 1), and its GPU,
    which no pod asks for, is wholly free."""
    node = candidate(
        "full",
        "c4.large",
        (CandidatePod(app_pod("p", 1930)),),
    ).to_node()
    gpu_node = dataclasses.replace(
        node, allocatable=dataclasses.replace(node.allocatable, extended=(("nvidia.com/gpu", 1),))
    )
    left = free_room(gpu_node)
    assert left["cpu"] == 0
    assert left["nvidia.com/gpu"] == 1


def test_the_staying_room_takes_pods_that_fill_it_exactly_but_not_a_resource_it_lacks() -> None:
    """could_fit sums the staying rooms: 1,000m + 500m take 1,500m exactly; a GPU pod needs a
    room with a GPU, whatever cpu is free."""
    assert could_fit(mixed_cpu_pods(), [room(1000, 512), room(500, 512)])
    assert not could_fit(mixed_cpu_pods(), [room(1000, 512), room(499, 512)])
    gpu_pod = Pod("g", containers=(Resources(500, 512 * MIB, extended=(("nvidia.com/gpu", 1),)),))
    assert not could_fit([gpu_pod], [room(8000, 32768)])
