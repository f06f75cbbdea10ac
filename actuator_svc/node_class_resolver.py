"""Subnets, security groups and AMIs from selector terms, cached with a refresh interval.

`resolve` is what a launch uses (the best subnet per zone, every security group, the newest
image per architecture); `describe` is the same resolution in full, for ResolveNodeClass
(every matching subnet, groups with names, the chosen images with names). `describe(...,
fresh=True)` looks again now and refreshes the cache, so launches that follow use what it
returned.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from actuator_svc.cloud.provider import (
    CapacityReservation,
    CloudProvider,
    Image,
    SecurityGroup,
    Subnet,
)
from actuator_svc.core.node_class import (
    ImageChoice,
    NodeClassSpec,
    newest_image_per_architecture,
)
from actuator_svc.errors import NothingSelectedError

T = TypeVar("T")
# A node needs an address for its primary interface; with fewer free, a launch would fail with
# InsufficientFreeAddressesInSubnet.
MIN_FREE_ADDRESSES = 1
# EC2 starts reclaiming a Capacity Block's instances this long before its end: from then on the
# block is "expiring" (Karpenter's state) and takes no launches.
BLOCK_RECLAIM_SECONDS = timedelta(minutes=30).total_seconds()


@dataclass(frozen=True)
class ResolvedNodeClass:
    """Where and from what a node class launches."""

    subnet_by_zone: dict[str, Subnet]
    security_group_ids: tuple[str, ...]
    image_by_architecture: dict[str, str]
    # Every usable subnet per zone, most free addresses first (subnet_by_zone holds the first):
    # a launch that finds one out of addresses goes on with the next.
    subnets_by_zone: dict[str, tuple[Subnet, ...]] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class NodeClassResolution:
    """What the selector terms select: every subnet (most free addresses first), every
    security group and the image a launch takes for each architecture (newest)."""

    subnets: tuple[Subnet, ...]
    security_groups: tuple[SecurityGroup, ...]
    images: tuple[Image, ...]
    reservations: tuple[CapacityReservation, ...] = ()


class NodeClassResolver:
    """Resolves selector terms; each distinct set of terms is looked up again after
    `refresh_seconds`."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        clock: Callable[[], float],
        refresh_seconds: float = 300.0,
        min_free_addresses: int = MIN_FREE_ADDRESSES,
    ) -> None:
        """`min_free_addresses`: a subnet with fewer free IPv4 addresses takes no launch."""
        self.min_free_addresses = min_free_addresses
        self._cloud = cloud
        self._clock = clock
        self._refresh_seconds = refresh_seconds
        self._cache: dict[str, tuple[float, Any]] = {}

    async def _cached(
        self,
        kind: str,
        terms: Sequence[Any],
        fetch: Callable[[], Awaitable[T]],
        *,
        fresh: bool,
    ) -> T:
        key = kind + json.dumps([asdict(t) for t in terms], sort_keys=True, default=dict)
        hit = self._cache.get(key)
        now = self._clock()
        if not fresh and hit is not None and now - hit[0] < self._refresh_seconds:
            value: T = hit[1]
            return value
        value = await fetch()
        self._cache[key] = (now, value)
        return value

    async def describe(
        self, node_class: NodeClassSpec, *, fresh: bool = False
    ) -> NodeClassResolution:
        """The full resolution; NothingSelectedError names the terms that match nothing."""
        subnets = await self._cached(
            "subnets",
            node_class.subnet_terms,
            lambda: self._cloud.find_subnets(node_class.subnet_terms),
            fresh=fresh,
        )
        groups = await self._cached(
            "security_groups",
            node_class.security_group_terms,
            lambda: self._cloud.find_security_groups(node_class.security_group_terms),
            fresh=fresh,
        )
        images = await self._cached(
            "images",
            node_class.image_terms,
            lambda: self._cloud.find_images(node_class.image_terms),
            fresh=fresh,
        )
        reservations: list[CapacityReservation] = []
        if node_class.capacity_reservation_terms:
            # Never cached: the free counts are what a reserved offering's room comes from.
            reservations = await self._cloud.find_capacity_reservations(
                node_class.capacity_reservation_terms
            )
        if not subnets:
            raise NothingSelectedError("node_class.subnet_selector_terms", "match no subnet")
        if not groups:
            raise NothingSelectedError(
                "node_class.security_group_selector_terms", "match no security group"
            )
        if not images:
            raise NothingSelectedError("node_class.ami_selector_terms", "match no available AMI")
        chosen = set(
            newest_image_per_architecture(
                [ImageChoice(i.id, i.architecture, i.creation_date) for i in images]
            ).values()
        )
        by_id = {i.id: i for i in images if i.id in chosen}
        return NodeClassResolution(
            # The order Karpenter's status shows: most free addresses first, then by id.
            subnets=tuple(sorted(subnets, key=lambda s: (-s.available_ip_count, s.id))),
            security_groups=tuple(groups),
            images=tuple(sorted(by_id.values(), key=lambda i: (i.architecture, i.id))),
            reservations=tuple(self._with_state(r) for r in reservations),
        )

    def _with_state(self, reservation: CapacityReservation) -> CapacityReservation:
        """`expiring` once a Capacity Block is within EC2's reclaim window."""
        end = reservation.end_time
        if reservation.reservation_type != "capacity-block" or end is None:
            return reservation
        now = datetime.fromtimestamp(self._clock(), UTC)
        if (end - now).total_seconds() > BLOCK_RECLAIM_SECONDS:
            return reservation
        return dataclasses.replace(reservation, state="expiring")

    async def resolve(self, node_class: NodeClassSpec) -> ResolvedNodeClass:
        """Resolve the node class for a launch; NothingSelectedError (an InvalidRequestError)
        names the terms that match nothing."""
        resolution = await self.describe(node_class)
        by_zone: dict[str, list[Subnet]] = {}
        # The subnet with the most free addresses in each zone first, as Karpenter picks; a
        # subnet with too few for a node is skipped up front (aws/karpenter-provider-aws#5234).
        for subnet in resolution.subnets:  # most free addresses first
            if subnet.available_ip_count >= self.min_free_addresses:
                by_zone.setdefault(subnet.zone, []).append(subnet)
        return ResolvedNodeClass(
            subnet_by_zone={zone: subnets[0] for zone, subnets in by_zone.items()},
            subnets_by_zone={zone: tuple(subnets) for zone, subnets in by_zone.items()},
            security_group_ids=tuple(g.id for g in resolution.security_groups),
            image_by_architecture={i.architecture: i.id for i in resolution.images},
        )
