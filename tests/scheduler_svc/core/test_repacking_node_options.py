"""The node options the repacking prices (``Repacking._node_options``, ``Repacking._repack``):
only the types a claim of the group may be, each at its cheapest offering in the claim's
zones and capacity types, with room for pods net of the DaemonSets, reserved offerings left
out; and a saving must be more than a rounding error. Each case checks the plan against what
the greedy claims would have cost, so a wrongly priced option shows as a dearer plan or as a
claim of a type the pods may not run on."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_svc.core import (
    InstanceType,
    NodePool,
    Offering,
    Operator,
    Pod,
    Requirement,
    SchedulingInput,
    SchedulingResult,
    solve,
)
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from scheduler_svc.core.reservations import CapacityReservation, with_reserved_offerings
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"


def _claims(result: SchedulingResult) -> list[tuple[str, str, tuple[str, ...]]]:
    """(type, capacity type, pods) of each claim's first offering, in a stable order."""
    return sorted(
        (c.instance_type, c.offerings[0].capacity_type, tuple(sorted(c.pods)))
        for c in result.new_claims
    )


def _greedy(
    pods: list[Pod], types: list[InstanceType] | tuple[InstanceType, ...], pool: NodePool
) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (pool,), tuple(types))
    return solve(problem, packing=PackingSettings(max_pods=0))


# The usual case for a second opinion: per cpu the 2-cpu large ($0.10) is cheapest, so the
# greedy pass gives each 1.2-cpu pod a large of its own ($0.40/h for four), where an xlarge
# holds three of them.
WEBS = [pod(f"web-{i}", 1.2, 1) for i in range(4)]


def test_pods_selecting_a_family_are_repacked_onto_that_family_only() -> None:
    """The pods select family a. b.2xlarge ($0.30) would hold all four for less than any
    packing of a types, but no claim of theirs may be a b type: the new claims are
    a.xlarge (three pods) and a.large (one), $0.35/h against the greedy claims' $0.40/h."""
    types = [
        instance_type("a.large", 2, 8, 0.10, labels={FAMILY: "a"}),
        instance_type("a.xlarge", 4, 16, 0.25, labels={FAMILY: "a"}),
        instance_type("b.2xlarge", 8, 32, 0.30, labels={FAMILY: "b"}),
    ]
    pods = [pod(f"web-{i}", 1.2, 1, node_selector={FAMILY: "a"}) for i in range(4)]

    result = run(pods, types)

    assert _claims(result) == [
        ("a.large", "on-demand", ("default/web-0",)),
        ("a.xlarge", "on-demand", ("default/web-1", "default/web-2", "default/web-3")),
    ]
    assert result.total_price_per_hour == pytest.approx(0.35)
    assert _greedy(pods, types, NodePool("default")).total_price_per_hour == pytest.approx(0.40)


def test_a_type_is_priced_in_the_zone_the_pods_asked_for() -> None:
    """The pods ask for zone-a, where an xlarge costs $0.45 ($0.20 in zone-b). Priced in
    zone-a, an xlarge and a large cost $0.55/h, more than the four greedy large ($0.40/h), so
    the greedy claims stay; priced at zone-b's $0.20 the program would have taken them."""
    xlarge = instance_type("xlarge", 4, 16, 0.25)
    xlarge = dataclasses.replace(
        xlarge,
        offerings=(Offering("zone-a", "on-demand", 0.45), Offering("zone-b", "on-demand", 0.20)),
    )
    types = [instance_type("large", 2, 8, 0.10), xlarge]
    pods = [pod(f"web-{i}", 1.2, 1, node_selector={LABEL_ZONE: "zone-a"}) for i in range(4)]

    result = run(pods, types)

    assert [c.instance_type for c in result.new_claims] == ["large"] * 4
    assert {c.offerings[0].zone for c in result.new_claims} == {"zone-a"}
    assert result.total_price_per_hour == pytest.approx(0.40)


def test_a_type_is_priced_in_the_capacity_types_the_pool_allows() -> None:
    """An on-demand NodePool: the xlarge's spot price ($0.20) is not one it may pay. At its
    on-demand $0.45, an xlarge and a large cost more than the four greedy large, which stay."""
    types = [
        instance_type("large", 2, 8, 0.10),
        instance_type("xlarge", 4, 16, 0.45, spot_price=0.2),
    ]
    pool = NodePool("default", (Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),))

    result = run(WEBS, types, [pool])

    assert _claims(result) == [("large", "on-demand", (p.key,)) for p in WEBS]
    assert result.total_price_per_hour == pytest.approx(0.40)


def test_the_daemonset_overhead_is_room_the_pods_do_not_get() -> None:
    """A 0.5-cpu DaemonSet on every node: a large (2 cpu) holds one 1.1-cpu pod, an xlarge
    (4 cpu, 3.5 for pods) three. The greedy pass buys four large ($0.40/h); the program, counting
    the overhead, buys an xlarge with three pods and a large with one ($0.35/h), and each claim
    asks for its pods and one DaemonSet pod, within its type."""
    types = [instance_type("large", 2, 8, 0.10), instance_type("xlarge", 4, 16, 0.25)]
    pods = [pod(f"web-{i}", 1.1, 1) for i in range(4)]

    result = run(pods, types, daemonsets=(pod("agent", 0.5, 0.5),))

    assert _claims(result) == [
        ("large", "on-demand", ("default/web-0",)),
        ("xlarge", "on-demand", ("default/web-1", "default/web-2", "default/web-3")),
    ]
    assert result.total_price_per_hour == pytest.approx(0.35)
    cpu = {c.instance_type: c.requests.cpu_millis for c in result.new_claims}
    assert cpu == {"large": 1600, "xlarge": 3800}


