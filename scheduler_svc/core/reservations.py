"""Reserved capacity (On-Demand Capacity Reservations and Capacity Blocks) in the catalog, in
plans and in the lifetime of the nodes launched into it. Pure: `now` is an argument.

- `with_reserved_offerings`: each active reservation an EC2NodeClass selects (its status) becomes
  a `reserved` offering of its instance type in its zone, priced as already paid for: the
  on-demand price over 10^7 (Karpenter's constant), so it is chosen before spot and on-demand
  and the types keep their relative order. A reservation with no free instance, or an expiring
  Capacity Block, is an unavailable offering.
- `assign_reservations`: a plan may choose one reservation for more claims than it has room for
  (the solver prices offerings, it does not count them). Claims take the room in plan order;
  a claim that finds none keeps its other offerings (spot, on-demand), which the actuator tries
  next in the same call anyway.
- `block_drain_time` / `claims_to_drain`: EC2 starts reclaiming a Capacity Block's instances 30
  minutes before its end; daiku drains them 10 minutes before that (40 minutes before the end),
  as Karpenter does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from scheduler_svc.core.model import InstanceType, NodeClaimPlan, Offering

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


def with_reserved_offerings(
    instance_types: Sequence[InstanceType],
    reservations: Sequence[CapacityReservation],
    *,
    now: datetime | None = None,
) -> tuple[InstanceType, ...]:
    """The catalog with a reserved offering per reservation of a type it has (see above); with
    `now`, a Capacity Block whose nodes drain by then is unavailable too.
    Reservations of a type the catalog lacks, or one it does not offer in that zone, are
    left out: the NodeClass cannot launch them."""
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
                available=r.launchable_at(now),
                capacity_reservation_id=r.id,
                capacity_reservation_type=r.reservation_type,
            )
            for r in sorted(mine, key=lambda r: r.id)
            if r.zone in zones
        )
        result.append(dataclasses.replace(instance_type, offerings=instance_type.offerings + added))
    return tuple(result)


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
