"""Builders for disruption tests: a candidate node, a snapshot, in a line each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler_svc.core import InstanceType, NodePool, Pod, Resources
from scheduler_svc.core.disruption import (
    Candidate,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionPlan,
    DisruptionSettings,
    DisruptionSnapshot,
    NodePoolState,
)
from tests.scheduler_svc.core.builders import GIB, MIB, instance_type

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday, 09:00 UTC

# Shapes as EC2 has them; allocatable a little below capacity (kube-reserved), prices us-east-1.
CATALOG: tuple[InstanceType, ...] = (
    instance_type("c4.large", 1.93, 3.0, 0.10),
    instance_type("c4.xlarge", 3.92, 6.4, 0.199),
    instance_type("c4.2xlarge", 7.91, 13.6, 0.398),
    instance_type("t3a.2xlarge", 7.91, 29.5, 0.3008),
)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def app_pod(
    name: str,
    cpu_millis: int = 500,
    memory_mib: int = 512,
    labels: dict[str, str] | None = None,
    **kwargs: Any,
) -> Pod:
    """A pod of the seed's Deployment (label app=app): 500m / 512Mi by default."""
    request = Resources(cpu_millis=cpu_millis, memory_bytes=memory_mib * MIB)
    return Pod(name, labels=labels or {"app": "app"}, containers=(request,), **kwargs)


def pods(prefix: str, count: int, **kwargs: Any) -> tuple[CandidatePod, ...]:
    """``count`` ReplicaSet pods named ``prefix-i``."""
    return tuple(CandidatePod(app_pod(f"{prefix}-{i}"), **kwargs) for i in range(count))


def candidate(
    name: str,
    type_name: str,
    members: Sequence[CandidatePod] = (),
    *,
    created: float = 0.0,
    last_event: float | None = None,
    capacity_type: str = "on-demand",
    nodepool: str = "default",
    price: float | None = None,
    zone: str = "zone-a",
    **kwargs: Any,
) -> Candidate:
    """A node of ``type_name`` from ``CATALOG`` (created ``created`` seconds after T0)."""
    shape = next(t for t in CATALOG if t.name == type_name)
    offering = next(o for o in shape.offerings if o.zone == zone)
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": type_name,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": capacity_type,
        "daiku.dev/nodepool": nodepool,
    }
    return Candidate(
        name=name,
        nodeclaim=f"{nodepool}-{name}",
        nodepool=nodepool,
        created_at=at(created),
        instance_type=type_name,
        capacity_type=capacity_type,
        zone=zone,
        price_per_hour=offering.price_per_hour if price is None else price,
        allocatable=shape.allocatable,
        labels=labels,
        pods=tuple(members),
        last_pod_event_at=None if last_event is None else at(last_event),
        **kwargs,
    )


def pool(name: str = "default", **settings: Any) -> NodePoolState:
    """A NodePool with ``DisruptionSettings(**settings)``."""
    return NodePoolState(NodePool(name), DisruptionSettings(**settings))


def snapshot(
    candidates: Sequence[Candidate],
    pools: Sequence[NodePoolState] = (),
    catalog: Sequence[InstanceType] = CATALOG,
    **kwargs: Any,
) -> DisruptionSnapshot:
    """A snapshot of ``candidates`` (one default NodePool unless ``pools``)."""
    return DisruptionSnapshot(
        candidates=tuple(candidates),
        nodepools=tuple(pools) or (pool(),),
        instance_types=tuple(catalog),
        **kwargs,
    )


def blocked_messages(plan: DisruptionPlan) -> dict[str, str]:
    """Each blocked node's message (what its Event says), by node name."""
    return {b.node: b.message for b in plan.blocked}


ONE_CPU = 1000


def consolidating(**settings: Any) -> NodePoolState:
    """WhenEmptyOrUnderutilized after 30 s, no budget unless given (the default 10 % lets one
    of three nodes go at a time)."""
    options: dict[str, Any] = {"budgets": (), **settings}
    return pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        consolidate_after_seconds=30.0,
        expire_after_seconds=None,
        **options,
    )


def one_cpu_nodes(count: int) -> list[Candidate]:
    """``count`` c4.large ($0.10/h) holding one 1-CPU pod each."""
    return [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", ONE_CPU)),), created=0)
        for i in range(count)
    ]


__all__ = [
    "GIB",
    "ONE_CPU",
    "T0",
    "app_pod",
    "at",
    "blocked_messages",
    "candidate",
    "consolidating",
    "one_cpu_nodes",
    "pods",
    "pool",
    "snapshot",
]