def test_a_free_type_is_a_free_node_to_the_program() -> None:
    """A 1-cpu type that costs nothing (say, covered elsewhere): the greedy pass fills the
    large of each 1.2-cpu pod with a 0.5-cpu pod ($0.50/h for four large); the program puts
    three big pods on an xlarge, one on a large and both small pods on the free node:
    $0.425/h."""
    types = [
        instance_type("free", 1, 4, 0.0),
        instance_type("large", 2, 8, 0.125),
        instance_type("xlarge", 4, 16, 0.3),
    ]
    pods = [
        *(pod(f"big-{i}", 1.2, 1) for i in range(4)),
        *(pod(f"small-{i}", 0.5, 1) for i in range(2)),
    ]

    result = run(pods, types)

    assert _claims(result) == [
        ("free", "on-demand", ("default/small-0", "default/small-1")),
        ("large", "on-demand", ("default/big-0",)),
        ("xlarge", "on-demand", ("default/big-1", "default/big-2", "default/big-3")),
    ]
    assert result.total_price_per_hour == pytest.approx(0.425)
    assert _greedy(pods, types, NodePool("default")).total_price_per_hour == pytest.approx(0.5)


# Reservations: r (2 cpu) has one reserved instance besides its on-demand offering; large and
# xlarge have spot offerings.
def _with_reservation(r_cpu: float, r_price: float) -> tuple[InstanceType, ...]:
    return with_reserved_offerings(
        (
            instance_type("a-r", r_cpu, 4 * r_cpu, r_price, zones=("zone-a",)),
            instance_type("large", 2, 8, 0.5, spot_price=0.125, zones=("zone-a",)),
            instance_type("xlarge", 4, 16, 1.0, spot_price=0.3, zones=("zone-a",)),
        ),
        [CapacityReservation("cr-r", "a-r", "zone-a", available=1, total=1)],
    )


def test_an_unused_reservation_is_not_priced_as_if_it_had_room_for_every_node() -> None:
    """r (1 cpu, $0.30 on-demand) has one reserved instance, which the greedy pass leaves
    unused: each 1.2-cpu pod's spot large ($0.125) takes a 0.5-cpu pod too, $0.50/h. The
    program cannot count reserved instances, so it does not price them: at the reserved price
    it would put the small pods on two r nodes, of which only one gets the reservation, and
    the plan would cost $0.55/h. The greedy claims stay."""
    types = _with_reservation(1, 0.30)
    pods = [
        *(pod(f"big-{i}", 1.2, 1) for i in range(4)),
        *(pod(f"small-{i}", 0.5, 1) for i in range(4)),
    ]

    result = run(pods, types)

    assert _claims(result) == [
        ("large", "spot", (f"default/big-{i}", f"default/small-{i}")) for i in range(4)
    ]
    assert result.total_price_per_hour == pytest.approx(0.5)


def test_first_fit_decreasing_leaves_out_types_priced_only_by_a_reservation() -> None:
    """A NodePool of spot and reserved capacity: r's only offering it may use is its reserved
    one, taken by the first greedy claim. Seven 1.2-cpu pods: the program and first-fit-
    decreasing pack six on two spot xlarge and the seventh on a claim of its own, which takes
    r's reservation again as it closes."""
    types = _with_reservation(2, 0.10)
    pool = NodePool(
        "default", (Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("spot", "reserved")),)
    )
    pods = [pod(f"web-{i}", 1.2, 1) for i in range(7)]

    result = run(pods, types, [pool])

    assert _claims(result) == [
        ("a-r", "reserved", ("default/web-0",)),
        ("xlarge", "spot", ("default/web-1", "default/web-2", "default/web-3")),
        ("xlarge", "spot", ("default/web-4", "default/web-5", "default/web-6")),
    ]
    assert result.new_claims[0].offerings[0].capacity_reservation_id == "cr-r"
    assert result.total_price_per_hour == pytest.approx(0.6, abs=1e-6)


# A saving of one _SAVING_EPSILON exactly: the greedy claims cost 4 x $0.125 = $0.5 (exact in
# binary), the xlarge is priced so that it and one large cost 0.5 - 1e-9 exactly.
XLARGE_AT_EPSILON = (0.5 - 1e-9) - 0.125


def test_a_saving_of_a_billionth_of_a_dollar_keeps_the_greedy_claims() -> None:
    """No churn for a rounding error: an xlarge (three pods) and a large save 1e-9 $/h against
    four large, which is no saving, so the greedy claims stay. (The program is not skipped:
    no packing's lower bound, 4/3 of the xlarge's price, reaches 0.5 - 1e-9.)"""
    assert XLARGE_AT_EPSILON + 0.125 == 0.5 - 1e-9
    types = [instance_type("large", 2, 8, 0.125), instance_type("xlarge", 4, 16, XLARGE_AT_EPSILON)]

    result = run(WEBS, types)

    assert [c.instance_type for c in result.new_claims] == ["large"] * 4


def test_a_saving_just_over_a_billionth_of_a_dollar_is_taken() -> None:
    """The contrast: the xlarge a picodollar cheaper, and the plan takes it."""
    types = [
        instance_type("large", 2, 8, 0.125),
        instance_type("xlarge", 4, 16, XLARGE_AT_EPSILON - 1e-12),
    ]

    result = run(WEBS, types)

    assert sorted(c.instance_type for c in result.new_claims) == ["large", "xlarge"]
