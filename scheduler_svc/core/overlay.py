"""NodeOverlays (Karpenter v1.7 alpha): prices and extended resources the catalog does not know,
applied to the instance types before any solve. Pure: no I/O, no clock.

Semantics kept from Karpenter (``karpenter.sh/v1alpha1`` NodeOverlay):
- ``requirements`` select instance types by their labels plus each offering's zone and capacity
  type (an overlay on ``karpenter.sh/capacity-type In [spot]`` reprices only spot offerings);
  no requirements select every type;
- ``price`` replaces an offering's price, ``priceAdjustment`` changes it: ``"-30%"`` /
  ``"+10%"`` by a percentage, ``"+0.01"`` / ``"-0.5"`` by an amount (never below 0);
- ``capacity`` adds extended resources to capacity and allocatable (never cpu, memory, pods or
  ephemeral-storage);
- overlays are ordered by weight, higher first, equal weights by name in reverse alphabetical
  order (Karpenter's ``OrderByWeight``); for an offering's price the first matching overlay that
  sets one wins (overlays do not stack), for each extended resource the first overlay naming it;
- two overlays of the same weight conflict when they set one offering to different prices, or
  one instance type's extended resource to different amounts: the one that comes later in that
  order is left out whole (``overlay_conflicts``; Karpenter's validation controller marks it
  ``ValidationSucceeded=False``, reason ``Conflict``, and applies none of it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler_svc.core.model import InstanceType, Offering, Resources
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_ZONE,
    Requirement,
    Requirements,
)

#: Resources an overlay may not add: the instance type's own measurements.
BASE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


class OverlayError(ValueError):
    """A price adjustment that cannot be read (the message says what was expected)."""


@dataclass(frozen=True)
class PriceAdjustment:
    """``"-30%"`` (``percent``: the amount is a percentage) or ``"+0.01"`` (an amount)."""

    amount: float
    percent: bool

    @staticmethod
    def parse(text: str) -> PriceAdjustment:
        """``+10%``, ``-15%``, ``+0.5``, ``-1.2``: a sign is required, percentages of at
        least -100 %, as Karpenter's CRD pattern allows."""
        spoken = text.strip().replace(" ", "")
        percent = spoken.endswith("%")
        number = spoken[:-1] if percent else spoken
        if number[:1] not in ("+", "-"):
            raise OverlayError(f"{text!r}: expected a signed amount (+0.01, -0.5) or percentage")
        try:
            amount = float(number)
        except ValueError:
            raise OverlayError(f"{text!r}: expected a number such as +0.01 or -30%") from None
        if percent and amount < -100:
            raise OverlayError(f"{text!r}: a percentage cannot be below -100%")
        return PriceAdjustment(amount, percent)

    def apply(self, price: float) -> float:
        """The adjusted price (0 at the lowest)."""
        adjusted = price * (1 + self.amount / 100) if self.percent else price + self.amount
        return max(0.0, round(adjusted, 9))

    def describe(self) -> str:
        """``-30%`` / ``+0.01``."""
        return f"{self.amount:+g}%" if self.percent else f"{self.amount:+g}"


