"""Status conditions on NodePools and EC2NodeClasses, written only when they change."""

from __future__ import annotations

from typing import Literal

from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, KubeObject, Resource
from scheduler_svc.kube.writer import (
    KubeWriter,
    condition,
    conditions_of,
    name_of,
    utc_now,
    with_condition,
)


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
    """Set one condition (and `Ready` to follow a validation condition) on a NodePool or
    EC2NodeClass when it differs from what the object shows; True when it wrote."""
    updates = [(condition_type, status, reason, message)]
    if condition_type == "ValidationSucceeded":
        updates.append(("Ready", status, "Ready" if status == "True" else "NotReady", message))
    if all(
        (current := condition(obj, t)) is not None
        and current.get("status") == s
        and current.get("message", "") == m
        for t, s, _, m in updates
    ):
        return False
    generation = (obj.get("metadata") or {}).get("generation")
    conditions = conditions_of(obj)
    now = utc_now()
    for t, s, r, m in updates:
        conditions = with_condition(
            conditions,
            t,
            s,
            reason=r,
            message=m,
            now=now,
            observed_generation=generation if isinstance(generation, int) else None,
        )
    if resource == NODE_POOLS:
        await writer.patch_nodepool_status(name_of(obj), {"conditions": conditions})
    elif resource == EC2_NODE_CLASSES:
        await writer.patch_ec2nodeclass_status(name_of(obj), {"conditions": conditions})
    else:
        raise ValueError(f"no status conditions written for {resource}")
    return True
