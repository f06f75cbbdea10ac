"""The port to the cloud: what the actuator needs from EC2 and SQS, and nothing more.

Every method may raise:
- `CloudUnavailableError` when throttling or server errors outlast the implementation's bounded,
  jittered retries (callers may retry later);
- `CloudPermanentError` for errors no retry can fix (unauthorized, invalid parameters).
Insufficient capacity is not an exception: `create_fleet` reports it in `FleetResult.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from actuator_svc.core.launch_template import LaunchTemplateConfig
from actuator_svc.core.node_class import (
    CapacityReservationTerm,
    ImageTerm,
    SecurityGroupTerm,
    SubnetTerm,
)


@dataclass(frozen=True)
class Subnet:
    """A subnet a node can be launched into."""

    id: str
    zone: str
    available_ip_count: int
    zone_id: str = ""  # e.g. use1-az1: the same physical zone in every account


@dataclass(frozen=True)
class SecurityGroup:
    """A security group: its id and its GroupName."""

    id: str
    name: str = ""


@dataclass(frozen=True)
class Image:
    """An AMI."""

    id: str
    name: str
    architecture: str  # x86_64 | arm64
    creation_date: str  # ISO 8601; compares in time order


@dataclass(frozen=True)
class CapacityReservation:
    """An active capacity reservation (On-Demand Capacity Reservation or Capacity Block)."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    reservation_type: str  # default | capacity-block
    instance_match_criteria: str  # open | targeted
    available_instance_count: int
    total_instance_count: int
    end_time: datetime | None = None
    state: str = "active"  # active | expiring (a block EC2 is reclaiming)


@dataclass(frozen=True)
class FleetOverride:
    """One instance type in one subnet; lower priority numbers are tried first (on-demand)."""

    instance_type: str
    subnet_id: str
    zone: str
    priority: float


@dataclass(frozen=True)
class FleetTemplate:
    """A launch template and the overrides launched from it."""

    launch_template_name: str
    overrides: tuple[FleetOverride, ...]


@dataclass(frozen=True)
class FleetRequest:
    """One instant CreateFleet call for one instance."""

    client_token: str
    capacity_type: str
    allocation_strategy: str
    templates: tuple[FleetTemplate, ...]
    tags: Mapping[str, str]  # on the instance and its volumes


@dataclass(frozen=True)
class FleetError:
    """One entry of a CreateFleet response's Errors[]; type/zone empty when it names none."""

    instance_type: str
    zone: str
    code: str
    message: str


@dataclass(frozen=True)
class FleetResult:
    """What an instant CreateFleet call did: the instance launched (if any) and the errors."""

    instance_id: str | None
    instance_type: str
    zone: str
    errors: tuple[FleetError, ...]


@dataclass(frozen=True)
class Instance:
    """An EC2 instance as the actuator sees it. ``subnet_id`` and ``security_group_ids``
    (sorted) are where it runs: what drift compares with the EC2NodeClass's resolved sets
    (empty: not known)."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    image_id: str
    launch_time: datetime | None
    tags: Mapping[str, str]
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    # The capacity reservation it runs in (capacity type reserved) and that one's type.
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""


@dataclass(frozen=True)
class LaunchTemplate:
    """A launch template: its name and when it was created (epoch seconds)."""

    name: str
    created_seconds: float


@dataclass(frozen=True)
class QueueMessage:
    """One SQS message."""

    receipt_handle: str
    body: str


class CloudProvider(Protocol):
    """EC2 and SQS as the actuator uses them."""

    async def describe_instance_types(self) -> dict[str, dict[str, Any]]:
        """Every instance type of the region, DescribeInstanceTypes-shaped, keyed by name."""
        ...

    async def instance_type_zones(self) -> dict[str, list[str]]:
        """The zones each instance type is offered in."""
        ...

    async def on_demand_prices(self) -> dict[str, float]:
        """Linux on-demand USD/hour per type; CloudUnavailableError when no source answers."""
        ...

    async def spot_prices(self) -> dict[tuple[str, str], float]:
        """The latest spot price per (instance type, zone)."""
        ...

    async def find_subnets(self, terms: Sequence[SubnetTerm]) -> list[Subnet]:
        """Subnets matching any term; empty when none does."""
        ...

    async def find_security_groups(self, terms: Sequence[SecurityGroupTerm]) -> list[SecurityGroup]:
        """The security groups matching any term, by id; empty when none does."""
        ...

    async def find_images(self, terms: Sequence[ImageTerm]) -> list[Image]:
        """Available images matching any term (an alias matches every architecture)."""
        ...

    async def find_capacity_reservations(
        self, terms: Sequence[CapacityReservationTerm]
    ) -> list[CapacityReservation]:
        """Active reservations matching any term (none: an empty list, not an error)."""
        ...

    async def ensure_launch_template(self, config: LaunchTemplateConfig) -> None:
        """Create the launch template named `config.name` unless it exists (idempotent)."""
        ...

    async def find_launch_templates(self, tags: Mapping[str, str]) -> list[LaunchTemplate]:
        """The launch templates carrying all `tags`."""
        ...

    async def delete_launch_template(self, name: str) -> None:
        """Delete a launch template; one already gone is not an error. A later CreateFleet
        naming it from a template this process ensured re-creates it."""
        ...

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        """One instant CreateFleet call. Capacity errors are in the result, not raised; a
        capacity error raised by the call itself comes back as one FleetError naming no type."""
        ...

    async def find_instances(
        self,
        tags: Mapping[str, str],
        *,
        include_terminated: bool = False,
        instance_ids: Sequence[str] | None = None,
    ) -> list[Instance]:
        """Instances carrying all `tags` (terminated ones only when asked), only those of
        `instance_ids` when given (unknown ids are simply not found)."""
        ...

    async def terminate_instances(self, instance_ids: Sequence[str]) -> dict[str, str]:
        """Terminate; returns each instance's state after the call. An unknown id raises
        CloudPermanentError."""
        ...

    async def queue_url(self, queue: str) -> str:
        """The URL of a queue given by name or URL."""
        ...

    async def receive_messages(self, queue_url: str, wait_seconds: int) -> list[QueueMessage]:
        """Long-poll up to 10 messages."""
        ...

    async def delete_message(self, queue_url: str, receipt_handle: str) -> None:
        """Delete one received message."""
        ...

    async def release_message(self, queue_url: str, receipt_handle: str) -> None:
        """Make one received message visible again at once (visibility timeout 0)."""
        ...
