"""A new claim for a pod with a zone- or capacity-type-keyed term (pod affinity, anti-affinity)
is pinned to one value of the key (``Packing._topology_copies``). When every value allows the
pod alike, the claim goes where its instance type is cheapest, not to the first value by name:
t costs $0.20 in zone-a and $0.10 in zone-b; s costs $0.10 on-demand and $0.04 on spot."""

from __future__ import annotations

from scheduler_svc.core import (
    InstanceType,
    LabelSelector,
    NodePool,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, priced_type, run

_SHAPE = Resources(4000, 16 * GIB, 110, 20 * GIB)
T = InstanceType(
    "t",
    _SHAPE,
    _SHAPE,
    {"kubernetes.io/arch": "amd64"},
    (Offering("zone-a", "on-demand", 0.20), Offering("zone-b", "on-demand", 0.10)),
)
S = instance_type("s", 4, 16, 0.10, spot_price=0.04)
APP = LabelSelector.of({"app": "x"})


def _pod(**terms: tuple[PodAffinityTerm, ...]) -> Pod:
    return pod("x-0", 1, 1, labels={"app": "x"}, **terms)


def test_zone_anti_affinity_pod_goes_to_the_cheaper_zone() -> None:
    """One pod with zone anti-affinity against its own app: either zone allows it, so its
    claim is pinned to zone-b, where t costs $0.10, not to zone-a at $0.20."""
    result = run([_pod(pod_anti_affinity=(PodAffinityTerm(LABEL_ZONE, APP),))], [T])
    [claim] = result.new_claims
    assert [(o.zone, o.price_per_hour) for o in claim.offerings] == [("zone-b", 0.10)]


def test_first_pod_of_a_zone_affinity_goes_to_the_cheaper_zone() -> None:
    """The first pod of an app with zone affinity to itself may open any zone: zone-b, where
    t is cheaper."""
    result = run([_pod(pod_affinity=(PodAffinityTerm(LABEL_ZONE, APP),))], [T])
    [claim] = result.new_claims
    assert claim.offerings[0].zone == "zone-b"
    assert claim.offerings[0].price_per_hour == 0.10


def test_capacity_type_anti_affinity_pod_goes_to_spot_when_cheaper() -> None:
    """One pod with anti-affinity on the capacity type: spot and on-demand allow it alike, so
    its claim is pinned to spot ($0.04), not to on-demand ($0.10, first by name)."""
    result = run([_pod(pod_anti_affinity=(PodAffinityTerm(LABEL_CAPACITY_TYPE, APP),))], [S])
    [claim] = result.new_claims
    assert {o.capacity_type for o in claim.offerings} == {"spot"}
    assert claim.offerings[0].price_per_hour == 0.04


def test_zone_is_priced_on_the_capacity_types_the_pool_allows() -> None:
    """An on-demand NodePool: zone-a's cheap spot offering does not count, so the pod with
    zone anti-affinity goes to zone-b, where on-demand costs $0.10 (zone-a's is $0.20)."""
    cheap_spot_in_a = priced_type(
        "u",
        ("zone-a", "on-demand", 0.20),
        ("zone-a", "spot", 0.05),
        ("zone-b", "on-demand", 0.10),
    )
    on_demand = NodePool(
        "default", requirements=(Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("on-demand",)),)
    )
    anti = _pod(pod_anti_affinity=(PodAffinityTerm(LABEL_ZONE, APP),))
    result = run([anti], [cheap_spot_in_a], [on_demand])
    [claim] = result.new_claims
    assert [(o.zone, o.capacity_type, o.price_per_hour) for o in claim.offerings] == [
        ("zone-b", "on-demand", 0.10)
    ]


def test_capacity_type_is_priced_in_the_zones_the_pool_allows() -> None:
    """A NodePool in zone-a only: zone-b's cheap spot does not count, so the pod with
    anti-affinity on the capacity type goes on-demand ($0.10), not to zone-a's spot ($0.15)."""
    cheap_spot_in_b = priced_type(
        "v",
        ("zone-a", "on-demand", 0.10),
        ("zone-a", "spot", 0.15),
        ("zone-b", "spot", 0.04),
    )
    zone_a = NodePool("default", requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-a",)),))
    anti = _pod(pod_anti_affinity=(PodAffinityTerm(LABEL_CAPACITY_TYPE, APP),))
    result = run([anti], [cheap_spot_in_b], [zone_a])
    [claim] = result.new_claims
    assert [(o.zone, o.capacity_type, o.price_per_hour) for o in claim.offerings] == [
        ("zone-a", "on-demand", 0.10)
    ]
