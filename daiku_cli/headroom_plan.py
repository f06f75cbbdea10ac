"""CapacityBuffers in `daiku plan`: after the real pods are planned, the buffers' virtual pods
are solved against the nodes and the claims just planned, each holding the real pods the plan
put there (so room never takes a real pod's place), and their new claims are added. The plan
reports, per buffer, where its room went. (Live, a claim in flight shows no pods yet, so the
provisioner solves the still-pending real pods again beside the virtual ones and launches only
claims holding virtual pods alone; the outcome is the same room.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from daiku_cli.planned_nodes import planned_node
from scheduler_svc.core import Node, SchedulingInput, SchedulingResult, solve
from scheduler_svc.core.headroom import (
    LABEL_CAPACITY_BUFFER,
    CapacityBuffer,
    buffer_room,
    is_headroom,
    requested_in_pool,
    virtual_pods,
)


def _with_placed(problem: SchedulingInput, result: SchedulingResult) -> list[Node]:
    """The existing nodes with the pods the plan put on them."""
    pods = {p.key: p for p in problem.pods}
    placed = {p.node: p.pods for p in result.existing_placements}
    return [
        dataclasses.replace(n, pods=(*n.pods, *(pods[k] for k in placed.get(n.name, ()))))
        if n.name in placed
        else n
        for n in problem.nodes
    ]


def _claims_in_flight(problem: SchedulingInput, result: SchedulingResult) -> list[Node]:
    pods = {p.key: p for p in problem.pods}
    types = {t.name: t for t in problem.instance_types}
    pools = {p.name: p for p in problem.nodepools}
    nodes = []
    for index, claim in enumerate(result.new_claims):
        chosen = claim.offerings[0]
        instance_type, pool = types[chosen.instance_type], pools[claim.nodepool]
        claim_pods = (pods[k] for k in claim.pods if k in pods)
        nodes.append(planned_node(f"planned-{index + 1}", instance_type, pool, chosen, claim_pods))
    return nodes


def plan_headroom(
    problem: SchedulingInput, result: SchedulingResult, buffers: tuple[CapacityBuffer, ...]
) -> tuple[SchedulingResult, list[dict[str, Any]]]:
    """`result` with the buffers' room added, and the per-buffer report."""
    if not buffers:
        return result, []
    pools = {p.name: p for p in problem.nodepools if not p.is_static}
    rooms = [buffer_room(b, requested_in_pool(b.nodepool, problem.nodes)) for b in buffers]
    pods = virtual_pods(rooms, pools)
    planned = _claims_in_flight(problem, result)
    second = solve(
        dataclasses.replace(
            problem,
            pods=pods,
            nodepools=tuple(pools.values()),
            nodes=(*_with_placed(problem, result), *planned),
        )
    )
    room_claims = [c for c in second.new_claims if c.pods and all(is_headroom(k) for k in c.pods)]
    where: dict[str, str] = {}
    for claim in room_claims:
        where.update(dict.fromkeys(claim.pods, "new"))
    planned_names = {n.name for n in planned}
    for placement in second.existing_placements:
        kind = "planned" if placement.node in planned_names else "existing"
        where.update({k: kind for k in placement.pods if is_headroom(k)})
    report = []
    for room in rooms:
        mine = [p.key for p in pods if p.labels.get(LABEL_CAPACITY_BUFFER) == room.buffer.name]
        report.append(
            {
                "capacityBuffer": room.buffer.name,
                "nodePool": room.buffer.nodepool,
                "pods": len(mine),
                "why": room.reason,
                "onNewNodeClaims": sum(1 for k in mine if where.get(k) == "new"),
                "onPlannedNodeClaims": sum(1 for k in mine if where.get(k) == "planned"),
                "onExistingNodes": sum(1 for k in mine if where.get(k) == "existing"),
                "unplaced": sum(1 for k in mine if k not in where),
            }
        )
    merged = SchedulingResult(
        new_claims=(*result.new_claims, *room_claims),
        existing_placements=result.existing_placements,
        unschedulable=result.unschedulable,
    )
    return merged, report


def headroom_lines(report: list[dict[str, Any]]) -> list[str]:
    """The table's headroom section."""
    return [
        f"Headroom {r['capacityBuffer']} (NodePool {r['nodePool']}, {r['why']}): {r['pods']} "
        f"pods: {r['onNewNodeClaims']} on new NodeClaims, {r['onPlannedNodeClaims']} beside "
        f"the planned pods, {r['onExistingNodes']} on existing nodes, {r['unplaced']} unplaced"
        for r in report
    ]
