"""Reserved capacity (On-Demand Capacity Reservations and Capacity Blocks) in the catalog, in
plans and in the lifetime of the nodes launched into it. Pure: `now` is an argument.

- `with_reserved_offerings`: each active reservation an EC2NodeClass selects (its status) becomes
  a `reserved` offering of its instance type in its zone, priced as already paid for: the
  on-demand price over 10^7 (Karpenter's constant), so it is chosen before spot and on-demand
  and the types keep their relative order. A reservation with no free instance, or an expiring
  Capacity Block, is an unavailable offering.
- `reservation_room`: how many new instances each reservation takes this round: its free count
  (the status), and never more than its total less the instances this cluster's nodes and
  claims in flight already hold there (a status resolved before a launch still counts it free).
  `with_reserved_offerings` writes it on the offering (`Offering.reservation_capacity`).
- `ReservationLedger`: the solver's count while it plans (Karpenter's ReservationManager): a new
  claim whose cheapest offering is a reservation with room takes one instance of it; once a
  reservation has none left its type is priced at its spot / on-demand price again, so the
  claims that follow are sized for what they will really run on.
- `room_after`: the room the next solve of the same round has (the provisioner solves NodePool
  groups with their own catalogs one after the other; they share reservations).
- `assign_reservations`: the ledger's rule over plans put together from several solves
  (`daiku plan`: headroom solved after the real pods): claims take the room in plan order; a
  claim that finds none keeps its other offerings (spot, on-demand).
- `block_drain_time` / `claims_to_drain`: EC2 starts reclaiming a Capacity Block's instances 30
  minutes before its end; daiku drains them 10 minutes before that (40 minutes before the end),
  as Karpenter does.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from scheduler_svc.core.catalog_index import CatalogIndex
from scheduler_svc.core.model import InstanceType, Node, NodeClaimPlan, Offering, OfferingOption
from scheduler_svc.core.requirements import ValueSet

RESERVED: Final = "reserved"
ON_DEMAND: Final = "on-demand"
DEFAULT: Final = "default"
CAPACITY_BLOCK: Final = "capacity-block"
LABEL_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"
RESERVED_PRICE_DIVISOR: Final = 10_000_000.0
# EC2 reclaims a block's instances from 30 minutes before its end; daiku drains 10 before that.
BLOCK_DRAIN_BEFORE_END: Final = timedelta(minutes=40)


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """A reservation as an EC2NodeClass's status lists it."""

    id: str
    instance_type: str
    zone: str
    reservation_type: str = DEFAULT
    available: int = 0
    total: int = 0
    owner_id: str = ""
    instance_match_criteria: str = ""
    end_time: datetime | None = None
    state: str = "active"

    @property
    def launchable(self) -> bool:
        """Whether a new instance may go in it (room, and not an expiring block)."""
        return self.available > 0 and self.state == "active"

    def launchable_at(self, now: datetime | None) -> bool:
        """`launchable`, and (when `now` is given) not a block whose nodes drain by now: a
        node launched there would be drained at once."""
        drain_at = block_drain_time(self)
        return self.launchable and (now is None or drain_at is None or now < drain_at)


def reserved_price(instance_type: InstanceType) -> float | None:
    """The price of a reserved offering of the type (None: no on-demand price to scale)."""
    prices = [o.price_per_hour for o in instance_type.offerings if o.capacity_type == ON_DEMAND]
    return min(prices) / RESERVED_PRICE_DIVISOR if prices else None


def reservation_room(
    reservations: Iterable[CapacityReservation],
    nodes: Iterable[Node],
    *,
    now: datetime | None = None,
) -> dict[str, int]:
    """Per reservation id, how many new instances it takes this round: none when it is not
    launchable (full, expiring, a block draining by `now`); else its free count, capped by its
    total less the instances `nodes` (registered nodes and claims in flight, by their
    capacity-reservation-id label) hold in it. The status is resolved again after each launch
    into a reservation, but a round that runs before that sees the old free count; the cap
    keeps it from handing the same instance out twice. (Instances of other accounts or
    clusters lower only the free count, which the next resolution brings.)"""
    held = Counter(n.labels.get(LABEL_RESERVATION_ID, "") for n in nodes)
    room = {}
    for r in reservations:
        free = r.available if r.launchable_at(now) else 0
        if r.total > 0:
            free = min(free, r.total - held[r.id])
        room[r.id] = max(free, 0)
    return room


