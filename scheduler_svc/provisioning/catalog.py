"""Instance types from the actuator, per EC2NodeClass kubelet settings, cached for a while.

Allocatable depends on the EC2NodeClass (kubelet reservations, maxPods, root volume), so the
catalog is fetched per distinct (kubelet, root volume) and cached `ttl_seconds` (prices and
availability move slowly; exhausted offerings the scheduler learns about are tracked apart, in
`UnavailableOfferingsCache`). `clock` is injected (seconds, monotonic).

NodeOverlays (`overlays`, read from the mirror on every call) are applied here, so every reader
of the catalog (provisioning, disruption's simulations, a launched claim's capacity) sees the
same adjusted prices and extended resources. The adjusted catalog is cached per fetched
catalog and overlay set: the same tuple comes back until either changes, which keeps the
solver's catalog indexes cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from scheduler_svc.core.model import InstanceType
from scheduler_svc.core.nodeclass import KubeletSpec
from scheduler_svc.core.overlay import NodeOverlay, apply_overlays
from scheduler_svc.core.zone_ids import with_offering_zone_ids
from scheduler_svc.kube.convert import (
    kubelet_from_k8s,
    node_class_from_k8s,
    zone_ids_from_node_class,
)
from scheduler_svc.kube.resources import KubeObject

CatalogKey = tuple[KubeletSpec | None, int]


class InstanceTypeSource(Protocol):
    async def list_instance_types(
        self,
        *,
        kubelet: KubeletSpec | None = None,
        root_volume_size_bytes: int = 0,
    ) -> tuple[InstanceType, ...]: ...


def catalog_key(node_class: KubeObject) -> CatalogKey:
    """What the catalog of `node_class` depends on. Raises InvalidObjectError. A root volume
    that grows (`ebs.maxVolumeSize`) is priced at its cap: the solver packs against it, and each
    claim launches with the volume its pods need (`core.root_volume`)."""
    spec = node_class_from_k8s(node_class)
    return (
        kubelet_from_k8s(node_class),
        spec.root_volume_max_size_bytes or spec.root_volume_size_bytes,
    )


class InstanceTypeCatalog:
    """`instance_types(node_class)`: the actuator's catalog for that class, cached."""

    def __init__(
        self,
        source: InstanceTypeSource,
        *,
        ttl_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        overlays: Callable[[], tuple[NodeOverlay, ...]] = tuple,
    ) -> None:
        self._source = source
        self._ttl_seconds = ttl_seconds
        self._clock = clock
        self._overlays = overlays
        self._cache: dict[CatalogKey, tuple[float, tuple[InstanceType, ...]]] = {}
        # (fetched catalog, overlays) -> the catalog with them applied; one entry per class key.
        self._overlaid: dict[
            CatalogKey,
            tuple[tuple[InstanceType, ...], tuple[NodeOverlay, ...], tuple[InstanceType, ...]],
        ] = {}
        # The last catalog given each zone-id map, by the fetched catalog's key: the same tuple
        # again while neither changes (the solver's index cache matches it by identity).
        self._with_ids: dict[
            tuple[CatalogKey, frozenset[tuple[str, str]]],
            tuple[tuple[InstanceType, ...], tuple[InstanceType, ...]],
        ] = {}

    def _with_overlays(
        self, key: CatalogKey, types: tuple[InstanceType, ...]
    ) -> tuple[InstanceType, ...]:
        overlays = self._overlays()
        if not overlays:
            return types
        cached = self._overlaid.get(key)
        if cached is not None and cached[0] is types and cached[1] == overlays:
            return cached[2]
        applied = apply_overlays(types, overlays)
        self._overlaid[key] = (types, overlays, applied)
        return applied

    async def instance_types(self, node_class: KubeObject) -> tuple[InstanceType, ...]:
        """The catalog for `node_class` (ActuatorError when the actuator fails and nothing is
        cached; a stale copy is served instead when there is one), its offerings carrying the
        zone ids of the class's resolved subnets (Karpenter's source for them)."""
        types = await self._fetched(node_class)
        ids = zone_ids_from_node_class(node_class)
        if not ids:
            return types
        ident = (catalog_key(node_class), frozenset(ids.items()))
        cached = self._with_ids.get(ident)
        if cached is not None and cached[0] is types:
            return cached[1]
        labelled = with_offering_zone_ids(types, ids)
        self._with_ids[ident] = (types, labelled)
        return labelled

    async def _fetched(self, node_class: KubeObject) -> tuple[InstanceType, ...]:
        key = catalog_key(node_class)
        cached = self._cache.get(key)
        now = self._clock()
        if cached is not None and now - cached[0] < self._ttl_seconds:
            return self._with_overlays(key, cached[1])
        try:
            types = await self._source.list_instance_types(
                kubelet=key[0], root_volume_size_bytes=key[1]
            )
        except Exception:
            if cached is not None:
                return self._with_overlays(key, cached[1])
            raise
        self._cache[key] = (now, types)
        return self._with_overlays(key, types)

    def lookup(self, node_class: KubeObject, instance_type: str) -> InstanceType | None:
        """A cached instance type by name (None when not fetched yet)."""
        key = catalog_key(node_class)
        cached = self._cache.get(key)
        if cached is None:
            return None
        types = self._with_overlays(key, cached[1])
        return next((t for t in types if t.name == instance_type), None)
