"""The record of a `daiku up` run and the JSON report built from it (pure: the caller passes
the time of every observation).

`RunRecorder.observe(snapshot, now)` compares each snapshot with the previous one and records
what happened in between as events (a NodeClaim created, launched, registered, initialized,
terminating, deleted; a node registered, ready, deleted), plus the Kubernetes Events the caller
hands to `observe_kube_events`. `report()` returns the document `--report FILE.json` writes:

    nodes[]       {name, labels, taints, createdAt, deletedAt?}          every node seen
    pods[]        {namespace, name, node, phase}                         at the end
    nodeClaims[]  {name, nodePool, instanceType, zone, capacityType, price, conditions,
                   createdAt, deletedAt?}                               every claim seen
    events[]      {time, kind, object, reason, message, source}          in time order
    steps[]       {index, step, startedAt, finishedAt, outcome}
    timeline[]    {time, pendingPods, runningPods, nodes{capacity type: n}, hourlyCost}
                                                                          each change seen
    totalHourlyCost                                                       of what runs at the end
    settled, unsettledReasons                                             at the end
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from daiku_cli.scenario.observe import CLAIM_CONDITIONS, ClaimRow, ClusterSnapshot, NodeRow


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, e.g. 2026-11-25T22:00:01.234Z."""
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def normalize_time(text: str, fallback: str) -> str:
    """A Kubernetes timestamp in `format_time`'s form (so events sort by time), else fallback."""
    try:
        return format_time(datetime.fromisoformat(text))
    except ValueError:
        return fallback


@dataclass(frozen=True)
class RunEvent:
    """Something that happened: `kind` and `object` name what it happened to."""

    time: str
    kind: str
    object: str
    reason: str
    message: str = ""
    source: str = "daiku-up"

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "kind": self.kind,
            "object": self.object,
            "reason": self.reason,
            "message": self.message,
            "source": self.source,
        }


@dataclass(frozen=True)
class TimelineSample:
    """The cluster's counts at one observation: what the report's chart draws over time."""

    time: str
    pending_pods: int
    running_pods: int
    nodes_by_capacity_type: tuple[tuple[str, int], ...]
    hourly_cost: float

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, at: str) -> TimelineSample:
        by_type: dict[str, int] = {}
        for node in snapshot.nodes:
            if not node.deleting:
                kind = node.capacity_type or "unknown"
                by_type[kind] = by_type.get(kind, 0) + 1
        return cls(
            time=at,
            pending_pods=len(snapshot.pending_pods),
            running_pods=snapshot.running_pods,
            nodes_by_capacity_type=tuple(sorted(by_type.items())),
            hourly_cost=round(snapshot.hourly_cost, 6),
        )

    def same_counts(self, other: TimelineSample) -> bool:
        return (
            self.pending_pods,
            self.running_pods,
            self.nodes_by_capacity_type,
            self.hourly_cost,
        ) == (
            other.pending_pods,
            other.running_pods,
            other.nodes_by_capacity_type,
            other.hourly_cost,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "pendingPods": self.pending_pods,
            "runningPods": self.running_pods,
            "nodes": dict(self.nodes_by_capacity_type),
            "hourlyCost": self.hourly_cost,
        }


@dataclass
class _StepRecord:
    index: int
    description: str
    started_at: str
    finished_at: str | None = None
    outcome: str = "running"


