"""Static NodePools (Karpenter v1.8 alpha, ``spec.replicas``): how many NodeClaims to create or
delete so a pool has exactly its replicas, and what a claim with no pods launches. Pure: no
I/O, no clock.

Semantics kept from Karpenter's static provisioning:
- the pool's NodeClaims not being deleted count; ``limits.nodes`` caps every claim of the pool,
  those being deleted included (a replacement may need room above ``replicas``);
- scaling down removes the claims that disrupt least: not launched or not initialized yet, then
  the fewest pods, then the newest (disruption budgets do not apply, PodDisruptionBudgets do:
  the claims are deleted and drained like any other);
- a new claim launches the cheapest offering the pool's requirements allow (it has no pods to
  fit), with every other compatible offering as a fallback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler_svc.core.model import (
    InstanceType,
    NodeClaimPlan,
    NodePool,
    OfferingOption,
    Resources,
    UnavailableOffering,
)
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    Requirements,
    is_well_known,
)


@dataclass(frozen=True)
class StaticClaim:
    """One of a static pool's NodeClaims, as scaling down ranks it."""

    name: str
    pods: int = 0
    initialized: bool = True
    created: str = ""  # creationTimestamp (RFC 3339 sorts as time)


@dataclass(frozen=True)
class StaticDecision:
    """What to do for one static pool: ``create`` new claims, ``delete`` these, and why fewer
    were created than missing (``limited``), as a person reads it."""

    create: int = 0
    delete: tuple[str, ...] = ()
    limited: str | None = None


def reconcile_static(
    pool: NodePool, active: Sequence[StaticClaim], deleting: int = 0
) -> StaticDecision:
    """The decision for ``pool`` with ``active`` claims (not being deleted) and ``deleting``
    claims on their way out."""
    if pool.replicas is None:
        return StaticDecision()
    missing = pool.replicas - len(active)
    if missing < 0:
        ranked = sorted(active, key=lambda c: (c.initialized, c.pods, _newest_first(c.created)))
        return StaticDecision(delete=tuple(c.name for c in ranked[:-missing]))
    if missing == 0:
        return StaticDecision()
    limit = pool.limits.nodes
    if limit is None:
        return StaticDecision(create=missing)
    room = max(0, limit - len(active) - deleting)
    if room >= missing:
        return StaticDecision(create=missing)
    return StaticDecision(
        create=room,
        limited=(
            f"limits.nodes={limit}: {len(active) + deleting} NodeClaims exist, "
            f"{missing} more wanted for replicas={pool.replicas}"
        ),
    )


def _newest_first(created: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in created)


def static_claim_plan(
    pool: NodePool,
    instance_types: Iterable[InstanceType],
    unavailable: frozenset[UnavailableOffering] = frozenset(),
    overhead: Resources | None = None,
) -> NodeClaimPlan | None:
    """A NodeClaim for ``pool`` with no pods: every offering its requirements allow whose type
    holds ``overhead`` (its DaemonSets), cheapest first. None when there is none."""
    requirements = Requirements.of(pool.requirements)
    labels_of_pool = pool.node_labels()
    need = (overhead or Resources()).as_mapping()
    options: list[OfferingOption] = []
    for instance_type in instance_types:
        allocatable = instance_type.allocatable.as_mapping()
        if any(allocatable.get(k, 0) < v for k, v in need.items()):
            continue
        for offering in instance_type.offerings:
            if not offering.available or (
                UnavailableOffering(instance_type.name, offering.zone, offering.capacity_type)
                in unavailable
            ):
                continue
            labels = {
                LABEL_INSTANCE_TYPE: instance_type.name,
                **instance_type.labels,
                **labels_of_pool,
                LABEL_ZONE: offering.zone,
                LABEL_CAPACITY_TYPE: offering.capacity_type,
            }
            if _admits(requirements, labels):
                options.append(
                    OfferingOption(
                        instance_type.name,
                        offering.zone,
                        offering.capacity_type,
                        offering.price_per_hour,
                    )
                )
    if not options:
        return None
    options.sort(key=lambda o: (o.price_per_hour, o.instance_type, o.zone, o.capacity_type))
    return NodeClaimPlan(
        nodepool=pool.name,
        requirements=pool.requirements,
        pods=(),
        requests=Resources(),
        offerings=tuple(options),
    )


def _admits(requirements: Requirements, labels: dict[str, str]) -> bool:
    """Whether a node with ``labels`` meets the pool's requirements; a custom key no label
    gives is set on the node from the requirement itself, so it does not rule a type out."""
    for key, value_set in requirements.items:
        value = labels.get(key)
        if value is None and not is_well_known(key):
            continue
        if not value_set.allows(value):
            return False
    return True
