"""NodeOverlays change prices and add extended resources before the solver sees the catalog,
with Karpenter's precedence (weight, then name; the first price wins, overlays do not stack)."""

from __future__ import annotations

import pytest

from scheduler_svc.core import Operator, Requirement, Resources
from scheduler_svc.core.overlay import (
    NodeOverlay,
    OverlayError,
    PriceAdjustment,
    apply_overlays,
    by_precedence,
    overlay_conflicts,
    overlay_effects,
)

from .builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
M5 = Requirement(FAMILY, Operator.IN, ("m5",))
SPOT = Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",))


def catalog() -> list:  # type: ignore[type-arg]
    return [
        instance_type("m5.large", 2, 8, 0.096, spot_price=0.04, labels={FAMILY: "m5"}),
        instance_type("c5.large", 2, 4, 0.085, labels={FAMILY: "c5"}),
    ]


def prices(types: tuple, name: str) -> set[tuple[str, float]]:  # type: ignore[type-arg]
    (chosen,) = [t for t in types if t.name == name]
    return {(o.capacity_type, o.price_per_hour) for o in chosen.offerings}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [("-30%", 0.1, 0.07), ("+10%", 0.1, 0.11), ("+0.01", 0.1, 0.11), ("-0.5", 0.1, 0.0)],
)
def test_price_adjustments(text: str, before: float, after: float) -> None:
    """Percentages scale, amounts add, and a price never drops below zero."""
    assert PriceAdjustment.parse(text).apply(before) == pytest.approx(after)


@pytest.mark.parametrize("text", ["30%", "-150%", "cheap", "+"])
def test_bad_price_adjustments(text: str) -> None:
    """An unsigned, sub -100 % or non-numeric adjustment is refused with a reason."""
    with pytest.raises(OverlayError):
        PriceAdjustment.parse(text)


def test_an_overlay_with_price_and_adjustment_is_refused() -> None:
    with pytest.raises(OverlayError, match="not both"):
        NodeOverlay("x", price=0.1, price_adjustment=PriceAdjustment(-30, percent=True))


def test_an_overlay_may_not_change_base_resources() -> None:
    with pytest.raises(OverlayError, match="extended resources only"):
        NodeOverlay("x", capacity=(("cpu", 2000),))


def test_adjustment_applies_to_matching_types_only() -> None:
    """An m5 overlay reprices every m5 offering and leaves c5 alone."""
    overlay = NodeOverlay("sp", (M5,), price_adjustment=PriceAdjustment.parse("-50%"))
    types = apply_overlays(catalog(), [overlay])
    assert prices(types, "m5.large") == {("on-demand", 0.048), ("spot", 0.02)}
    assert prices(types, "c5.large") == {("on-demand", 0.085)}


def test_offering_requirements_select_offerings() -> None:
    """A capacity-type requirement reprices only those offerings of the type."""
    overlay = NodeOverlay("spot-tax", (SPOT,), price=1.0)
    types = apply_overlays(catalog(), [overlay])
    assert prices(types, "m5.large") == {("on-demand", 0.096), ("spot", 1.0)}


def test_higher_weight_wins_and_prices_do_not_stack() -> None:
    """Two overlays on one offering: the heavier one's price, not both; equal weights: the
    name later in the alphabet (Karpenter's OrderByWeight)."""
    light = NodeOverlay("a-light", (M5,), price_adjustment=PriceAdjustment.parse("-50%"), weight=1)
    heavy = NodeOverlay("b-heavy", (M5,), price=0.2, weight=5)
    assert prices(apply_overlays(catalog(), [light, heavy]), "m5.large") == {
        ("on-demand", 0.2),
        ("spot", 0.2),
    }
    tie_a = NodeOverlay("aaa", (M5,), price=0.3)
    tie_z = NodeOverlay("zzz", (M5,), price=0.4)
    assert [o.name for o in by_precedence([tie_a, tie_z])] == ["zzz", "aaa"]
    assert prices(apply_overlays(catalog(), [tie_a, tie_z]), "m5.large") == {
        ("on-demand", 0.4),
        ("spot", 0.4),
    }


def test_capacity_merges_across_overlays() -> None:
    """Each extended resource comes from the heaviest overlay naming it; different resources
    from different overlays all apply, to capacity and allocatable alike."""
    fuse = NodeOverlay("fuse", (M5,), capacity=(("smarter-devices/fuse", 1),), weight=1)
    more = NodeOverlay(
        "more", (M5,), capacity=(("smarter-devices/fuse", 4), ("example.com/dongle", 2)), weight=9
    )
    (m5, c5) = apply_overlays(catalog(), [fuse, more])
    assert dict(m5.allocatable.extended) == {"smarter-devices/fuse": 4, "example.com/dongle": 2}
    assert dict(m5.capacity.extended) == dict(m5.allocatable.extended)
    assert c5.allocatable.extended == ()
    effect = overlay_effects(catalog(), [fuse, more])["m5.large"]
    assert effect.overlays == ("more",)


