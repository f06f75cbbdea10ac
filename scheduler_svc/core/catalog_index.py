"""The instance-type catalog indexed for the solver: bitsets, never a scan per pod.

Instance types get positions (sorted by name); a set of types is a Python int used as a bitset.
Label requirements map to bitsets through a per-label value index, resource fits through sorted
per-resource thresholds, and offerings through a (zone, capacity type) index, so narrowing the
types a NodeClaim may use costs a few integer ANDs.

Building the index costs time in proportion to the catalog (tens of milliseconds for ~1,300 EC2
types), which dwarfs solving a handful of pods. ``CatalogCache`` keeps the indexes of recent
catalogs so callers that solve again and again (the provisioner, every round) build each once;
an index's memo tables depend on the catalog alone, so reusing it never changes a plan.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from scheduler_svc.core.model import (
    InstanceType,
    OfferingOption,
    Resources,
    UnavailableOffering,
)
from scheduler_svc.core.requirements import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    INSTANCE_LABEL_PREFIX,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    Requirements,
    ValueSet,
)

BASE_DIMENSIONS = ("cpu", "memory", "pods", "ephemeral-storage")
# Memo tables stop growing here (an index may live for many solves; a miss only recomputes).
_MEMO_ENTRIES = 100_000


def iter_bits(bits: int) -> Iterator[int]:
    """Positions of the set bits, lowest first."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


def resource_vector(resources: Resources, dimensions: Sequence[str]) -> tuple[int, ...]:
    """Amounts in the order of ``dimensions``."""
    amounts = resources.as_mapping()
    return tuple(amounts.get(d, 0) for d in dimensions)


class IndexedOffering(NamedTuple):
    """An available offering of the type at ``type_position`` (a tuple: built by the
    thousand for every catalog, so construction cost matters)."""

    price_per_hour: float
    type_position: int
    zone: str
    capacity_type: str
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""


