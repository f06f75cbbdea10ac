"""The converter's disruption half (decision 0013): what the disruption core needs of a
NodeClaim, its pods, a NodePool, an EC2NodeClass and a PodDisruptionBudget, read once from the
Kubernetes objects into the core's typed values. `disruption/snapshot.py` assembles these and
reads no raw object fields itself.

Kept apart from `convert.py` so `daiku plan`, which converts pods and nodes but never disrupts,
does not import the disruption core (its cron parser alone costs plan ~0.1 s at start-up).

- a pod: its controller's kind, `karpenter.sh/do-not-disrupt` / `daiku.dev/do-not-disrupt`
  (`"true"`: held for good; a Go duration such as `"4h"`: held until its `status.startTime`
  plus that, as Karpenter v1.12; anything else: not held, as Karpenter), its
  `controller.kubernetes.io/pod-deletion-cost` and `spec.priority` (Balanced scoring);
- a NodeClaim: its NodePool, creation, the hashes and subnet/security groups recorded at
  launch, `status.imageID`, whether it is Initialized;
- a NodePool: its disruption settings, launch hash and EC2NodeClass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler_svc.core.disruption import (
    DO_NOT_DISRUPT_ANNOTATIONS,
    NODECLASS_HASH_ANNOTATION,
    NODEPOOL_HASH_ANNOTATION,
    REBALANCE_RECOMMENDED_ANNOTATION,
    ROOM_HELD_FOR_ANNOTATION,
    ROOM_HELD_UNTIL_ANNOTATION,
    SECURITY_GROUP_IDS_ANNOTATION,
    SUBNET_ID_ANNOTATION,
    CandidatePod,
    DisruptionSettings,
    NodeClassState,
    NodeCondition,
    NodePoolState,
    PodDisruptionBudget,
    accepted_nodeclass_hashes,
    nodeclass_hash,
    nodepool_hash,
)
from scheduler_svc.core.disruption.model import NON_RESCHEDULABLE_OWNER_KINDS
from scheduler_svc.core.disruption.settings import parse_go_duration
from scheduler_svc.core.model import NodePool, Pod
from scheduler_svc.core.requirements import LABEL_NODEPOOL
from scheduler_svc.kube.convert import _Reader, node_class_name_of
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import condition, is_condition_true, parse_timestamp

POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# Where a claim's offerings (type, zone, capacity type, price) are recorded at creation.
OFFERINGS_ANNOTATION = "daiku.dev/offerings"
_EPOCH = datetime.fromtimestamp(0).astimezone()


def _section(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def annotations_of(obj: KubeObject) -> dict[str, str]:
    """The object's annotations ({} when absent or malformed)."""
    annotations = _section(obj, "metadata").get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def owner_kind(pod: KubeObject) -> str | None:
    """The kind of the pod's controller (None: a bare pod)."""
    for owner in _section(pod, "metadata").get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            kind = owner.get("kind")
            return str(kind) if kind else None
    return None


def moves_with_its_node(pod: KubeObject) -> bool:
    """Whether taking its node away would move the pod, as the snapshot counts a candidate's
    pods: it has not finished, and no DaemonSet or mirror pod (`CandidatePod.is_reschedulable`)."""
    phase = _section(pod, "status").get("phase")
    return phase not in {"Succeeded", "Failed"} and (
        owner_kind(pod) not in NON_RESCHEDULABLE_OWNER_KINDS
    )


def do_not_disrupt_hold(obj: KubeObject) -> tuple[bool, datetime | None]:
    """Whether the pod's do-not-disrupt annotation holds it, and until when (None: for good,
    or a duration whose pod has no start time yet: Karpenter fails safe the same way)."""
    annotations = annotations_of(obj)
    held, until = False, None
    for key in DO_NOT_DISRUPT_ANNOTATIONS:
        value = annotations.get(key)
        if value == "true":
            return True, None
        seconds = parse_go_duration(value) if isinstance(value, str) else None
        if seconds is not None and seconds > 0:
            started = parse_timestamp(_section(obj, "status").get("startTime"))
            held, until = True, None if started is None else started + timedelta(seconds=seconds)
    return held, until


def do_not_disrupt_holds(obj: KubeObject, now: datetime) -> bool:
    """Whether the pod's do-not-disrupt annotation holds it at `now` (the drain's test)."""
    held, until = do_not_disrupt_hold(obj)
    return held and (until is None or now < until)


def candidate_pod_from_k8s(obj: KubeObject, pod: Pod) -> CandidatePod:
    """`pod` (the scheduling view of `obj`) with its disruption facts (module docstring)."""
    annotations = annotations_of(obj)
    held, until = do_not_disrupt_hold(obj)
    spec = _section(obj, "spec")
    priority = spec.get("priority")
    return CandidatePod(
        pod,
        owner_kind=owner_kind(obj),
        do_not_disrupt=held,
        do_not_disrupt_until=until,
        deletion_cost=_integer(annotations.get(POD_DELETION_COST_ANNOTATION)),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
    )