def with_reserved_offerings(
    instance_types: Sequence[InstanceType],
    reservations: Sequence[CapacityReservation],
    *,
    now: datetime | None = None,
    room: Mapping[str, int] | None = None,
) -> tuple[InstanceType, ...]:
    """The catalog with a reserved offering per reservation of a type it has (see above); with
    `now`, a Capacity Block whose nodes drain by then is unavailable too. Each offering's
    `reservation_capacity` is its `room` (default: the free count), and one with no room is
    unavailable. Reservations of a type the catalog lacks, or one it does not offer in that
    zone, are left out: the NodeClass cannot launch them."""
    by_type: dict[str, list[CapacityReservation]] = {}
    for reservation in reservations:
        by_type.setdefault(reservation.instance_type, []).append(reservation)
    if not by_type:
        return tuple(instance_types)
    result = []
    for instance_type in instance_types:
        mine = by_type.get(instance_type.name)
        price = reserved_price(instance_type) if mine else None
        if not mine or price is None:
            result.append(instance_type)
            continue
        zones = {o.zone for o in instance_type.offerings}
        added = tuple(
            Offering(
                zone=r.zone,
                capacity_type=RESERVED,
                price_per_hour=price,
                available=r.launchable_at(now) and capacity > 0,
                capacity_reservation_id=r.id,
                capacity_reservation_type=r.reservation_type,
                reservation_capacity=capacity,
            )
            for r in sorted(mine, key=lambda r: r.id)
            if r.zone in zones
            for capacity in (room.get(r.id, 0) if room is not None else r.available,)
        )
        result.append(dataclasses.replace(instance_type, offerings=instance_type.offerings + added))
    return tuple(result)


class ReservationLedger:
    """The reservations' free instances while one solve hands them out (module docstring).
    Reserved offerings without a `reservation_capacity` are not counted (always offered)."""

    def __init__(self, catalog: CatalogIndex) -> None:
        left: dict[str, int] = {}
        # Most catalogs have no reserved offering: one look, not a walk over every offering
        # of every type on each solve (~1 ms of a 1-pod solve's 3 ms).
        reserved_offered = RESERVED in catalog.capacity_types
        for instance_type in catalog.types if reserved_offered else ():
            for o in instance_type.offerings:
                if o.capacity_type != RESERVED or o.reservation_capacity is None:
                    continue
                # Two NodeClasses may list one reservation from statuses read at different
                # times: the smaller count is the safe one (as Karpenter does).
                known = left.get(o.capacity_reservation_id)
                count = o.reservation_capacity if o.available else 0
                left[o.capacity_reservation_id] = count if known is None else min(known, count)
        self._left = left
        # Counted reservations, and those with no instance left: priced as spot / on-demand.
        self.counted = frozenset(left)
        self.exhausted = frozenset(r for r, count in left.items() if count <= 0)
        self._prices: dict[
            tuple[ValueSet | None, ValueSet | None, frozenset[str]], list[float | None]
        ] = {}

    def take(self, offerings: Sequence[OfferingOption]) -> str:
        """The reservation of the first reserved offering with room, one instance of it taken
        ("" when none has room)."""
        for o in offerings:
            rid = o.capacity_reservation_id
            if o.capacity_type == RESERVED and self._left.get(rid, 0) > 0:
                self._left[rid] -= 1
                if not self._left[rid]:
                    self.exhausted |= {rid}
                return rid
        return ""

    def give_back(self, reservation_id: str) -> None:
        """A planned claim that held an instance of the reservation was dropped."""
        if reservation_id in self._left:
            self._left[reservation_id] += 1
            self.exhausted -= {reservation_id}

    def offerings_of(
        self, offerings: tuple[OfferingOption, ...], taken: str
    ) -> tuple[OfferingOption, ...]:
        """A claim's offerings with the counted reservations it did not take left out (all of
        them kept when nothing else is left: the actuator then reports the reservation full)."""
        if not self.counted:
            return offerings
        kept = tuple(
            o
            for o in offerings
            if o.capacity_type != RESERVED
            or o.capacity_reservation_id == taken
            or o.capacity_reservation_id not in self.counted
        )
        return kept or offerings

    def cheapest_prices(
        self,
        catalog: CatalogIndex,
        zones: ValueSet | None,
        capacity_types: ValueSet | None,
        *,
        without: frozenset[str] | None = None,
    ) -> list[float | None]:
        """`catalog.cheapest_prices` with the offerings of the reservations in `without`
        (default: the exhausted ones) left out."""
        excluded = self.exhausted if without is None else without
        if not excluded:
            return catalog.cheapest_prices(zones, capacity_types)
        ident = (zones, capacity_types, excluded)
        cached = self._prices.get(ident)
        if cached is None:
            cached = []
            for position in range(len(catalog.types)):
                price = next(
                    (
                        o.price_per_hour
                        for o in catalog.matching_offerings(position, zones, capacity_types)
                        if o.capacity_reservation_id not in excluded
                    ),
                    None,
                )
                cached.append(price)
            self._prices[ident] = cached
        return cached


