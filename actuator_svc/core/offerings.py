"""Offerings: the places an instance type can be launched (instance type x zone x capacity type)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SPOT: Final = "spot"
ON_DEMAND: Final = "on-demand"
RESERVED: Final = "reserved"
CAPACITY_TYPES: Final = frozenset({SPOT, ON_DEMAND, RESERVED})
# Reserved capacity needs capacity-reservation targeting, which this actuator does not do yet.
LAUNCHABLE_CAPACITY_TYPES: Final = frozenset({SPOT, ON_DEMAND})


@dataclass(frozen=True, order=True)
class OfferingKey:
    """One launchable pool; the unit of the unavailable-offerings cache."""

    instance_type: str
    zone: str
    capacity_type: str

    def __str__(self) -> str:
        return f"{self.capacity_type}/{self.instance_type}/{self.zone}"


@dataclass(frozen=True)
class PricedOffering:
    """An offering with its hourly price and whether it may be tried now."""

    key: OfferingKey
    price_per_hour: float
    available: bool = True
    unavailable_reason: str = ""
    unavailable_until_seconds: float = 0.0
