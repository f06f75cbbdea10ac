"""Capacity reservations (On-Demand Capacity Reservations and Capacity Blocks), which moto lacks.

What EC2 does and the emulator reproduces:
- CreateCapacityReservation / DescribeCapacityReservations (ids, `tag:K`, `tag-key`,
  `owner-id`, `state`, `instance-type`, `availability-zone`, `reservation-type` filters) /
  CancelCapacityReservation;
- a launch that targets a reservation (its launch template's
  `CapacityReservationSpecification.CapacityReservationTarget`) takes one of its free slots
  (`AvailableInstanceCount` goes down) or fails with `ReservationCapacityExceeded`; a
  terminated instance gives its slot back;
- a Capacity Block (`ReservationType: capacity-block`) has an end date; from 30 minutes
  before it EC2 reclaims its instances, so launches into it fail, and it is `expired` after.

Blocks are created through the emulator's controls (`Ec2Emulator.create_capacity_reservation`,
the admin API); EC2 sells them through PurchaseCapacityBlock, which needs an offering search
the emulator does not model.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

RESERVATION_CAPACITY_EXCEEDED: Final = "ReservationCapacityExceeded"
DEFAULT: Final = "default"
CAPACITY_BLOCK: Final = "capacity-block"
RESERVATION_TYPES: Final = frozenset({DEFAULT, CAPACITY_BLOCK})
# EC2 starts reclaiming a Capacity Block's instances this long before its end date.
BLOCK_RECLAIM_BEFORE_END: Final = timedelta(minutes=30)


class ReservationError(ValueError):
    """A request EC2 refuses as a whole (answered with EC2's error shape, HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class CapacityReservation:
    """One reservation and the instances running in it."""

    id: str
    instance_type: str
    zone: str
    total: int
    owner_id: str
    reservation_type: str = DEFAULT
    instance_match_criteria: str = "targeted"
    start_date: datetime = field(default_factory=lambda: datetime.now(UTC))
    end_date: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    instances: set[str] = field(default_factory=set)
    cancelled: bool = False

    @property
    def available(self) -> int:
        return max(0, self.total - len(self.instances))

    def state(self, now: datetime) -> str:
        if self.cancelled:
            return "cancelled"
        if self.end_date is not None and now >= self.end_date:
            return "expired"
        return "active"

    def launch_problem(self, instance_type: str, zone: str, now: datetime) -> str | None:
        """Why an instance of `instance_type` in `zone` cannot run in it now (None: it can)."""
        if self.state(now) != "active":
            return f"Capacity Reservation {self.id} is {self.state(now)}."
        if instance_type != self.instance_type or zone != self.zone:
            return (
                f"Capacity Reservation {self.id} is for {self.instance_type} in {self.zone}, "
                f"not {instance_type} in {zone}."
            )
        reclaimed = self.end_date is not None and now >= self.end_date - BLOCK_RECLAIM_BEFORE_END
        if reclaimed and self.reservation_type == CAPACITY_BLOCK:
            return f"Capacity Block {self.id} is being reclaimed before its end date."
        if not self.available:
            return (
                f"Insufficient capacity in Capacity Reservation {self.id}: all "
                f"{self.total} instances are in use."
            )
        return None

    def to_response(self, now: datetime, region: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "CapacityReservationId": self.id,
            "CapacityReservationArn": (
                f"arn:aws:ec2:{region}:{self.owner_id}:capacity-reservation/{self.id}"
            ),
            "OwnerId": self.owner_id,
            "InstanceType": self.instance_type,
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": self.zone,
            "Tenancy": "default",
            "TotalInstanceCount": self.total,
            "AvailableInstanceCount": self.available,
            "State": self.state(now),
            "StartDate": self.start_date,
            "EndDateType": "limited" if self.end_date else "unlimited",
            "InstanceMatchCriteria": self.instance_match_criteria,
            "CreateDate": self.start_date,
            "ReservationType": self.reservation_type,
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())],
        }
        if self.end_date is not None:
            data["EndDate"] = self.end_date
        return data


