"""Subnets, security groups and AMIs from selector terms, cached with a refresh interval."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from actuator_svc.cloud.provider import CloudProvider, Subnet
from actuator_svc.core.node_class import (
    ImageChoice,
    NodeClassSpec,
    newest_image_per_architecture,
)
from actuator_svc.errors import InvalidRequestError

T = TypeVar("T")


@dataclass(frozen=True)
class ResolvedNodeClass:
    """Where and from what a node class launches."""

    subnet_by_zone: dict[str, Subnet]
    security_group_ids: tuple[str, ...]
    image_by_architecture: dict[str, str]


class NodeClassResolver:
    """Resolves selector terms; each distinct set of terms is looked up again after
    `refresh_seconds`."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        clock: Callable[[], float],
        refresh_seconds: float = 300.0,
    ) -> None:
        self._cloud = cloud
        self._clock = clock
        self._refresh_seconds = refresh_seconds
        self._cache: dict[str, tuple[float, Any]] = {}

    async def _cached(
        self, kind: str, terms: Sequence[Any], fetch: Callable[[], Awaitable[T]]
    ) -> T:
        key = kind + json.dumps([asdict(t) for t in terms], sort_keys=True, default=dict)
        hit = self._cache.get(key)
        now = self._clock()
        if hit is not None and now - hit[0] < self._refresh_seconds:
            value: T = hit[1]
            return value
        fresh = await fetch()
        self._cache[key] = (now, fresh)
        return fresh

    async def resolve(self, node_class: NodeClassSpec) -> ResolvedNodeClass:
        """Resolve the node class; InvalidRequestError names the terms that match nothing."""
        subnets = await self._cached(
            "subnets",
            node_class.subnet_terms,
            lambda: self._cloud.find_subnets(node_class.subnet_terms),
        )
        groups = await self._cached(
            "security_groups",
            node_class.security_group_terms,
            lambda: self._cloud.find_security_groups(node_class.security_group_terms),
        )
        images = await self._cached(
            "images",
            node_class.image_terms,
            lambda: self._cloud.find_images(node_class.image_terms),
        )
        if not subnets:
            raise InvalidRequestError("node_class.subnet_selector_terms", "match no subnet")
        if not groups:
            raise InvalidRequestError(
                "node_class.security_group_selector_terms", "match no security group"
            )
        if not images:
            raise InvalidRequestError("node_class.ami_selector_terms", "match no available AMI")
        by_zone: dict[str, Subnet] = {}
        for subnet in subnets:
            # The subnet with the most free addresses in each zone, as Karpenter picks.
            best = by_zone.get(subnet.zone)
            if best is None or subnet.available_ip_count > best.available_ip_count:
                by_zone[subnet.zone] = subnet
        return ResolvedNodeClass(
            subnet_by_zone=by_zone,
            security_group_ids=tuple(groups),
            image_by_architecture=newest_image_per_architecture(
                [ImageChoice(i.id, i.architecture, i.creation_date) for i in images]
            ),
        )
