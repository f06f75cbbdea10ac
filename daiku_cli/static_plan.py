"""Static NodePools in `daiku plan`: the NodeClaims each static pool would create to reach its
replicas (as the live StaticCapacityController decides, with the core's `reconcile_static` and
`static_claim_plan`), offered to the pending pods as claims in flight, as the live provisioner
sees them; pods the solver puts there are listed on those claims."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from daiku_cli.planned_nodes import planned_node
from scheduler_svc.core import (
    ExistingPlacement,
    NodeClaimPlan,
    SchedulingInput,
    SchedulingResult,
)
from scheduler_svc.core.static import StaticClaim, reconcile_static, static_claim_plan


@dataclasses.dataclass(frozen=True)
class StaticPlan:
    """The static pools' new claims, by the in-flight node name they take pods under."""

    claims: dict[str, NodeClaimPlan]
    notes: tuple[str, ...] = ()


def plan_static(problem: SchedulingInput) -> tuple[SchedulingInput, StaticPlan]:
    """`problem` with each static pool's missing claims added as in-flight nodes."""
    claims: dict[str, NodeClaimPlan] = {}
    notes: list[str] = []
    nodes = list(problem.nodes)
    types = {t.name: t for t in problem.instance_types}
    for pool in problem.nodepools:
        if not pool.is_static:
            continue
        existing = [StaticClaim(n.name) for n in problem.nodes if n.nodepool() == pool.name]
        decision = reconcile_static(pool, existing)
        if decision.limited:
            notes.append(f"NodePool {pool.name}: {decision.limited}")
        if decision.delete:
            notes.append(
                f"NodePool {pool.name}: replicas={pool.replicas}, would delete "
                f"{', '.join(decision.delete)}"
            )
        if not decision.create:
            continue
        plan = static_claim_plan(pool, problem.instance_types, problem.unavailable_offerings)
        if plan is None:
            notes.append(f"NodePool {pool.name}: no instance type offering meets its requirements")
            continue
        chosen = plan.offerings[0]
        instance_type = types[chosen.instance_type]
        for index in range(decision.create):
            name = f"{pool.name}-static-{len(existing) + index + 1}"
            claims[name] = plan
            nodes.append(planned_node(name, instance_type, pool, chosen))
    return dataclasses.replace(problem, nodes=tuple(nodes)), StaticPlan(claims, tuple(notes))


def with_static_claims(result: SchedulingResult, static: StaticPlan) -> SchedulingResult:
    """`result` with the static claims first among the new claims, holding the pods the
    solver placed on them."""
    if not static.claims:
        return result
    placed = {p.node: p.pods for p in result.existing_placements}
    claims = [
        dataclasses.replace(plan, pods=tuple(placed.get(name, ())))
        for name, plan in static.claims.items()
    ]
    kept: Sequence[ExistingPlacement] = [
        p for p in result.existing_placements if p.node not in static.claims
    ]
    return SchedulingResult(
        new_claims=(*claims, *result.new_claims),
        existing_placements=tuple(kept),
        unschedulable=result.unschedulable,
    )
