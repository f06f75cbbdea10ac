"""Offerings: the places an instance type can be launched (instance type x zone x capacity type)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SPOT: Final = "spot"
ON_DEMAND: Final = "on-demand"
RESERVED: Final = "reserved"
CAPACITY_TYPES: Final = frozenset({SPOT, ON_DEMAND, RESERVED})
LAUNCHABLE_CAPACITY_TYPES: Final = CAPACITY_TYPES
# Reservation types (EC2's ReservationType): an On-Demand Capacity Reservation, a Capacity Block.
RESERVATION_DEFAULT: Final = "default"
CAPACITY_BLOCK: Final = "capacity-block"
RESERVATION_TYPES: Final = frozenset({RESERVATION_DEFAULT, CAPACITY_BLOCK})
# A reserved offering is already paid for: priced at the on-demand price over this, so it is
# chosen first yet keeps the types' relative order (Karpenter divides by the same constant).
RESERVED_PRICE_DIVISOR: Final = 10_000_000.0


@dataclass(frozen=True, order=True)
class OfferingKey:
    """One launchable pool; the unit of the unavailable-offerings cache."""

    instance_type: str
    zone: str
    capacity_type: str
    # For reserved offerings: the reservation and its type (default | capacity-block).
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""

    def __str__(self) -> str:
        text = f"{self.capacity_type}/{self.instance_type}/{self.zone}"
        return f"{text}/{self.capacity_reservation_id}" if self.capacity_reservation_id else text


@dataclass(frozen=True)
class PricedOffering:
    """An offering with its hourly price and whether it may be tried now."""

    key: OfferingKey
    price_per_hour: float
    available: bool = True
    unavailable_reason: str = ""
    unavailable_until_seconds: float = 0.0
