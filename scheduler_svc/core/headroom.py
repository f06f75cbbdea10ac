"""Headroom (CapacityBuffer): spare room kept ready in a NodePool, as virtual pods the solver
places like pending pods but that never exist in the cluster. Pure: no I/O, no clock.

A buffer asks for room for ``replicas`` pods shaped like ``requests``, or for ``percentage`` %
of what the pods on the pool's nodes request (cpu and memory, whichever needs more units), in
units of ``requests``; ``limits`` caps the room in total. Its virtual pods select the pool
(``daiku.dev/nodepool``) and tolerate its taints; they live in a namespace no real pod can
have (``HEADROOM_NAMESPACE``), so nothing mistakes them for pods to bind or events to send.

Real pods come first: callers solve the pending pods, then the virtual ones against what is
there afterwards (decision 0017). Room a real pod took is room the next round finds missing,
so it is provisioned again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler_svc.core.model import Node, NodePool, Pod, Resources
from scheduler_svc.core.requirements import LABEL_NODEPOOL
from scheduler_svc.core.taints import Toleration

#: Not a valid Kubernetes namespace name: no real pod can ever have it.
HEADROOM_NAMESPACE = "daiku.dev:headroom"
#: The label each virtual pod carries with its buffer's name.
LABEL_CAPACITY_BUFFER = "daiku.dev/capacity-buffer"


@dataclass(frozen=True)
class CapacityBuffer:
    """One CapacityBuffer: ``replicas`` or ``percentage`` (exactly one) units of ``requests``
    in ``nodepool``, at most ``limits`` in total (None: no cap)."""

    name: str
    nodepool: str
    requests: Resources
    replicas: int | None = None
    percentage: int | None = None
    limits: Resources | None = None


@dataclass(frozen=True)
class BufferRoom:
    """How many units a buffer wants now, and why (for `daiku plan`, logs and metrics)."""

    buffer: CapacityBuffer
    units: int
    reason: str


def is_headroom(pod_key: str) -> bool:
    """Whether ``namespace/name`` is one of the virtual pods."""
    return pod_key.startswith(HEADROOM_NAMESPACE + "/")


def requested_in_pool(nodepool: str, nodes: Iterable[Node]) -> Resources:
    """What the pods on the pool's nodes (and claims in flight) request, headroom excluded."""
    total = Resources()
    for node in nodes:
        if node.nodepool() != nodepool:
            continue
        for pod in node.pods:
            if pod.namespace != HEADROOM_NAMESPACE:
                total = total + pod.requests()
    return total


def buffer_room(buffer: CapacityBuffer, requested: Resources) -> BufferRoom:
    """The units ``buffer`` wants given what its pool's pods ``requested``."""
    unit = buffer.requests.as_mapping()
    if buffer.replicas is not None:
        units, reason = buffer.replicas, f"replicas={buffer.replicas}"
    else:
        share = (buffer.percentage or 0) / 100
        used = requested.as_mapping()
        needed = [
            share * used.get(resource, 0) / amount
            for resource, amount in unit.items()
            if resource in ("cpu", "memory") and amount > 0
        ]
        units = math.ceil(max(needed, default=0.0) - 1e-9)
        reason = f"{buffer.percentage}% of the pool's requested cpu/memory"
    if buffer.limits is not None:
        cap = buffer.limits.as_mapping()
        for resource, amount in unit.items():
            if resource in cap and amount > 0 and units * amount > cap[resource]:
                units = cap[resource] // amount
                reason += f", capped by limits.{resource}"
    return BufferRoom(buffer, max(0, units), reason)


def virtual_pods(rooms: Sequence[BufferRoom], nodepools: Mapping[str, NodePool]) -> tuple[Pod, ...]:
    """The virtual pods of every buffer whose NodePool exists (one per unit)."""
    pods: list[Pod] = []
    for room in rooms:
        pool = nodepools.get(room.buffer.nodepool)
        if pool is None:
            continue
        tolerations = tuple(
            Toleration(key=t.key, operator="Equal", value=t.value, effect=t.effect)
            for t in pool.taints
        )
        pods += [
            Pod(
                name=f"{room.buffer.name}-{index}",
                namespace=HEADROOM_NAMESPACE,
                labels={LABEL_CAPACITY_BUFFER: room.buffer.name},
                containers=(room.buffer.requests,),
                node_selector={LABEL_NODEPOOL: pool.name},
                tolerations=tolerations,
            )
            for index in range(room.units)
        ]
    return tuple(pods)
