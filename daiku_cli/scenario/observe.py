"""What the cluster looks like right now, read from raw Kubernetes objects (pure, no I/O).

`snapshot_from_objects` turns the lists `daiku up` polls (pods, nodes, NodeClaims, Deployments)
into a `ClusterSnapshot`: pending pods, NodeClaims by state, nodes with instance type, zone and
capacity type, the hourly cost, and whether the cluster has settled.

Settled means nothing is in motion:
- no pod waits for a node: every live pod (not terminating, not a DaemonSet's) is bound, and
  every bound pod has started (a pod only just bound to a node still counts as in motion);
- every Deployment's status has caught up with its spec (the ReplicaSet controller created or
  removed the pods a scale asked for);
- no NodeClaim is launching (not yet Initialized) or terminating (being deleted).
A pod daiku cannot provision keeps the cluster unsettled; the reason says which pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KubeObject = Mapping[str, Any]
# (instance type, zone, capacity type) -> USD per hour
PriceBook = Mapping[tuple[str, str, str], float]

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
NODEPOOL_LABELS = ("daiku.dev/nodepool", "karpenter.sh/nodepool")
CLAIM_CONDITIONS = ("Launched", "Registered", "Initialized", "Ready")


@dataclass(frozen=True)
class PodRow:
    namespace: str
    name: str
    node: str | None
    phase: str
    waiting_for_node: bool
    starting: bool
    unschedulable_message: str


@dataclass(frozen=True)
class NodeRow:
    name: str
    instance_type: str
    zone: str
    capacity_type: str
    nodepool: str | None
    ready: bool
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    created_at: str | None
    deleting: bool


@dataclass(frozen=True)
class ClaimRow:
    name: str
    nodepool: str | None
    instance_type: str
    zone: str
    capacity_type: str
    price_per_hour: float | None
    state: str
    conditions: tuple[Mapping[str, Any], ...]
    created_at: str | None
    node_name: str | None

    def condition_true(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in self.conditions)

    @property
    def is_terminating(self) -> bool:
        return self.state == "Terminating"

    @property
    def is_launching(self) -> bool:
        return not self.is_terminating and self.state not in ("Initialized", "Ready")


@dataclass(frozen=True)
class ClusterSnapshot:
    pods: tuple[PodRow, ...]
    nodes: tuple[NodeRow, ...]
    claims: tuple[ClaimRow, ...]
    lagging_deployments: tuple[str, ...]

    @property
    def pending_pods(self) -> tuple[PodRow, ...]:
        return tuple(p for p in self.pods if p.waiting_for_node)

    @property
    def running_pods(self) -> int:
        return sum(1 for p in self.pods if p.phase == "Running")

    def claims_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for claim in self.claims:
            counts[claim.state] = counts.get(claim.state, 0) + 1
        return counts

    @property
    def hourly_cost(self) -> float:
        """USD per hour of the launched NodeClaims that are not being deleted."""
        return sum(
            c.price_per_hour for c in self.claims if c.price_per_hour and not c.is_terminating
        )

    def unsettled_reasons(self) -> list[str]:
        """Why the cluster is not settled; empty when it is."""
        reasons: list[str] = []
        pending = self.pending_pods
        if pending:
            first = pending[0]
            detail = f": {first.unschedulable_message}" if first.unschedulable_message else ""
            reasons.append(
                f"{len(pending)} pod(s) pending, e.g. {first.namespace}/{first.name}{detail}"
            )
        starting = [p for p in self.pods if p.starting]
        if starting:
            reasons.append(
                f"{len(starting)} pod(s) bound but not running yet, "
                f"e.g. {starting[0].namespace}/{starting[0].name} on {starting[0].node}"
            )
        if self.lagging_deployments:
            reasons.append(
                "Deployment(s) still creating or removing pods: "
                + ", ".join(self.lagging_deployments)
            )
        launching = [c.name for c in self.claims if c.is_launching]
        if launching:
            reasons.append(f"{len(launching)} NodeClaim(s) launching: {', '.join(launching[:5])}")
        terminating = [c.name for c in self.claims if c.is_terminating]
        if terminating:
            reasons.append(
                f"{len(terminating)} NodeClaim(s) terminating: {', '.join(terminating[:5])}"
            )
        return reasons

    @property
    def is_settled(self) -> bool:
        return not self.unsettled_reasons()


def _metadata(obj: KubeObject) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _status(obj: KubeObject) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _conditions(obj: KubeObject) -> tuple[Mapping[str, Any], ...]:
    conditions = _status(obj).get("conditions")
    if not isinstance(conditions, list):
        return ()
    return tuple(c for c in conditions if isinstance(c, Mapping))


def _is_daemonset_pod(pod: KubeObject) -> bool:
    owners = _metadata(pod).get("ownerReferences") or []
    return any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in owners)


def pod_row(pod: KubeObject) -> PodRow:
    """The pod as the progress view and the settle check see it. A pod that is terminating,
    finished or a DaemonSet's is listed but never counts as waiting for a node or starting."""
    metadata = _metadata(pod)
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    phase = str(_status(pod).get("phase") or "Pending")
    node = spec.get("nodeName") or None
    row_is_live = (
        not metadata.get("deletionTimestamp")
        and phase not in ("Succeeded", "Failed")
        and not _is_daemonset_pod(pod)
    )
    message = ""
    for condition in _conditions(pod):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            message = str(condition.get("message") or condition.get("reason") or "")
    return PodRow(
        namespace=str(metadata.get("namespace") or "default"),
        name=str(metadata.get("name")),
        node=str(node) if node else None,
        phase=phase,
        waiting_for_node=row_is_live and node is None,
        starting=row_is_live and node is not None and phase == "Pending",
        unschedulable_message=message,
    )


