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

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from scheduler_svc.core.disruption import (
    DO_NOT_DISRUPT_ANNOTATIONS,
    NODECLASS_HASH_ANNOTATION,
    NODEPOOL_HASH_ANNOTATION,
    SECURITY_GROUP_IDS_ANNOTATION,
    SUBNET_ID_ANNOTATION,
    Candidate,
    CandidatePod,
    DisruptionSettings,
    DisruptionSettingsError,
    DisruptionSnapshot,
    NodeClassState,
    NodePoolState,
    PodDisruptionBudget,
    accepted_nodeclass_hashes,
    nodeclass_hash,
    nodepool_hash,
)
from scheduler_svc.core.model import InstanceType, LabelSelector, Node, UnavailableOffering
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import _Reader
from scheduler_svc.kube.resources import (
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    KubeObject,
)
from scheduler_svc.kube.writer import is_condition_true, parse_timestamp
from scheduler_svc.provisioning.nodeclaim_template import OFFERINGS_ANNOTATION
from scheduler_svc.state.cluster import ClusterMirror
from scheduler_svc.state.core_snapshot import CoreSnapshotter
from scheduler_svc.state.nominations import Nominations

log = structlog.get_logger(__name__)

DISRUPTED_TAINT_KEY = "daiku.dev/disrupted"


