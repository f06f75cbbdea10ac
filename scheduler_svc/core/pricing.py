"""Pricing and offerings: a NodePool's remaining limits, the instance type a new NodeClaim
targets (lowest price per unit of remaining demand), what a closed claim reserves against the
limits, and the offerings and requirements a claim is written with."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler_svc.core.catalog_index import BASE_DIMENSIONS, iter_bits
from scheduler_svc.core.model import OfferingOption, Resources
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.solver_state import Bin, Pool, format_limit
from scheduler_svc.core.topology import Topology

_TAIL_NODES = 4


class Pricing(Topology):
    """NodePool limits, the type a new claim targets, and the offerings it is written with."""

    def _limit_room(self, pool: Pool, head_bits: int, share: int) -> tuple[int, str | None]:
        """(types that hold the head pod within the pool's remaining limits split ``share``
        ways, the limit reached when there are none)."""
        limits = pool.nodepool.limits
        if not limits.is_limited():
            return head_bits, None
        if limits.nodes is not None and pool.nodes + share > limits.nodes:
            return 0, f"nodes={limits.nodes}"
        bits = head_bits
        for d, limit in ((0, limits.cpu_millis), (1, limits.memory_bytes)):
            if limit is None:
                continue
            room = (limit - pool.used_capacity[d]) // share
            allowed = 0
            for p in iter_bits(bits):
                if self.catalog.capacity[p][d] <= room:
                    allowed |= 1 << p
            if not allowed:
                return 0, format_limit(self.dimensions[d], limit)
            bits = allowed
        return bits, None

    def _choose_target(self, pool: Pool, bits: int) -> int:
        """The type with the lowest price per unit of remaining demand (ties: bigger)."""
        epoch = self._epoch
        # The pool-wide choice serves every head it can hold (most of them): one scan of the
        # pool's types per demand epoch instead of one per claim.
        pool_wide = (pool.bits, epoch, pool.requirements)
        cached = self._targets.get(pool_wide)
        if cached is None:
            cached = self._scan_targets(pool, pool.bits)
            self._targets[pool_wide] = cached
        if cached >= 0 and (bits >> cached) & 1:
            return cached
        ident = (bits, epoch, pool.requirements)
        cached = self._targets.get(ident)
        if cached is None:
            cached = self._scan_targets(pool, bits)
            self._targets[ident] = cached
        return cached

    def _target_keeping_min_values(
        self, pool: Pool, head_bits: int, room_bits: int, target: int
    ) -> int:
        """In a pool with limits and minValues, ``target`` or the type to target instead. A
        claim there keeps only the types no bigger than its target (``_kept_types``), so the
        cheapest target may keep too few distinct values where a bigger one keeps enough (and
        still buys the cheapest type that holds its pods). The next choice among the targets
        of ``room_bits`` whose kept types of ``head_bits`` (those holding one head pod) meet
        minValues; ``target`` itself when it meets them, or when none does (``Strict`` then
        refuses the pod naming minValues; ``BestEffort`` lowers them on its claim)."""
        if not pool.min_values or not self._limited_dimensions(pool):
            return target
        meeting = self._targets_meeting_min_values(pool, head_bits)
        if (meeting >> target) & 1:
            return target
        meeting &= room_bits
        if not meeting:
            return target
        chosen = self._choose_target(pool, meeting)
        return chosen if chosen >= 0 else target

    def _targets_meeting_min_values(self, pool: Pool, head_bits: int) -> int:
        """The types of ``head_bits`` whose claim keeps enough of ``head_bits`` for the
        pool's minValues. Kept types depend only on the target's capacity in the limited
        resources, so each distinct capacity is checked once (memoised per pool and head)."""
        ident = (pool.index, head_bits)
        cached = self._min_values_targets.get(ident)
        if cached is not None:
            return cached
        limited = tuple(self._limited_dimensions(pool))
        by_capacity: dict[tuple[int, ...], int] = {}
        for p in iter_bits(head_bits):
            capacity = tuple(self.catalog.capacity[p][d] for d in limited)
            by_capacity[capacity] = by_capacity.get(capacity, 0) | (1 << p)
        meeting = 0
        for targets in by_capacity.values():
            # Every target of one capacity keeps the same types: ask for one of them.
            kept = head_bits & self._no_bigger_than(limited, targets.bit_length() - 1)
            if self._min_values_unmet(pool.min_values, kept) is None:
                meeting |= targets
        self._min_values_targets[ident] = meeting
        return meeting

    def _scan_targets(self, pool: Pool, bits: int) -> int:
        zones = pool.requirements.get(LABEL_ZONE)
        capacity_types = pool.requirements.get(LABEL_CAPACITY_TYPE)
        # Cheapest price per type memoized in the index, and only the demanded resources
        # looked at: this loop runs over the pool's whole catalog for every demand epoch.
        prices = self.reservations.cheapest_prices(self.catalog, zones, capacity_types)
        demanded = [
            (d, amount, pool.overhead[d]) for d, amount in enumerate(self._demand) if amount > 0
        ]
        allocatable = self.catalog.allocatable
        names = self.catalog.names
        best, best_key = -1, (float("inf"), 0.0, "")
        for p in self.catalog.positions(bits):
            price = prices[p]
            if price is None:
                continue
            alloc = allocatable[p]
            units = 1.0
            for d, amount, overhead in demanded:
                room = alloc[d] - overhead
                if room <= 0:
                    # The type has none of this resource (another class's GPU, say): pods
                    # needing it go elsewhere, so that demand does not rank this type.
                    continue
                fraction = room / amount
                if fraction < units:  # noqa: PLR1730 - a comparison is cheaper than min() here
                    units = fraction
            if units <= 0:
                continue
            # Price per unit of demand; near the tail (a few nodes of this type would hold all
            # that is left) count whole nodes, so a type needing a second, mostly empty node
            # does not look cheap. Rounded so that equal prices tie despite float noise (then
            # the bigger type wins: fewer nodes for the same price).
            nodes_needed = 1.0 / units
            if nodes_needed <= _TAIL_NODES:
                nodes_needed = math.ceil(nodes_needed - 1e-9)
            score = float(f"{price * nodes_needed:.9g}")
            key = (score, -units, names[p])
            if key < best_key:
                best, best_key = p, key
        return best

    def _close_claim(self, b: Bin) -> None:
        pool = b.pool
        assert pool is not None
        self.claims.append(b)
        pool.nodes += 1
        limits = pool.nodepool.limits
        if not limits.is_limited():
            self._take_reservation(b)
            return
        target_capacity = self.catalog.capacity[b.target]
        limited = self._limited_dimensions(pool)
        b.bits = self._kept_types(pool, b.bits & self.catalog.fits(b.used), b.target)
        reserved = [0] * len(self.dimensions)
        for p in iter_bits(b.bits):
            for d in limited:
                reserved[d] = max(reserved[d], self.catalog.capacity[p][d])
        for d in limited:
            reserved[d] = max(reserved[d], target_capacity[d])
            pool.used_capacity[d] += reserved[d]
        b.limit_capacity = tuple(reserved)
        self._take_reservation(b)

    def _take_reservation(self, b: Bin) -> None:
        """A closed claim takes an instance of the first reservation with room among its
        offerings (Karpenter's ReservationManager); when that leaves the reservation empty,
        target choices are made again with its type at its spot / on-demand price."""
        if not self.reservations.counted:
            return
        exhausted = self.reservations.exhausted
        b.reservation = self.reservations.take(self._catalog_offerings(b))
        if self.reservations.exhausted != exhausted:
            self._targets.clear()

    def _offerings(self, b: Bin) -> tuple[OfferingOption, ...]:
        """The claim's offerings, cheapest first; of the counted reservations only the one it
        took (`_close_claim`)."""
        return self.reservations.offerings_of(self._catalog_offerings(b), b.reservation)

    def _catalog_offerings(self, b: Bin) -> tuple[OfferingOption, ...]:
        fit = b.bits & self.catalog.fits(b.used)
        return self.catalog.offering_options(
            fit, b.requirements.get(LABEL_ZONE), b.requirements.get(LABEL_CAPACITY_TYPE)
        )

    def _claim_requirements(
        self, b: Bin, offerings: tuple[OfferingOption, ...]
    ) -> tuple[Requirement, ...]:
        """The claim's requirements narrowed to what its offerings can launch (as Karpenter's
        NodeClaims carry them: instance types, zones and capacity types listed)."""
        # Offering lists are shared between claims (memoised), so is what they launch; the
        # cache holds the list itself so that its id stays unique.
        cached = self._launchable.get(id(offerings))
        if cached is None:
            launchable = Requirements.of(
                [
                    Requirement(
                        LABEL_INSTANCE_TYPE,
                        Operator.IN,
                        tuple(sorted({o.instance_type for o in offerings})),
                    ),
                    Requirement(
                        LABEL_ZONE, Operator.IN, tuple(sorted({o.zone for o in offerings}))
                    ),
                    Requirement(
                        LABEL_CAPACITY_TYPE,
                        Operator.IN,
                        tuple(sorted({o.capacity_type for o in offerings})),
                    ),
                ]
            )
            cached = (offerings, launchable)
            self._launchable[id(offerings)] = cached
        ident = (b.requirements, id(offerings))
        written = self._claim_requirement_cache.get(ident)
        if written is None:
            written = b.requirements.intersect(cached[1]).to_requirements()
            self._claim_requirement_cache[ident] = written
        return written

    def _resources(self, vector: Sequence[int]) -> Resources:
        base = len(BASE_DIMENSIONS)
        extended = tuple(
            (name, amount)
            for name, amount in zip(self.dimensions[base:], vector[base:], strict=True)
            if amount
        )
        return Resources(vector[0], vector[1], vector[2], vector[3], extended)
