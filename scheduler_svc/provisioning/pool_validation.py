"""Which NodePools a provisioning round may use, written back on their status.

A NodePool is usable when it is not being deleted, its EC2NodeClass exists and is valid, and
that class's selector terms resolve. Each check's outcome is written as a condition
(`ValidationSucceeded`, `NodeClassReady`) on the NodePool and its EC2NodeClass; an unusable pool
is reported in the round's result and left out, the others carry on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from scheduler_svc.core.model import NodePool
from scheduler_svc.core.reservations import CapacityReservation
from scheduler_svc.errors import InvalidObjectError, KubeApiError
from scheduler_svc.kube.convert import capacity_reservations_from_k8s, node_class_from_k8s
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, KubeObject
from scheduler_svc.kube.writer import KubeWriter, conditions_of
from scheduler_svc.nodeclass.readiness import NODECLASS_READY, first_unresolved
from scheduler_svc.provisioning.catalog import CatalogKey, catalog_key
from scheduler_svc.provisioning.status import ensure_condition
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ValidPool:
    model: NodePool
    obj: KubeObject
    node_class: KubeObject
    catalog_key: CatalogKey
    # The class's capacity reservations (its status): reserved offerings in its catalog.
    reservations: tuple[CapacityReservation, ...] = ()


class InvalidReport(Protocol):
    """Where the round records what it left out (RoundResult.invalid)."""

    invalid: list[str]


class PoolValidator:
    """Finds a round's usable NodePools and keeps their validation conditions current."""

    def __init__(self, *, mirror: ClusterMirror, writer: KubeWriter) -> None:
        self._mirror = mirror
        self._writer = writer
        self._reported_overlays: set[str] = set()

    async def valid_pools(
        self,
        nodepools: Iterable[NodePool],
        invalid: Iterable[InvalidObjectError],
        result: InvalidReport,
    ) -> list[ValidPool]:
        mirror = self._mirror
        for error in invalid:
            if error.kind == "NodePool" and error.name:
                result.invalid.append(str(error))
                await self._validation(NODE_POOLS, error.name, str(error))
            elif error.kind == "NodeOverlay":
                # Left out of the catalog (InstanceTypeCatalog applies only the valid ones).
                result.invalid.append(str(error))
                if str(error) not in self._reported_overlays:
                    self._reported_overlays.add(str(error))
                    log.warning("nodeoverlay_invalid", error=str(error))
        pools: list[ValidPool] = []
        for model in nodepools:
            obj = mirror.get(NODE_POOLS, model.name)
            if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            ref = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "nodeClassRef"
            ) or {}
            class_name = ref.get("name") if isinstance(ref, dict) else None
            node_class = mirror.get(EC2_NODE_CLASSES, class_name) if class_name else None
            if node_class is None:
                message = (
                    f"NodePool {model.name}: spec.template.spec.nodeClassRef: "
                    f"EC2NodeClass {class_name!r} not found"
                )
                result.invalid.append(message)
                await self._validation(NODE_POOLS, model.name, message)
                continue
            try:
                key = catalog_key(node_class)
                node_class_from_k8s(node_class)
            except InvalidObjectError as error:
                result.invalid.append(str(error))
                await self._validation(EC2_NODE_CLASSES, str(class_name), str(error))
                await self._validation(
                    NODE_POOLS, model.name, f"EC2NodeClass {class_name} is invalid: {error}"
                )
                continue
            await self._validation(EC2_NODE_CLASSES, str(class_name), None)
            await self._validation(NODE_POOLS, model.name, None)
            # Selector terms that resolve to nothing (the EC2NodeClass status controller's
            # conditions): every launch would fail, so the pool takes no pods meanwhile.
            unresolved = first_unresolved(conditions_of(node_class))
            if unresolved is not None:
                message = (
                    f"NodePool {model.name}: EC2NodeClass {class_name} is not ready: "
                    f"{unresolved.get('message') or unresolved.get('type')}"
                )
                result.invalid.append(message)
                await self._condition(NODE_POOLS, model.name, NODECLASS_READY, message)
                continue
            await self._condition(NODE_POOLS, model.name, NODECLASS_READY, None)
            pools.append(ValidPool(model, obj, node_class, key, _reservations(node_class)))
        return pools

    async def _validation(self, resource: Any, name: str, problem: str | None) -> None:
        await self._condition(resource, name, "ValidationSucceeded", problem)

    async def _condition(
        self, resource: Any, name: str, condition_type: str, problem: str | None
    ) -> None:
        obj = self._mirror.get(resource, name)
        if obj is None:
            return
        failed = "ValidationFailed" if condition_type == "ValidationSucceeded" else "NotReady"
        try:
            await ensure_condition(
                self._writer,
                resource,
                obj,
                condition_type,
                "False" if problem else "True",
                reason=failed if problem else condition_type,
                message=problem or "",
            )
        except KubeApiError as error:
            log.warning(
                "status_condition_write_failed",
                name=name,
                condition=condition_type,
                error=str(error),
            )


def _reservations(node_class: KubeObject) -> tuple[CapacityReservation, ...]:
    """The class's reservations; none (logged) when its status cannot be read."""
    try:
        return capacity_reservations_from_k8s(node_class)
    except InvalidObjectError as error:
        log.warning("nodeclass_reservations_unreadable", error=str(error))
        return ()