@dataclass
class RunRecorder:
    """Accumulates observations of one run; see the module docstring."""

    nodes: dict[str, NodeRow] = field(default_factory=dict)
    node_deleted_at: dict[str, str] = field(default_factory=dict)
    claims: dict[str, ClaimRow] = field(default_factory=dict)
    claim_deleted_at: dict[str, str] = field(default_factory=dict)
    events: list[RunEvent] = field(default_factory=list)
    steps: list[_StepRecord] = field(default_factory=list)
    timeline: list[TimelineSample] = field(default_factory=list)
    last: ClusterSnapshot | None = None
    _kube_event_versions: dict[str, str] = field(default_factory=dict)

    # -- steps ---------------------------------------------------------------------------------

    def step_started(self, index: int, description: str, now: datetime) -> None:
        self.steps.append(_StepRecord(index, description, format_time(now)))

    def step_finished(self, index: int, now: datetime, outcome: str = "done") -> None:
        for step in self.steps:
            if step.index == index:
                step.finished_at = format_time(now)
                step.outcome = outcome

    # -- observations --------------------------------------------------------------------------

    def observe(self, snapshot: ClusterSnapshot, now: datetime) -> list[RunEvent]:
        """Record the snapshot; returns the events it reveals since the previous one."""
        at = format_time(now)
        new: list[RunEvent] = []
        new.extend(self._observe_claims(snapshot.claims, at))
        new.extend(self._observe_nodes(snapshot.nodes, at))
        self._sample(snapshot, at)
        self.last = snapshot
        self.events.extend(new)
        return new

    def _sample(self, snapshot: ClusterSnapshot, at: str) -> None:
        # Only changes are kept: `daiku up` observes four times a second, and a step chart
        # drawn from the changes is the same picture as one drawn from every observation.
        sample = TimelineSample.of(snapshot, at)
        if not self.timeline or not self.timeline[-1].same_counts(sample):
            self.timeline.append(sample)

    def _observe_claims(self, claims: Iterable[ClaimRow], at: str) -> list[RunEvent]:
        new: list[RunEvent] = []
        seen: set[str] = set()
        for claim in claims:
            seen.add(claim.name)
            before = self.claims.get(claim.name)
            if before is None:
                pool = f" for NodePool {claim.nodepool}" if claim.nodepool else ""
                new.append(RunEvent(at, "NodeClaim", claim.name, "Created", f"NodeClaim{pool}"))
            self.claim_deleted_at.pop(claim.name, None)
            new.extend(
                RunEvent(
                    normalize_time(_transition_time(claim, kind) or "", at),
                    "NodeClaim",
                    claim.name,
                    kind,
                    _claim_message(claim) if kind == "Launched" else "",
                )
                for kind in CLAIM_CONDITIONS
                if claim.condition_true(kind) and not (before and before.condition_true(kind))
            )
            if claim.is_terminating and not (before and before.is_terminating):
                new.append(RunEvent(at, "NodeClaim", claim.name, "Terminating", ""))
            self.claims[claim.name] = claim
        for name, claim in self.claims.items():
            if name not in seen and name not in self.claim_deleted_at:
                self.claim_deleted_at[name] = at
                new.append(RunEvent(at, "NodeClaim", name, "Deleted", _claim_message(claim)))
        return new

    def _observe_nodes(self, nodes: Iterable[NodeRow], at: str) -> list[RunEvent]:
        new: list[RunEvent] = []
        seen: set[str] = set()
        for node in nodes:
            seen.add(node.name)
            before = self.nodes.get(node.name)
            if before is None or node.name in self.node_deleted_at:
                new.append(RunEvent(at, "Node", node.name, "Registered", _node_message(node)))
            self.node_deleted_at.pop(node.name, None)
            if node.ready and not (before and before.ready):
                new.append(RunEvent(at, "Node", node.name, "Ready", ""))
            self.nodes[node.name] = node
        for name in self.nodes:
            if name not in seen and name not in self.node_deleted_at:
                self.node_deleted_at[name] = at
                new.append(RunEvent(at, "Node", name, "Deleted", ""))
        return new

    def observe_kube_events(self, events: Iterable[Mapping[str, Any]]) -> list[RunEvent]:
        """Record Kubernetes Events not seen before (or seen again with a higher count)."""
        new: list[RunEvent] = []
        for event in events:
            metadata = event.get("metadata") or {}
            uid = str(metadata.get("uid") or metadata.get("name") or "")
            version = f"{event.get('count', 1)}/{event.get('lastTimestamp')}"
            if not uid or self._kube_event_versions.get(uid) == version:
                continue
            self._kube_event_versions[uid] = version
            involved = event.get("involvedObject") or {}
            namespace = involved.get("namespace")
            name = str(involved.get("name") or "")
            new.append(
                RunEvent(
                    time=normalize_time(
                        str(
                            event.get("lastTimestamp")
                            or event.get("eventTime")
                            or metadata.get("creationTimestamp")
                            or ""
                        ),
                        fallback="",
                    ),
                    kind=str(involved.get("kind") or ""),
                    object=f"{namespace}/{name}" if namespace else name,
                    reason=str(event.get("reason") or ""),
                    message=str(event.get("message") or ""),
                    source=str(
                        event.get("reportingComponent")
                        or (event.get("source") or {}).get("component")
                        or "kubernetes"
                    ),
                )
            )
        self.events.extend(new)
        return new

    # -- the report ----------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        final = self.last or ClusterSnapshot((), (), (), ())
        nodes = []
        for name, node in sorted(self.nodes.items()):
            entry: dict[str, Any] = {
                "name": name,
                "labels": dict(node.labels),
                "taints": [dict(t) for t in node.taints],
                "createdAt": node.created_at,
            }
            if name in self.node_deleted_at:
                entry["deletedAt"] = self.node_deleted_at[name]
            nodes.append(entry)
        claims = []
        for name, claim in sorted(self.claims.items()):
            claim_entry: dict[str, Any] = {
                "name": name,
                "nodePool": claim.nodepool,
                "instanceType": claim.instance_type or None,
                "zone": claim.zone or None,
                "capacityType": claim.capacity_type or None,
                "price": claim.price_per_hour,
                "conditions": [dict(c) for c in claim.conditions],
                "createdAt": claim.created_at,
                "nodeName": claim.node_name,
            }
            if name in self.claim_deleted_at:
                claim_entry["deletedAt"] = self.claim_deleted_at[name]
            claims.append(claim_entry)
        return {
            "nodes": nodes,
            "pods": [
                {"namespace": p.namespace, "name": p.name, "node": p.node, "phase": p.phase}
                for p in final.pods
            ],
            "nodeClaims": claims,
            "events": [e.to_json() for e in sorted(self.events, key=lambda e: e.time)],
            "steps": [
                {
                    "index": s.index,
                    "step": s.description,
                    "startedAt": s.started_at,
                    "finishedAt": s.finished_at,
                    "outcome": s.outcome,
                }
                for s in self.steps
            ],
            "timeline": [sample.to_json() for sample in self.timeline],
            "totalHourlyCost": round(final.hourly_cost, 6),
            "settled": final.is_settled,
            "unsettledReasons": final.unsettled_reasons(),
        }


def _transition_time(claim: ClaimRow, kind: str) -> str | None:
    for condition in claim.conditions:
        if condition.get("type") == kind and condition.get("lastTransitionTime"):
            return str(condition["lastTransitionTime"])
    return None


def _claim_message(claim: ClaimRow) -> str:
    if not claim.instance_type:
        return ""
    price = f" ${claim.price_per_hour:.4f}/h" if claim.price_per_hour is not None else ""
    return f"{claim.instance_type} {claim.zone} {claim.capacity_type}{price}".strip()


def _node_message(node: NodeRow) -> str:
    return f"{node.instance_type} {node.zone} {node.capacity_type}".strip()