class CatalogIndex:
    """Instance types by position with label, resource and offering indexes."""

    def __init__(
        self,
        instance_types: Sequence[InstanceType],
        dimensions: Sequence[str],
        unavailable: frozenset[UnavailableOffering] = frozenset(),
    ) -> None:
        self.types = sorted(instance_types, key=lambda t: t.name)
        self.dimensions = tuple(dimensions)
        self.names = [t.name for t in self.types]
        self.allocatable = [resource_vector(t.allocatable, dimensions) for t in self.types]
        self.capacity = [resource_vector(t.capacity, dimensions) for t in self.types]
        self.all_bits = (1 << len(self.types)) - 1
        self.labels: list[dict[str, str]] = []
        self.offerings: list[tuple[IndexedOffering, ...]] = []
        self.label_index: dict[str, dict[str, int]] = {}
        self.zone_capacity_bits: dict[tuple[str, str], int] = {}
        exhausted = {(u.instance_type, u.zone, u.capacity_type) for u in unavailable}
        for position, instance_type in enumerate(self.types):
            labels = dict(instance_type.labels)
            labels[LABEL_INSTANCE_TYPE] = instance_type.name
            self.labels.append(labels)
            for key, value in labels.items():
                by_value = self.label_index.setdefault(key, {})
                by_value[value] = by_value.get(value, 0) | (1 << position)
            offerings = tuple(
                sorted(
                    (
                        IndexedOffering(
                            o.price_per_hour,
                            position,
                            o.zone,
                            o.capacity_type,
                            o.capacity_reservation_id,
                            o.capacity_reservation_type,
                        )
                        for o in instance_type.offerings
                        if o.available
                        and (instance_type.name, o.zone, o.capacity_type) not in exhausted
                    ),
                    key=lambda o: (
                        o.price_per_hour,
                        o.zone,
                        o.capacity_type,
                        o.capacity_reservation_id,
                    ),
                )
            )
            self.offerings.append(offerings)
            for offering in offerings:
                pair = (offering.zone, offering.capacity_type)
                self.zone_capacity_bits[pair] = self.zone_capacity_bits.get(pair, 0) | (
                    1 << position
                )
        self.zones = sorted({z for z, _ in self.zone_capacity_bits})
        self.capacity_types = sorted({c for _, c in self.zone_capacity_bits})
        # Per resource: thresholds ascending and, for each, the bitset of types at or above it.
        self._fit_thresholds: list[list[int]] = []
        self._fit_bits: list[list[int]] = []
        for d in range(len(self.dimensions)):
            order = sorted(range(len(self.types)), key=lambda p: self.allocatable[p][d])
            thresholds = [self.allocatable[p][d] for p in order]
            suffix = [0] * (len(order) + 1)
            for i in range(len(order) - 1, -1, -1):
                suffix[i] = suffix[i + 1] | (1 << order[i])
            self._fit_thresholds.append(thresholds)
            self._fit_bits.append(suffix)
        self._requirement_cache: dict[Requirements, int] = {}
        self._fits_cache: dict[tuple[int, ...], int] = {}
        self._cheapest_cache: dict[tuple[ValueSet | None, ValueSet | None], list[float | None]] = {}
        self._positions_cache: dict[int, tuple[int, ...]] = {}
        self._option_cache: dict[
            tuple[int, ValueSet | None, ValueSet | None], tuple[OfferingOption, ...]
        ] = {}

    def fits(self, needed: Sequence[int]) -> int:
        """Types whose allocatable holds ``needed`` in every resource."""
        key = tuple(needed)
        cached = self._fits_cache.get(key)
        if cached is not None:
            return cached
        bits = self.all_bits
        for d, amount in enumerate(key):
            if amount > 0:
                bits &= self._fit_bits[d][bisect.bisect_left(self._fit_thresholds[d], amount)]
        if len(self._fits_cache) < _MEMO_ENTRIES:
            self._fits_cache[key] = bits
        return bits

    def compatible(self, requirements: Requirements) -> int:
        """Types (with an available offering) that can satisfy ``requirements``.

        Keys no instance type carries (NodePool labels, custom keys) are left to the caller:
        a launched node gets them from its NodePool. An instance label
        (``karpenter.k8s.aws/instance-*``) that no type in this catalog carries is absent on
        every type, as Karpenter's instance types say DoesNotExist for it: requiring it rules
        them all out.
        """
        cached = self._requirement_cache.get(requirements)
        if cached is not None:
            return cached
        bits = self.offering_bits(
            requirements.get(LABEL_ZONE), requirements.get(LABEL_CAPACITY_TYPE)
        )
        for key, value_set in requirements.items:
            if key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
                continue
            by_value = self.label_index.get(key)
            if by_value is None:
                if key.startswith(INSTANCE_LABEL_PREFIX) and not value_set.allows_absent:
                    bits = 0
                continue
            allowed = 0
            carrying = 0
            for value, value_bits in by_value.items():
                carrying |= value_bits
                if value_set.allows(value):
                    allowed |= value_bits
            if value_set.allows_absent:
                allowed |= self.all_bits & ~carrying
            bits &= allowed
        if len(self._requirement_cache) < _MEMO_ENTRIES:
            self._requirement_cache[requirements] = bits
        return bits

    def offering_bits(self, zones: ValueSet | None, capacity_types: ValueSet | None) -> int:
        """Types with an available offering in an admitted zone and capacity type."""
        bits = 0
        for (zone, capacity_type), pair_bits in self.zone_capacity_bits.items():
            if (zones is None or zones.allows(zone)) and (
                capacity_types is None or capacity_types.allows(capacity_type)
            ):
                bits |= pair_bits
        return bits

    def matching_offerings(
        self, position: int, zones: ValueSet | None, capacity_types: ValueSet | None
    ) -> list[IndexedOffering]:
        """The type's available offerings in admitted zones and capacity types, cheapest first."""
        return [
            o
            for o in self.offerings[position]
            if (zones is None or zones.allows(o.zone))
            and (capacity_types is None or capacity_types.allows(o.capacity_type))
        ]

    def positions(self, bits: int) -> tuple[int, ...]:
        """``iter_bits(bits)`` as a tuple, memoized (the same pool-wide sets are scanned in
        every solve)."""
        cached = self._positions_cache.get(bits)
        if cached is not None:
            return cached
        result = tuple(iter_bits(bits))
        if len(self._positions_cache) < 256:
            self._positions_cache[bits] = result
        return result

    def cheapest_prices(
        self, zones: ValueSet | None, capacity_types: ValueSet | None
    ) -> list[float | None]:
        """Per position, the price of the type's cheapest offering in admitted zones and
        capacity types (None: it has none). Memoized: read-only for callers."""
        ident = (zones, capacity_types)
        cached = self._cheapest_cache.get(ident)
        if cached is not None:
            return cached
        prices: list[float | None] = []
        for position in range(len(self.types)):
            offers = self.matching_offerings(position, zones, capacity_types)
            prices.append(offers[0].price_per_hour if offers else None)
        if len(self._cheapest_cache) < _MEMO_ENTRIES:
            self._cheapest_cache[ident] = prices
        return prices

    def offering_options(
        self, bits: int, zones: ValueSet | None, capacity_types: ValueSet | None
    ) -> tuple[OfferingOption, ...]:
        """Every available offering of the types in ``bits`` in admitted zones and capacity
        types, cheapest first (ties by type name, zone, capacity type); spot offerings dearer
        than the cheapest on-demand one are left out (on-demand would be chosen first)."""
        ident = (bits, zones, capacity_types)
        cached = self._option_cache.get(ident)
        if cached is not None:
            return cached
        offers: list[IndexedOffering] = []
        for p in iter_bits(bits):
            offers.extend(self.matching_offerings(p, zones, capacity_types))
        on_demand = [o.price_per_hour for o in offers if o.capacity_type == CAPACITY_TYPE_ON_DEMAND]
        if on_demand:
            ceiling = min(on_demand)
            offers = [
                o
                for o in offers
                if o.capacity_type != CAPACITY_TYPE_SPOT or o.price_per_hour <= ceiling
            ]
        names = self.names
        offers.sort(
            key=lambda o: (
                o.price_per_hour,
                names[o.type_position],
                o.zone,
                o.capacity_type,
                o.capacity_reservation_id,
            )
        )
        result = tuple(
            OfferingOption(
                names[o.type_position],
                o.zone,
                o.capacity_type,
                o.price_per_hour,
                o.capacity_reservation_id,
                o.capacity_reservation_type,
            )
            for o in offers
        )
        if len(self._option_cache) < _MEMO_ENTRIES:
            self._option_cache[ident] = result
        return result