def _nodepool(labels: Mapping[str, str]) -> str | None:
    for key in NODEPOOL_LABELS:
        if labels.get(key):
            return labels[key]
    return None


def node_row(node: KubeObject) -> NodeRow:
    metadata = _metadata(node)
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    spec = node.get("spec") if isinstance(node.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    taints = tuple(t for t in (spec.get("taints") or []) if isinstance(t, Mapping))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(node))
    return NodeRow(
        name=str(metadata.get("name")),
        instance_type=labels.get(INSTANCE_TYPE_LABEL, ""),
        zone=labels.get(ZONE_LABEL, ""),
        capacity_type=labels.get(CAPACITY_TYPE_LABEL, ""),
        nodepool=_nodepool(labels),
        ready=ready,
        labels=labels,
        taints=taints,
        created_at=metadata.get("creationTimestamp"),
        deleting=bool(metadata.get("deletionTimestamp")),
    )


def claim_state(conditions: Iterable[Mapping[str, Any]], deleting: bool) -> str:
    """Terminating, else the furthest lifecycle condition that is True, else Pending."""
    if deleting:
        return "Terminating"
    true = {c.get("type") for c in conditions if c.get("status") == "True"}
    for kind in reversed(CLAIM_CONDITIONS):
        if kind in true:
            return kind
    return "Pending"


def claim_row(claim: KubeObject, prices: PriceBook) -> ClaimRow:
    metadata = _metadata(claim)
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    conditions = _conditions(claim)
    instance_type = labels.get(INSTANCE_TYPE_LABEL, "")
    zone = labels.get(ZONE_LABEL, "")
    capacity_type = labels.get(CAPACITY_TYPE_LABEL, "")
    launched = any(c.get("type") == "Launched" and c.get("status") == "True" for c in conditions)
    price = prices.get((instance_type, zone, capacity_type)) if launched else None
    return ClaimRow(
        name=str(metadata.get("name")),
        nodepool=_nodepool(labels),
        instance_type=instance_type,
        zone=zone,
        capacity_type=capacity_type,
        price_per_hour=price,
        state=claim_state(conditions, bool(metadata.get("deletionTimestamp"))),
        conditions=conditions,
        created_at=metadata.get("creationTimestamp"),
        node_name=_status(claim).get("nodeName") or None,
    )


def lagging_deployment(deployment: KubeObject) -> str | None:
    """`ns/name` of a Deployment whose status has not caught up with its spec, else None."""
    metadata = _metadata(deployment)
    spec = deployment.get("spec") if isinstance(deployment.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    status = _status(deployment)
    wanted = int(spec.get("replicas", 1))
    observed = int(status.get("observedGeneration") or 0)
    generation = int(metadata.get("generation") or 0)
    if observed < generation or int(status.get("replicas") or 0) != wanted:
        return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
    return None


def snapshot_from_objects(
    *,
    pods: Iterable[KubeObject],
    nodes: Iterable[KubeObject],
    claims: Iterable[KubeObject],
    deployments: Iterable[KubeObject] = (),
    prices: PriceBook | None = None,
) -> ClusterSnapshot:
    """A snapshot of the given objects; `prices` fills in each launched claim's price."""
    return ClusterSnapshot(
        pods=tuple(sorted((pod_row(p) for p in pods), key=lambda r: (r.namespace, r.name))),
        nodes=tuple(sorted((node_row(n) for n in nodes), key=lambda r: r.name)),
        claims=tuple(sorted((claim_row(c, prices or {}) for c in claims), key=lambda r: r.name)),
        lagging_deployments=tuple(
            name for d in deployments if (name := lagging_deployment(d)) is not None
        ),
    )