def _section(obj: KubeObject, key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _metadata(obj: KubeObject) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _annotations(obj: KubeObject) -> dict[str, str]:
    annotations = _metadata(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def owner_kind(pod: KubeObject) -> str | None:
    """The kind of the pod's controller (None: a bare pod)."""
    for owner in _metadata(pod).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            kind = owner.get("kind")
            return str(kind) if kind else None
    return None


def recorded_security_group_ids(annotations: Mapping[str, str]) -> frozenset[str] | None:
    """The security group ids a claim's launch recorded (None: not recorded)."""
    ids = frozenset(
        i.strip()
        for i in annotations.get(SECURITY_GROUP_IDS_ANNOTATION, "").split(",")
        if i.strip()
    )
    return ids or None


def nodeclass_state(obj: KubeObject) -> NodeClassState:
    """An EC2NodeClass's current hash (and the earlier versions' hashes it accepts), resolved
    subnets, security groups and AMIs (see the module docstring)."""
    spec = _section(obj, "spec")
    status = _section(obj, "status")

    def resolved(status_field: str) -> frozenset[str] | None:
        ids = [
            str(i["id"])
            for i in status.get(status_field) or []
            if isinstance(i, dict) and i.get("id")
        ]
        return frozenset(ids) if ids else None

    return NodeClassState(
        name=str(_metadata(obj).get("name", "")),
        nodeclass_hash=nodeclass_hash(spec),
        subnet_ids=resolved("subnets"),
        ami_ids=resolved("amis"),
        security_group_ids=resolved("securityGroups"),
        accepted_nodeclass_hashes=accepted_nodeclass_hashes(spec),
    )


def pdb_from_k8s(obj: KubeObject) -> PodDisruptionBudget:
    """A PodDisruptionBudget (InvalidObjectError naming the field when malformed)."""
    reader = _Reader(obj, "PodDisruptionBudget")
    spec = reader.mapping(obj.get("spec"), "spec")
    status = reader.mapping(obj.get("status"), "status")
    selector = reader.label_selector(spec.get("selector"), "spec.selector") or LabelSelector()
    return PodDisruptionBudget(
        namespace=str(reader.metadata.get("namespace") or "default"),
        name=reader.name,
        selector=selector,
        disruptions_allowed=reader.integer(
            status.get("disruptionsAllowed"), "status.disruptionsAllowed", default=0
        ),
    )


def _annotation_price(claim: KubeObject, instance_type: str, zone: str, capacity: str) -> float:
    try:
        offerings = json.loads(_annotations(claim).get(OFFERINGS_ANNOTATION, "[]"))
    except ValueError:
        return 0.0
    for entry in offerings if isinstance(offerings, list) else []:
        if (
            isinstance(entry, list)
            and len(entry) == 4
            and entry[:3]
            == [
                instance_type,
                zone,
                capacity,
            ]
        ):
            return float(entry[3])
    return 0.0


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


def _is_deleting(obj: KubeObject) -> bool:
    return bool(_metadata(obj).get("deletionTimestamp"))


def _has_disrupted_taint(node: Node) -> bool:
    return any(t.key == DISRUPTED_TAINT_KEY for t in node.taints)


def build_snapshot(  # noqa: PLR0912, PLR0915 - one pass over the mirror's kinds
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
        node_name = (claim_obj.get("status") or {}).get("nodeName")
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
        metadata = _metadata(claim)
        if _is_deleting(claim) or _has_disrupted_taint(node):
            busy.add(node.name)
        instance_type = node.labels.get(LABEL_INSTANCE_TYPE, "")
        zone = node.labels.get(LABEL_ZONE, "")
        capacity = node.labels.get(LABEL_CAPACITY_TYPE, "")
        price = _catalog_price(by_type, instance_type, zone, capacity)
        if price is None:
            price = _annotation_price(claim, instance_type, zone, capacity)
        pods: list[CandidatePod] = []
        for pod in node.pods:
            raw = mirror.get(PODS, pod.key) or {}
            annotations = _annotations(raw)
            pods.append(
                CandidatePod(
                    pod,
                    owner_kind=owner_kind(raw),
                    do_not_disrupt=any(
                        annotations.get(k) == "true" for k in DO_NOT_DISRUPT_ANNOTATIONS
                    ),
                )
            )
        annotations = _annotations(claim)
        claim_name = str(metadata.get("name", ""))
        nominated = (
            None if nominations is None else nominations.pending_on((node.name, claim_name), mirror)
        )
        nominated_until = None
        if nominated is not None:
            start = max(nominated.at, (initialized_at or {}).get(node.name, nominated.at))
            nominated_until = start + timedelta(seconds=nomination_window_seconds)
        candidates.append(
            Candidate(
                name=node.name,
                nodeclaim=claim_name,
                nodepool=str((metadata.get("labels") or {}).get(LABEL_NODEPOOL, "")),
                created_at=parse_timestamp(metadata.get("creationTimestamp"))
                or datetime.fromtimestamp(0).astimezone(),
                instance_type=instance_type,
                capacity_type=capacity,
                zone=zone,
                price_per_hour=price,
                allocatable=node.allocatable,
                labels=node.labels,
                taints=node.taints,
                pods=tuple(pods),
                last_pod_event_at=events.get(node.name),
                nodepool_hash=annotations.get(NODEPOOL_HASH_ANNOTATION),
                nodeclass_hash=annotations.get(NODECLASS_HASH_ANNOTATION),
                subnet_id=annotations.get(SUBNET_ID_ANNOTATION) or None,
                security_group_ids=recorded_security_group_ids(annotations),
                image_id=str((claim.get("status") or {}).get("imageID") or "") or None,
                is_initialized=is_condition_true(claim, "Initialized"),
                nominated_pods=0 if nominated is None else len(nominated.pods),
                nominated_until=nominated_until,
            )
        )
    pool_models = {p.name: p for p in core.nodepools}
    pools: list[NodePoolState] = []
    for obj in mirror.objects(NODE_POOLS).values():
        name = str(_metadata(obj).get("name", ""))
        model = pool_models.get(name)
        spec = _section(obj, "spec")
        if model is None:
            continue
        try:
            settings = DisruptionSettings.from_spec(name, spec)
        except DisruptionSettingsError as error:
            log.warning("disruption_nodepool_invalid", nodepool=name, error=str(error))
            continue
        class_ref = ((spec.get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        pools.append(
            NodePoolState(
                nodepool=model,
                disruption=settings,
                nodepool_hash=nodepool_hash(spec),
                nodeclass=class_ref.get("name") if isinstance(class_ref, dict) else None,
            )
        )
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