class CapacityReservations:
    """Every reservation of one emulator; thread-safe (the server serves requests on threads)."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, CapacityReservation] = {}
        self._by_instance: dict[str, str] = {}
        self._ids = itertools.count(1)
        self.clock = clock or (lambda: datetime.now(UTC))

    def create(
        self,
        *,
        instance_type: str,
        zone: str,
        count: int,
        owner_id: str,
        reservation_type: str = DEFAULT,
        end_date: datetime | None = None,
        tags: Mapping[str, str] | None = None,
        instance_match_criteria: str = "targeted",
    ) -> CapacityReservation:
        if count < 1:
            raise ReservationError(
                "InvalidParameterValue", f"InstanceCount must be at least 1, got {count}"
            )
        if reservation_type not in RESERVATION_TYPES:
            raise ReservationError(
                "InvalidParameterValue",
                f"ReservationType must be default or capacity-block, got {reservation_type!r}",
            )
        if reservation_type == CAPACITY_BLOCK and end_date is None:
            raise ReservationError("MissingParameter", "a Capacity Block needs an end date")
        with self._lock:
            reservation = CapacityReservation(
                id=f"cr-{next(self._ids):017x}",
                instance_type=instance_type,
                zone=zone,
                total=count,
                owner_id=owner_id,
                reservation_type=reservation_type,
                end_date=end_date,
                tags=dict(tags or {}),
                instance_match_criteria=instance_match_criteria,
                start_date=self.clock(),
            )
            self._by_id[reservation.id] = reservation
            return reservation

    def cancel(self, reservation_id: str) -> None:
        with self._lock:
            self._get(reservation_id).cancelled = True

    def describe(
        self, ids: Iterable[str], filters: Mapping[str, list[str]], region: str
    ) -> list[dict[str, Any]]:
        """DescribeCapacityReservations' items; an unknown id is an error, as on EC2."""
        now = self.clock()
        with self._lock:
            wanted = list(ids)
            chosen = [self._get(i) for i in wanted] if wanted else list(self._by_id.values())
            return [r.to_response(now, region) for r in chosen if _matches(r, filters, now)]

    def take(self, reservation_id: str, instance_type: str, zone: str) -> tuple[str, str] | None:
        """(error code, message) when the launch cannot run in the reservation, else None."""
        with self._lock:
            reservation = self._by_id.get(reservation_id)
            if reservation is None:
                return (
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacity reservation ID '{reservation_id}' does not exist",
                )
            problem = reservation.launch_problem(instance_type, zone, self.clock())
            if problem is None:
                return None
            if reservation.state(self.clock()) == "active" and (
                instance_type != reservation.instance_type or zone != reservation.zone
            ):
                return ("InvalidParameterCombination", problem)
            return (RESERVATION_CAPACITY_EXCEEDED, problem)

    def assign(self, reservation_id: str, instance_ids: Iterable[str]) -> None:
        with self._lock:
            reservation = self._by_id[reservation_id]
            for instance_id in instance_ids:
                reservation.instances.add(instance_id)
                self._by_instance[instance_id] = reservation_id

    def release(self, instance_ids: Iterable[str]) -> None:
        """Terminated instances give their slots back."""
        with self._lock:
            for instance_id in instance_ids:
                reservation_id = self._by_instance.pop(instance_id, None)
                if reservation_id is not None:
                    self._by_id[reservation_id].instances.discard(instance_id)

    def reservation_of(self, instance_id: str) -> CapacityReservation | None:
        with self._lock:
            reservation_id = self._by_instance.get(instance_id)
            return self._by_id.get(reservation_id) if reservation_id else None

    def reset(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._by_instance.clear()

    def _get(self, reservation_id: str) -> CapacityReservation:
        reservation = self._by_id.get(reservation_id)
        if reservation is None:
            raise ReservationError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        return reservation


def _matches(
    reservation: CapacityReservation, filters: Mapping[str, list[str]], now: datetime
) -> bool:
    for name, values in filters.items():
        if name.startswith("tag:"):
            actual = reservation.tags.get(name[4:])
            if actual is None or actual not in values:
                return False
            continue
        actual_value = {
            "tag-key": None,
            "owner-id": reservation.owner_id,
            "state": reservation.state(now),
            "instance-type": reservation.instance_type,
            "availability-zone": reservation.zone,
            "reservation-type": reservation.reservation_type,
            "instance-match-criteria": reservation.instance_match_criteria,
        }.get(name, "")
        if name == "tag-key":
            if not set(values) & set(reservation.tags):
                return False
        elif actual_value not in values:
            return False
    return True
