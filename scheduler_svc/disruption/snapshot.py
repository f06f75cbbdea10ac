"""The mirror as the disruption core's `DisruptionSnapshot` (shared by the controller and
`daiku explain node`, so both see the same thing).

Candidates are the registered Nodes of daiku's NodeClaims; every other Node, and claims whose
Node has not registered yet (in flight), can take pods. A candidate's price is its offering in
the instance-type catalog, else the claim's `daiku.dev/offerings` annotation (the CLI has no
catalog). EC2NodeClass hashes leave AMIs, subnets and security groups out: a candidate carries
the AMI its claim launched with (`status.imageID`) and the subnet and security groups its
instance runs in (annotations `daiku.dev/subnet-id`, `daiku.dev/security-group-ids`, recorded
at launch), and the class the AMIs, subnets and security groups it resolves to
(`status.amis`/`status.subnets`/`status.securityGroups`, written by `scheduler_svc.nodeclass`),
which drift compares. A claim without the annotations (launched before they were recorded)
carries None: never drifted for lack of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from scheduler_svc.core.disruption import (
    Candidate,
    DisruptionSettingsError,
    DisruptionSnapshot,
    NodePoolState,
    PodDisruptionBudget,
)
from scheduler_svc.core.model import InstanceType, Node, UnavailableOffering
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert_disruption import (
    candidate_pod_from_k8s,
    claim_facts_from_k8s,
    node_conditions_from_k8s,
    nodeclass_state,
    nodepool_state_from_k8s,
    pdb_from_k8s,
    recorded_price,
    recorded_security_group_ids,
)
from scheduler_svc.kube.resources import (
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    KubeObject,
)
from scheduler_svc.kube.writer import DISRUPTED_TAINT_KEY
from scheduler_svc.state.cluster import ClusterMirror
from scheduler_svc.state.core_snapshot import CoreSnapshotter
from scheduler_svc.state.nominations import Nominations

log = structlog.get_logger(__name__)

# Re-exported: callers and tests import them from here.
__all__ = [
    "build_snapshot",
    "catalog_instance_types",
    "nodeclass_state",
    "pdb_from_k8s",
    "recorded_security_group_ids",
]


def _catalog_price(
    types: Mapping[str, InstanceType], instance_type: str, zone: str, capacity: str
) -> float | None:
    found = types.get(instance_type)
    if found is None:
        return None
    for offering in found.offerings:
        if offering.zone == zone and offering.capacity_type == capacity:
            return offering.price_per_hour
    return None


def _has_disrupted_taint(node: Node) -> bool:
    return any(t.key == DISRUPTED_TAINT_KEY for t in node.taints)


def build_snapshot(  # noqa: PLR0912 - one pass over the mirror's kinds
    mirror: ClusterMirror,
    snapshotter: CoreSnapshotter,
    *,
    instance_types: Iterable[InstanceType] = (),
    last_pod_event_at: Mapping[str, datetime] | None = None,
    disrupting: Iterable[str] = (),
    unavailable: frozenset[UnavailableOffering] = frozenset(),
    nominations: Nominations | None = None,
    nomination_window_seconds: float = 20.0,
    initialized_at: Mapping[str, datetime] | None = None,
) -> DisruptionSnapshot:
    """The disruption core's view of `mirror` now; malformed objects are logged and left out.

    `disrupting`: node names the caller is disrupting (added to those whose claim or node is
    being deleted or carries the disrupted taint). `nominations`: pods the provisioner planned
    onto nodes; a candidate with some still pending is nominated until the window
    (`nomination_window_seconds`) has run from the later of its last nomination and
    `initialized_at[node]` (when it was first seen initialized: the default-scheduler cannot
    bind before, so a slow launch does not use the window up)."""
    core = snapshotter.snapshot()
    for error in core.invalid:
        log.debug("disruption_object_invalid", error=str(error))
    types = tuple(instance_types)
    by_type = {t.name: t for t in types}
    events = last_pod_event_at or {}
    claims_by_node: dict[str, KubeObject] = {}
    for claim_obj in mirror.objects(NODE_CLAIMS).values():
        status = claim_obj.get("status")
        node_name = status.get("nodeName") if isinstance(status, dict) else None
        if isinstance(node_name, str) and node_name:
            claims_by_node[node_name] = claim_obj
    busy = set(disrupting)
    candidates: list[Candidate] = []
    others: list[Node] = []
    for node in core.nodes:
        claim = None if node.is_in_flight else claims_by_node.get(node.name)
        if claim is None:
            others.append(node)
            continue
        facts = claim_facts_from_k8s(claim)
        if facts.is_deleting or _has_disrupted_taint(node):
            busy.add(node.name)
        instance_type = node.labels.get(LABEL_INSTANCE_TYPE, "")
        zone = node.labels.get(LABEL_ZONE, "")
        capacity = node.labels.get(LABEL_CAPACITY_TYPE, "")
        price = _catalog_price(by_type, instance_type, zone, capacity)
        if price is None:
            price = recorded_price(claim, instance_type, zone, capacity)
        pods = tuple(
            candidate_pod_from_k8s(mirror.get(PODS, pod.key) or {}, pod) for pod in node.pods
        )
        nominated = (
            None if nominations is None else nominations.pending_on((node.name, facts.name), mirror)
        )
        nominated_until = None
        if nominated is not None:
            start = max(nominated.at, (initialized_at or {}).get(node.name, nominated.at))
            nominated_until = start + timedelta(seconds=nomination_window_seconds)
        candidates.append(
            Candidate(
                name=node.name,
                nodeclaim=facts.name,
                nodepool=facts.nodepool,
                created_at=facts.created_at,
                instance_type=instance_type,
                capacity_type=capacity,
                zone=zone,
                price_per_hour=price,
                allocatable=node.allocatable,
                labels=node.labels,
                taints=node.taints,
                pods=pods,
                last_pod_event_at=events.get(node.name),
                nodepool_hash=facts.nodepool_hash,
                nodeclass_hash=facts.nodeclass_hash,
                subnet_id=facts.subnet_id,
                security_group_ids=facts.security_group_ids,
                image_id=facts.image_id,
                is_initialized=facts.is_initialized,
                nominated_pods=0 if nominated is None else len(nominated.pods),
                nominated_until=nominated_until,
                conditions=node_conditions_from_k8s(mirror.get(NODES, node.name)),
                rebalance_recommended_at=facts.rebalance_recommended_at,
                drifted_since=facts.drifted_since,
                room_held_for=facts.room_held_for,
                room_held_until=facts.room_held_until,
            )
        )
    pools: list[NodePoolState] = []
    for model in core.nodepools:
        obj = mirror.get(NODE_POOLS, model.name)
        if obj is None:
            continue
        try:
            pools.append(nodepool_state_from_k8s(obj, model))
        except DisruptionSettingsError as error:
            log.warning("disruption_nodepool_invalid", nodepool=model.name, error=str(error))
    classes = [nodeclass_state(obj) for obj in mirror.objects(EC2_NODE_CLASSES).values()]
    pdbs: list[PodDisruptionBudget] = []
    for obj in mirror.objects(POD_DISRUPTION_BUDGETS).values():
        try:
            pdbs.append(pdb_from_k8s(obj))
        except InvalidObjectError as error:
            log.warning("disruption_pdb_invalid", error=str(error))
    return DisruptionSnapshot(
        candidates=tuple(candidates),
        nodepools=tuple(pools),
        instance_types=types,
        nodeclasses=tuple(classes),
        other_nodes=tuple(others),
        daemonsets=core.daemonsets,
        pdbs=tuple(pdbs),
        pending_pods=core.pending_pods,
        disrupting=frozenset(busy),
        unavailable_offerings=unavailable,
        namespaces=core.namespaces,
    )


class InstanceTypeCatalogLike(Protocol):
    async def instance_types(self, node_class: KubeObject) -> tuple[InstanceType, ...]: ...


async def catalog_instance_types(
    mirror: ClusterMirror, catalog: InstanceTypeCatalogLike
) -> tuple[InstanceType, ...]:
    """Instance types of every EC2NodeClass's catalog, by name (the first class's allocatable
    wins when classes differ: replacements are launched from their NodePool's class anyway)."""
    merged: dict[str, InstanceType] = {}
    for node_class in mirror.objects(EC2_NODE_CLASSES).values():
        try:
            types = await catalog.instance_types(node_class)
        except InvalidObjectError as error:
            log.warning("disruption_nodeclass_invalid", error=str(error))
            continue
        for instance_type in types:
            merged.setdefault(instance_type.name, instance_type)
    return tuple(merged.values())
