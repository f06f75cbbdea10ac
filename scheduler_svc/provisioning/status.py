"""Status conditions on NodePools and EC2NodeClasses, written only when they change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from scheduler_svc.errors import KubeConflictError, KubeNotFoundError
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, KubeObject, Resource
from scheduler_svc.kube.writer import (
    KubeWriter,
    condition,
    conditions_of,
    name_of,
    status_of,
    utc_now,
    with_condition,
)
from scheduler_svc.nodeclass.readiness import NODECLASS_READINESS, NODEPOOL_READINESS, ready_of


def _summarized(resource: Resource) -> Sequence[str]:
    if resource == NODE_POOLS:
        return NODEPOOL_READINESS
    if resource == EC2_NODE_CLASSES:
        return NODECLASS_READINESS
    raise ValueError(f"no status conditions written for {resource}")


async def ensure_condition(
    writer: KubeWriter,
    resource: Resource,
    obj: KubeObject,
    condition_type: str,
    status: Literal["True", "False", "Unknown"],
    *,
    reason: str,
    message: str = "",
) -> bool:
    """Set one condition on a NodePool or EC2NodeClass, and `Ready` when the condition is one
    it summarizes (`scheduler_svc.nodeclass.readiness`), when they differ from what the object
    shows; True when it wrote. The write starts from a fresh read and is conditional on its
    resourceVersion (the EC2NodeClass status controller writes the same list)."""
    summarized = _summarized(resource)
    if _holds(obj, condition_type, status, message, summarized):
        return False

    def new_status(current: KubeObject) -> dict[str, Any] | None:
        if _holds(current, condition_type, status, message, summarized):
            return None
        generation = (current.get("metadata") or {}).get("generation")
        observed = generation if isinstance(generation, int) else None
        now = utc_now()
        conditions = with_condition(
            conditions_of(current),
            condition_type,
            status,
            reason=reason,
            message=message,
            now=now,
            observed_generation=observed,
        )
        if condition_type in summarized:
            ready, ready_reason, ready_message = ready_of(conditions, summarized)
            conditions = with_condition(
                conditions,
                "Ready",
                ready,
                reason=ready_reason,
                message=ready_message,
                now=now,
                observed_generation=observed,
            )
        return {**status_of(current), "conditions": conditions}

    try:
        written = await writer.update_status(resource, name_of(obj), new_status)
    except (KubeNotFoundError, KubeConflictError):
        return False
    return written is not None


def _holds(
    obj: KubeObject,
    condition_type: str,
    status: str,
    message: str,
    summarized: Sequence[str],
) -> bool:
    """Whether `obj` already shows the condition (and the `Ready` it implies)."""
    current = condition(obj, condition_type)
    if current is None or current.get("status") != status or current.get("message", "") != message:
        return False
    if condition_type not in summarized:
        return True
    ready, _reason, ready_message = ready_of(conditions_of(obj), summarized)
    shown = condition(obj, "Ready")
    return (
        shown is not None
        and shown.get("status") == ready
        and shown.get("message", "") == ready_message
    )