class _CachedIndex(NamedTuple):
    instance_types: tuple[InstanceType, ...]
    dimensions: tuple[str, ...]
    unavailable: frozenset[UnavailableOffering]
    catalog: CatalogIndex


class CatalogCache:
    """The indexes of the last ``size`` distinct (catalog, resource dimensions, exhausted
    offerings), most recently used kept; ``index()`` builds one only for a catalog not seen.

    A catalog matches when it is the same tuple (the provisioner's catalog cache hands out one
    tuple until it refetches) or an equal one. Not thread-safe: one per solving thread.
    """

    def __init__(self, size: int = 8) -> None:
        if size < 1:
            raise ValueError(f"CatalogCache size: expected at least 1, got {size}")
        self._size = size
        self._entries: list[_CachedIndex] = []
        self.builds = 0

    def index(
        self,
        instance_types: Sequence[InstanceType],
        dimensions: Sequence[str],
        unavailable: frozenset[UnavailableOffering] = frozenset(),
    ) -> CatalogIndex:
        """The index of this catalog, built now only if no cached one matches."""
        types = tuple(instance_types)
        dims = tuple(dimensions)
        for position, entry in enumerate(self._entries):
            if (
                entry.dimensions == dims
                and entry.unavailable == unavailable
                and (entry.instance_types is types or entry.instance_types == types)
            ):
                if position:
                    del self._entries[position]
                    self._entries.insert(0, entry)
                return entry.catalog
        built = CatalogIndex(types, dims, unavailable)
        self.builds += 1
        self._entries.insert(0, _CachedIndex(types, dims, unavailable, built))
        del self._entries[self._size :]
        return built