@dataclass(frozen=True)
class NodeOverlay:
    """One NodeOverlay: which types (``requirements``), their price (``price`` or
    ``price_adjustment``, at most one) and the extended resources they get (``capacity``)."""

    name: str
    requirements: tuple[Requirement, ...] = ()
    price: float | None = None
    price_adjustment: PriceAdjustment | None = None
    capacity: tuple[tuple[str, int], ...] = ()
    weight: int = 0
    _selector: Requirements = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.price is not None and self.price_adjustment is not None:
            raise OverlayError(f"NodeOverlay {self.name}: set price or priceAdjustment, not both")
        base = sorted(BASE_RESOURCES.intersection(name for name, _ in self.capacity))
        if base:
            raise OverlayError(
                f"NodeOverlay {self.name}: capacity may add extended resources only, not "
                f"{', '.join(base)}"
            )
        object.__setattr__(self, "_selector", Requirements.of(self.requirements))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a type (or one offering of it) with these labels is selected."""
        return self._selector.matches(labels)

    def sets_price(self) -> bool:
        """Whether it changes prices at all."""
        return self.price is not None or self.price_adjustment is not None

    def priced(self, price: float) -> float:
        """``price`` after this overlay."""
        if self.price is not None:
            return self.price
        if self.price_adjustment is not None:
            return self.price_adjustment.apply(price)
        return price

    def describe_price(self) -> str:
        """``price 0.05`` / ``priceAdjustment -30%`` (for explanations)."""
        if self.price is not None:
            return f"price {self.price:g}"
        if self.price_adjustment is not None:
            return f"priceAdjustment {self.price_adjustment.describe()}"
        return "no price change"


def by_precedence(overlays: Iterable[NodeOverlay]) -> tuple[NodeOverlay, ...]:
    """Higher weight first; equal weights by name, later in the alphabet first (Karpenter)."""
    ordered = sorted(overlays, key=lambda o: o.name, reverse=True)
    return tuple(sorted(ordered, key=lambda o: -o.weight))


@dataclass(frozen=True)
class OverlayEffect:
    """What overlays did to one instance type: each offering's price before and after and the
    overlay that set it, and the extended resources added with the overlay adding each."""

    instance_type: str
    prices: tuple[tuple[Offering, float, str], ...] = ()
    capacity: tuple[tuple[str, int, str], ...] = ()

    @property
    def overlays(self) -> tuple[str, ...]:
        """The names of the overlays that changed the type, sorted."""
        names = {name for _, _, name in self.prices} | {name for _, _, name in self.capacity}
        return tuple(sorted(names))


def _offering_labels(instance_type: InstanceType, offering: Offering) -> dict[str, str]:
    return {
        **instance_type.labels,
        LABEL_ZONE: offering.zone,
        LABEL_CAPACITY_TYPE: offering.capacity_type,
    }


def overlay_effect(instance_type: InstanceType, ordered: Sequence[NodeOverlay]) -> OverlayEffect:
    """What ``ordered`` (by precedence) do to ``instance_type``."""
    prices: list[tuple[Offering, float, str]] = []
    selected: list[NodeOverlay] = []
    for offering in instance_type.offerings:
        labels = _offering_labels(instance_type, offering)
        matching = [o for o in ordered if o.matches(labels)]
        selected.extend(o for o in matching if o not in selected)
        pricing = next((o for o in matching if o.sets_price()), None)
        if pricing is not None:
            prices.append((offering, pricing.priced(offering.price_per_hour), pricing.name))
    if not instance_type.offerings:
        selected = [o for o in ordered if o.matches(instance_type.labels)]
    added: dict[str, tuple[int, str]] = {}
    for overlay in sorted(selected, key=ordered.index):
        for resource, amount in overlay.capacity:
            added.setdefault(resource, (amount, overlay.name))
    return OverlayEffect(
        instance_type.name,
        tuple(prices),
        tuple((resource, amount, name) for resource, (amount, name) in sorted(added.items())),
    )


def _with_extended(resources: Resources, added: Mapping[str, int]) -> Resources:
    return replace(resources, extended=tuple(sorted({**dict(resources.extended), **added}.items())))


def apply_effect(instance_type: InstanceType, effect: OverlayEffect) -> InstanceType:
    """``instance_type`` with ``effect`` applied."""
    if not effect.prices and not effect.capacity:
        return instance_type
    repriced = {id(offering): price for offering, price, _ in effect.prices}
    offerings = tuple(
        replace(o, price_per_hour=repriced[id(o)]) if id(o) in repriced else o
        for o in instance_type.offerings
    )
    added = {resource: amount for resource, amount, _ in effect.capacity}
    return replace(
        instance_type,
        offerings=offerings,
        capacity=_with_extended(instance_type.capacity, added),
        allocatable=_with_extended(instance_type.allocatable, added),
    )


def _price_key(overlay: NodeOverlay) -> tuple[float | None, PriceAdjustment | None]:
    return (overlay.price, overlay.price_adjustment)


def _conflict(
    overlay: NodeOverlay, kept: Sequence[NodeOverlay], instance_type: InstanceType
) -> str | None:
    """How ``overlay`` conflicts on ``instance_type`` with an overlay of its weight already
    kept (None: it does not)."""
    rivals = [k for k in kept if k.weight == overlay.weight]
    if not rivals:
        return None
    offerings = instance_type.offerings
    selected: list[Mapping[str, str]] = [_offering_labels(instance_type, o) for o in offerings]
    selected = selected or [instance_type.labels]
    if not any(overlay.matches(labels) for labels in selected):
        return None
    amounts = dict(overlay.capacity)
    for rival in rivals:
        for offering, labels in zip(offerings, selected, strict=False):
            if (
                overlay.sets_price()
                and rival.sets_price()
                and _price_key(overlay) != _price_key(rival)
                and overlay.matches(labels)
                and rival.matches(labels)
            ):
                return (
                    f"conflicts with NodeOverlay {rival.name} (weight {rival.weight}): "
                    f"{overlay.describe_price()} against {rival.describe_price()} for "
                    f"{instance_type.name} {offering.capacity_type} in {offering.zone}"
                )
        differing = sorted(
            resource
            for resource, amount in rival.capacity
            if resource in amounts and amounts[resource] != amount
        )
        if differing and any(rival.matches(labels) for labels in selected):
            return (
                f"conflicts with NodeOverlay {rival.name} (weight {rival.weight}): "
                f"{differing[0]} {amounts[differing[0]]} against "
                f"{dict(rival.capacity)[differing[0]]} on {instance_type.name}"
            )
    return None


def overlay_conflicts(
    instance_types: Sequence[InstanceType], overlays: Iterable[NodeOverlay]
) -> dict[str, str]:
    """Per overlay left out, why: it sets a price or an extended resource that an overlay of
    the same weight before it (``by_precedence``) sets differently on a type both select."""
    ordered = by_precedence(overlays)
    weights = [o.weight for o in ordered]
    if len(set(weights)) == len(weights):
        return {}  # no two of one weight: nothing can conflict
    kept: list[NodeOverlay] = []
    conflicts: dict[str, str] = {}
    for overlay in ordered:
        reason = None
        if weights.count(overlay.weight) > 1:
            reason = next(
                (r for t in instance_types if (r := _conflict(overlay, kept, t)) is not None),
                None,
            )
        if reason is None:
            kept.append(overlay)
        else:
            conflicts[overlay.name] = reason
    return conflicts


def effective_overlays(
    instance_types: Sequence[InstanceType], overlays: Iterable[NodeOverlay]
) -> tuple[NodeOverlay, ...]:
    """``overlays`` by precedence, those in conflict left out (``overlay_conflicts``)."""
    ordered = by_precedence(overlays)
    conflicts = overlay_conflicts(instance_types, ordered)
    return tuple(o for o in ordered if o.name not in conflicts)


def apply_overlays(
    instance_types: Sequence[InstanceType], overlays: Iterable[NodeOverlay]
) -> tuple[InstanceType, ...]:
    """The catalog as the solver should see it: every overlay applied, those in conflict left
    out (the same tuple back when there are none, so catalog indexes keyed on it stay
    cached)."""
    ordered = effective_overlays(instance_types, overlays)
    if not ordered:
        return tuple(instance_types)
    return tuple(apply_effect(t, overlay_effect(t, ordered)) for t in instance_types)


def overlay_effects(
    instance_types: Sequence[InstanceType], overlays: Iterable[NodeOverlay]
) -> dict[str, OverlayEffect]:
    """Per instance type name, what the overlays changed (types left alone are absent)."""
    ordered = effective_overlays(instance_types, overlays)
    effects = (overlay_effect(t, ordered) for t in instance_types) if ordered else ()
    return {e.instance_type: e for e in effects if e.prices or e.capacity}