def room_after(room: Mapping[str, int], plans: Iterable[NodeClaimPlan]) -> dict[str, int]:
    """`room` less the instances `plans` take (a claim takes the reservation it lists first)."""
    left = dict(room)
    for plan in plans:
        first = plan.offerings[0] if plan.offerings else None
        if first is not None and first.capacity_type == RESERVED:
            rid = first.capacity_reservation_id
            if rid in left:
                left[rid] = max(left[rid] - 1, 0)
    return left


def assign_reservations(
    plans: Sequence[NodeClaimPlan], room: Mapping[str, int]
) -> tuple[NodeClaimPlan, ...]:
    """The plans with each reservation offered to no more claims than it has `room` for (by
    reservation id; unknown ids have none). A claim keeps the reservation of its first reserved
    offering that still has room and loses its other reserved offerings; a claim left with
    nothing keeps its list as it was (the actuator reports the reservation full)."""
    left = dict(room)
    result = []
    for plan in plans:
        taken = next(
            (
                o.capacity_reservation_id
                for o in plan.offerings
                if o.capacity_type == RESERVED and left.get(o.capacity_reservation_id, 0) > 0
            ),
            None,
        )
        if taken is not None:
            left[taken] -= 1
        offerings = tuple(
            o
            for o in plan.offerings
            if o.capacity_type != RESERVED or o.capacity_reservation_id == taken
        )
        if offerings == plan.offerings or not offerings:
            result.append(plan)
        else:
            result.append(dataclasses.replace(plan, offerings=offerings))
    return tuple(result)


def block_drain_time(reservation: CapacityReservation) -> datetime | None:
    """When nodes in the reservation must start draining (None: never, not a block)."""
    if reservation.reservation_type != CAPACITY_BLOCK or reservation.end_time is None:
        return None
    return reservation.end_time - BLOCK_DRAIN_BEFORE_END


@dataclass(frozen=True, slots=True)
class ClaimInReservation:
    """A NodeClaim and the reservation its instance runs in."""

    name: str
    reservation_id: str


def claims_to_drain(
    claims: Iterable[ClaimInReservation],
    reservations: Mapping[str, CapacityReservation],
    now: datetime,
) -> tuple[tuple[str, str], ...]:
    """(claim, reason) for every claim in a Capacity Block whose drain time has come."""
    due = []
    for claim in claims:
        reservation = reservations.get(claim.reservation_id)
        if reservation is None or reservation.end_time is None:
            continue
        drain_at = block_drain_time(reservation)
        if drain_at is not None and now >= drain_at:
            due.append(
                (
                    claim.name,
                    f"Capacity Block {reservation.id} ends at "
                    f"{reservation.end_time.isoformat()}; EC2 reclaims its instances from 30 "
                    "minutes before",
                )
            )
    return tuple(sorted(due))
