"""Launch-plan ordering: which offerings the next CreateFleet call carries.

A claim lists its acceptable offerings, most preferred first. Each CreateFleet call carries one
capacity type (an instant fleet has a single default target capacity type): the capacity type of
the most preferred offering still open, with every open offering of that type in claim order, at
most 60 (EC2's and Karpenter's limit on overrides per call). When every spot offering has failed,
the next call is on-demand, if the claim allows it.

Reserved offerings launch into their capacity reservation: an On-Demand Capacity Reservation
is an on-demand launch whose template targets it, a Capacity Block a `capacity-block` launch
(EC2 takes no mix of the two in one call, so a batch holds one reservation type). When every
reserved offering has failed (ReservationCapacityExceeded), the next call carries the next
capacity type the claim lists, at once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from actuator_svc.core.offerings import CAPACITY_BLOCK, ON_DEMAND, RESERVED, SPOT, OfferingKey

MAX_OVERRIDES_PER_FLEET: Final = 60
SPOT_ALLOCATION_STRATEGY: Final = "price-capacity-optimized"
# "prioritized" with priorities in claim order honours the scheduler's ranking, which is by
# price already; "lowest-price" would re-rank by EC2's list price and ignore the claim.
ON_DEMAND_ALLOCATION_STRATEGY: Final = "prioritized"
# What an EC2NodeClass may ask for instead (EC2's strategies for instant fleets; a capacity
# reservation is always "prioritized": its offerings are in the claim's order).
SPOT_ALLOCATION_STRATEGIES: Final = frozenset(
    {"price-capacity-optimized", "capacity-optimized-prioritized", "lowest-price"}
)
ON_DEMAND_ALLOCATION_STRATEGIES: Final = frozenset({"prioritized", "lowest-price"})


@dataclass(frozen=True)
class FleetBatch:
    """The offerings of one CreateFleet call, all of one capacity type, in claim order."""

    capacity_type: str
    offerings: tuple[OfferingKey, ...]

    @property
    def fleet_capacity_type(self) -> str:
        """CreateFleet's DefaultTargetCapacityType: spot, on-demand or capacity-block."""
        if self.capacity_type != RESERVED:
            return self.capacity_type
        blocks = self.offerings[0].capacity_reservation_type == CAPACITY_BLOCK
        return CAPACITY_BLOCK if blocks else ON_DEMAND

    @property
    def allocation_strategy(self) -> str:
        """The EC2 allocation strategy for this batch's capacity type."""
        return self.strategy()

    def strategy(self, spot: str = "", on_demand: str = "") -> str:
        """The allocation strategy, with the node class's choices ("" for the default)."""
        if self.capacity_type == SPOT:
            return spot or SPOT_ALLOCATION_STRATEGY
        if self.capacity_type == RESERVED:
            return ON_DEMAND_ALLOCATION_STRATEGY
        return on_demand or ON_DEMAND_ALLOCATION_STRATEGY


def next_batch(
    requested: Sequence[OfferingKey],
    excluded: Collection[OfferingKey],
    max_overrides: int = MAX_OVERRIDES_PER_FLEET,
) -> FleetBatch | None:
    """The next CreateFleet batch from `requested` less `excluded`; None when nothing is left."""
    seen: set[OfferingKey] = set()
    open_offerings = []
    for key in requested:
        if key in excluded or key in seen:
            continue
        seen.add(key)
        open_offerings.append(key)
    if not open_offerings:
        return None
    first = open_offerings[0]
    capacity_type = first.capacity_type
    chosen = tuple(
        k
        for k in open_offerings
        if k.capacity_type == capacity_type
        and k.capacity_reservation_type == first.capacity_reservation_type
    )[:max_overrides]
    return FleetBatch(capacity_type=capacity_type, offerings=chosen)