def test_no_overlays_hands_back_the_same_catalog() -> None:
    types = tuple(catalog())
    assert apply_overlays(types, []) is types


def test_the_solver_picks_the_type_an_overlay_made_cheaper() -> None:
    """Without an overlay the cheaper c5 wins; a Savings Plan on m5 turns the choice."""
    pods = [pod("p", cpu=1, memory_gib=1)]
    on_demand = [
        instance_type("m5.large", 2, 8, 0.096, labels={FAMILY: "m5"}),
        instance_type("c5.large", 2, 4, 0.085, labels={FAMILY: "c5"}),
    ]
    assert run(pods, on_demand).new_claims[0].instance_type == "c5.large"
    overlay = NodeOverlay("sp", (M5,), price_adjustment=PriceAdjustment.parse("-30%"))
    result = run(pods, apply_overlays(on_demand, [overlay]))
    assert result.new_claims[0].instance_type == "m5.large"
    assert result.new_claims[0].price_per_hour == pytest.approx(0.0672)


def test_a_pod_needing_an_overlay_resource_is_schedulable_only_with_it() -> None:
    """A pod requesting smarter-devices/fuse fits no type until an overlay adds it."""
    fuse_pod = pod("fuse").__class__(
        "fuse", containers=(Resources(cpu_millis=500, extended=(("smarter-devices/fuse", 1),)),)
    )
    assert run([fuse_pod], catalog()).unschedulable
    overlay = NodeOverlay("fuse", (M5,), capacity=(("smarter-devices/fuse", 1),))
    result = run([fuse_pod], apply_overlays(catalog(), [overlay]))
    assert [c.instance_type for c in result.new_claims] == ["m5.large"]


C5 = Requirement(FAMILY, Operator.IN, ("c5",))


def test_equal_weights_pricing_one_offering_differently_conflict_and_one_is_left_out() -> None:
    """Karpenter's conflict: same weight, one offering, two prices. The overlay first in
    precedence (the later name) applies; the other is left out whole, also on the types only
    it selects (c5 keeps its catalog price)."""
    first = NodeOverlay("zz-savings", (M5,), price_adjustment=PriceAdjustment.parse("-30%"))
    loser = NodeOverlay("aa-flat", (), price=0.05)  # every type: m5 (conflict) and c5
    conflicts = overlay_conflicts(catalog(), [first, loser])
    assert list(conflicts) == ["aa-flat"]
    assert "NodeOverlay zz-savings (weight 0)" in conflicts["aa-flat"]
    assert "price 0.05 against priceAdjustment -30%" in conflicts["aa-flat"]
    types = apply_overlays(catalog(), [first, loser])
    assert prices(types, "m5.large") == {("on-demand", 0.0672), ("spot", 0.028)}
    assert prices(types, "c5.large") == {("on-demand", 0.085)}


def test_no_conflict_across_weights_disjoint_types_or_equal_values() -> None:
    heavy = NodeOverlay("heavy", (M5,), price=0.2, weight=5)
    light = NodeOverlay("light", (M5,), price=0.1, weight=1)
    m5 = NodeOverlay("m5", (M5,), price=0.2, weight=1)
    c5 = NodeOverlay("c5", (C5,), price=0.3, weight=1)
    same = NodeOverlay("same", (M5,), price=0.2, weight=5)
    assert overlay_conflicts(catalog(), [heavy, light]) == {}
    assert overlay_conflicts(catalog(), [m5, c5]) == {}
    assert overlay_conflicts(catalog(), [heavy, same]) == {}


def test_extended_resources_of_different_amounts_conflict_at_equal_weight() -> None:
    one = NodeOverlay("one", (M5,), capacity=(("smarter-devices/fuse", 1),))
    two = NodeOverlay("two", (), capacity=(("smarter-devices/fuse", 2),))
    other = NodeOverlay("other", (M5,), capacity=(("example.com/dongle", 1),))
    conflicts = overlay_conflicts(catalog(), [one, two, other])
    assert list(conflicts) == ["one"]  # "two" comes first (later name)
    assert "smarter-devices/fuse 1 against 2 on m5.large" in conflicts["one"]