def _integer(text: object) -> int:
    """An int32 annotation value (0 when absent or not an integer, as the API server would
    have refused it)."""
    try:
        return int(str(text)) if text is not None else 0
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class ClaimFacts:
    """What a candidate carries from its NodeClaim (see `Candidate`)."""

    name: str
    nodepool: str
    created_at: datetime
    nodepool_hash: str | None
    nodeclass_hash: str | None
    subnet_id: str | None
    security_group_ids: frozenset[str] | None
    image_id: str | None
    is_initialized: bool
    is_deleting: bool
    rebalance_recommended_at: datetime | None = None
    drifted_since: datetime | None = None
    room_held_for: frozenset[str] = frozenset()
    room_held_until: datetime | None = None


def drifted_since(claim: KubeObject) -> datetime | None:
    """Since when the claim's `Drifted` condition is True (None: not True, or not stamped)."""
    drifted = condition(claim, "Drifted")
    if drifted is None or drifted.get("status") != "True":
        return None
    return parse_timestamp(drifted.get("lastTransitionTime"))


def node_conditions_from_k8s(node: KubeObject | None) -> tuple[NodeCondition, ...]:
    """The Node's status conditions as node repair reads them (malformed ones left out)."""
    raw = _section(node or {}, "status").get("conditions")
    return tuple(
        NodeCondition(
            str(c["type"]),
            str(c.get("status") or "Unknown"),
            parse_timestamp(c.get("lastTransitionTime")),
        )
        for c in (raw if isinstance(raw, list) else [])
        if isinstance(c, dict) and c.get("type")
    )


def claim_facts_from_k8s(claim: KubeObject) -> ClaimFacts:
    """A NodeClaim's facts (absent fields read as unknown, never as an error)."""
    metadata = _section(claim, "metadata")
    labels = metadata.get("labels")
    annotations = annotations_of(claim)
    return ClaimFacts(
        name=str(metadata.get("name", "")),
        nodepool=str((labels if isinstance(labels, dict) else {}).get(LABEL_NODEPOOL, "")),
        created_at=parse_timestamp(metadata.get("creationTimestamp")) or _EPOCH,
        nodepool_hash=annotations.get(NODEPOOL_HASH_ANNOTATION),
        nodeclass_hash=annotations.get(NODECLASS_HASH_ANNOTATION),
        subnet_id=annotations.get(SUBNET_ID_ANNOTATION) or None,
        security_group_ids=recorded_security_group_ids(annotations),
        image_id=str(_section(claim, "status").get("imageID") or "") or None,
        is_initialized=is_condition_true(claim, "Initialized"),
        is_deleting=bool(metadata.get("deletionTimestamp")),
        rebalance_recommended_at=parse_timestamp(annotations.get(REBALANCE_RECOMMENDED_ANNOTATION)),
        drifted_since=drifted_since(claim),
        room_held_for=frozenset(
            name for name in annotations.get(ROOM_HELD_FOR_ANNOTATION, "").split(",") if name
        ),
        room_held_until=parse_timestamp(annotations.get(ROOM_HELD_UNTIL_ANNOTATION)),
    )


def recorded_security_group_ids(annotations: Mapping[str, str]) -> frozenset[str] | None:
    """The security group ids a claim's launch recorded (None: not recorded)."""
    ids = frozenset(
        i.strip()
        for i in annotations.get(SECURITY_GROUP_IDS_ANNOTATION, "").split(",")
        if i.strip()
    )
    return ids or None


def recorded_price(claim: KubeObject, instance_type: str, zone: str, capacity: str) -> float:
    """The claim's recorded price of one offering (0.0 when not recorded)."""
    try:
        offerings = json.loads(annotations_of(claim).get(OFFERINGS_ANNOTATION, "[]"))
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


def nodepool_state_from_k8s(obj: KubeObject, model: NodePool) -> NodePoolState:
    """A NodePool's disruption view (DisruptionSettingsError naming the field when bad)."""
    spec = _section(obj, "spec")
    settings = DisruptionSettings.from_spec(model.name, spec)
    return NodePoolState(
        nodepool=model,
        disruption=settings,
        nodepool_hash=nodepool_hash(spec),
        nodeclass=node_class_name_of(obj),
    )


def nodeclass_state(obj: KubeObject) -> NodeClassState:
    """An EC2NodeClass's current hash (and the earlier versions' hashes it accepts), resolved
    subnets, security groups and AMIs."""
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
        name=str(_section(obj, "metadata").get("name", "")),
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
    selector = reader.label_selector(spec.get("selector"), "spec.selector")  # None: selects none
    return PodDisruptionBudget(
        namespace=str(reader.metadata.get("namespace") or "default"),
        name=reader.name,
        selector=selector,
        disruptions_allowed=reader.integer(
            status.get("disruptionsAllowed"), "status.disruptionsAllowed", default=0
        ),
    )
