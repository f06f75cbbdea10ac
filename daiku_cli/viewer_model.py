"""What `daiku viewer` shows, computed from the cluster's objects (pure: no I/O, `now` passed in).

Nodes are grouped by NodePool (nodes no NodePool launched form their own group), each with its
instance type, capacity type, zone, age, price, and cpu and memory requested by its pods against
its allocatable — what eks-node-viewer shows for Karpenter. Below them: the cluster's $/h, pods
still waiting for a node with the reason the scheduler gave, and NodeClaims not yet initialized.
Pods are read with the scheduler's own converter, so "requested" means what daiku packs by
(init containers, sidecars and overhead included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler_svc.kube.convert import node_from_k8s, pod_from_k8s
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import parse_timestamp

# (instance type, zone, capacity type) -> USD per hour
PriceBook = Mapping[tuple[str, str, str], float]

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
NO_NODEPOOL = "(no NodePool)"
HOURS_PER_MONTH = 730
_CLAIM_STAGES = (
    ("Launched", "launching"),
    ("Registered", "registering"),
    ("Initialized", "initializing"),
)


@dataclass(frozen=True)
class NodeLine:
    """One node: where it runs, what it costs, and how full its pods make it."""

    name: str
    instance_type: str
    capacity_type: str
    zone: str
    age_seconds: float | None
    price_per_hour: float | None
    cpu_requested_millis: int
    cpu_allocatable_millis: int
    memory_requested_bytes: int
    memory_allocatable_bytes: int
    pods: int
    ready: bool
    deleting: bool


@dataclass(frozen=True)
class PendingPod:
    key: str
    reason: str


@dataclass(frozen=True)
class ClaimInFlight:
    name: str
    nodepool: str
    instance_type: str
    stage: str


@dataclass(frozen=True)
class ClusterView:
    pools: tuple[tuple[str, tuple[NodeLine, ...]], ...]
    pending: tuple[PendingPod, ...]
    in_flight: tuple[ClaimInFlight, ...]

    @property
    def nodes(self) -> int:
        return sum(len(lines) for _, lines in self.pools)

    @property
    def hourly_cost(self) -> float:
        """USD per hour of the nodes whose price is known and which are not going away."""
        return sum(
            line.price_per_hour or 0.0
            for _, lines in self.pools
            for line in lines
            if not line.deleting
        )


def cluster_view(
    *,
    pods: Iterable[KubeObject],
    nodes: Iterable[KubeObject],
    claims: Iterable[KubeObject],
    prices: PriceBook,
    now: datetime,
) -> ClusterView:
    """The view of these objects at `now`; an object the converter refuses is left out."""
    live_pods = [p for p in pods if _phase(p) not in {"Succeeded", "Failed"}]
    requests = _requests_by_node(live_pods)
    pools: dict[str, list[NodeLine]] = {}
    for node in nodes:
        line = _node_line(node, requests.get(_name(node), []), prices, now)
        if line is not None:
            pools.setdefault(_nodepool(node) or NO_NODEPOOL, []).append(line)
    return ClusterView(
        pools=tuple(
            (pool, tuple(sorted(lines, key=lambda line: line.name)))
            for pool, lines in sorted(pools.items())
        ),
        pending=tuple(
            sorted(
                (_pending(p) for p in live_pods if not _node_name(p) and _is_waiting(p)),
                key=lambda pending: pending.key,
            )
        ),
        in_flight=tuple(sorted(filter(None, map(_in_flight, claims)), key=lambda c: c.name)),
    )


def _requests_by_node(pods: Iterable[KubeObject]) -> dict[str, list[tuple[int, int]]]:
    by_node: dict[str, list[tuple[int, int]]] = {}
    for obj in pods:
        node = _node_name(obj)
        if not node:
            continue
        try:
            requested = pod_from_k8s(obj).requests()
        except ValueError:
            continue
        by_node.setdefault(node, []).append((requested.cpu_millis, requested.memory_bytes))
    return by_node


def _node_line(
    obj: KubeObject, requests: list[tuple[int, int]], prices: PriceBook, now: datetime
) -> NodeLine | None:
    try:
        node = node_from_k8s(obj)
    except ValueError:
        return None
    labels = node.labels
    instance_type = labels.get(INSTANCE_TYPE_LABEL, "")
    zone = labels.get(ZONE_LABEL, "")
    capacity_type = labels.get(CAPACITY_TYPE_LABEL, "")
    born = parse_timestamp((obj.get("metadata") or {}).get("creationTimestamp"))
    return NodeLine(
        name=node.name,
        instance_type=instance_type,
        capacity_type=capacity_type,
        zone=zone,
        age_seconds=(now - born).total_seconds() if born else None,
        price_per_hour=prices.get((instance_type, zone, capacity_type)),
        cpu_requested_millis=sum(cpu for cpu, _ in requests),
        cpu_allocatable_millis=node.allocatable.cpu_millis,
        memory_requested_bytes=sum(memory for _, memory in requests),
        memory_allocatable_bytes=node.allocatable.memory_bytes,
        pods=len(requests),
        ready=_condition(obj, "Ready") == "True",
        deleting=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
    )


def _pending(pod: KubeObject) -> PendingPod:
    metadata = pod.get("metadata") or {}
    scheduled = next(
        (c for c in _conditions(pod) if c.get("type") == "PodScheduled"),
        {},
    )
    reason = str(scheduled.get("message") or scheduled.get("reason") or "waiting for a node")
    return PendingPod(f"{metadata.get('namespace', 'default')}/{metadata.get('name', '')}", reason)


def _in_flight(claim: KubeObject) -> ClaimInFlight | None:
    metadata = claim.get("metadata") or {}
    true = {str(c.get("type")) for c in _conditions(claim) if c.get("status") == "True"}
    if metadata.get("deletionTimestamp"):
        stage = "terminating"
    else:
        stage = next((name for kind, name in _CLAIM_STAGES if kind not in true), "")
    if not stage:
        return None
    labels = metadata.get("labels") or {}
    return ClaimInFlight(
        name=str(metadata.get("name", "")),
        nodepool=str(_nodepool(claim) or ""),
        instance_type=str(labels.get(INSTANCE_TYPE_LABEL, "")),
        stage=stage,
    )


def _is_waiting(pod: KubeObject) -> bool:
    # A pod with no node that is not being deleted waits for one (DaemonSet pods are bound
    # at creation in localcloud and by the default-scheduler elsewhere).
    return _phase(pod) == "Pending" and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _nodepool(obj: KubeObject) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    pool = labels.get("daiku.dev/nodepool") or labels.get("karpenter.sh/nodepool")
    return str(pool) if pool else None


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _node_name(pod: KubeObject) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else None


def _phase(pod: KubeObject) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _conditions(obj: KubeObject) -> list[Mapping[str, Any]]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return [c for c in conditions if isinstance(c, Mapping)]


def _condition(obj: KubeObject, kind: str) -> str | None:
    return next((str(c.get("status")) for c in _conditions(obj) if c.get("type") == kind), None)
