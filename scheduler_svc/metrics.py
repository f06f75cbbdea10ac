"""Prometheus metrics of the scheduler, on a registry of its own (one per service instance,
so two schedulers in one test process do not collide)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_SCHEDULING_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LATENCY_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Balanced scores: a move passes at 1/k (k = 1, 2, 3); above 1 it saves more than it disrupts.
_SCORE_BUCKETS = (0.25, 1 / 3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class SchedulerMetrics:
    """Pending pods, scheduling duration, NodeClaims by lifecycle step, pod pending->bound."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.pending_pods = Gauge(
            "daiku_scheduler_pending_pods",
            "Provisionable pods (Unschedulable, unbound) in the last batch.",
            registry=self.registry,
        )
        self.scheduling_seconds = Histogram(
            "daiku_scheduler_scheduling_duration_seconds",
            "Time to snapshot and solve one batch.",
            buckets=_SCHEDULING_BUCKETS,
            registry=self.registry,
        )
        self.headroom_pods = Gauge(
            "daiku_scheduler_headroom_pods",
            "Units of room each CapacityBuffer wants (virtual pods in the last round).",
            ["capacitybuffer", "nodepool"],
            registry=self.registry,
        )
        self.headroom_unplaced_pods = Gauge(
            "daiku_scheduler_headroom_unplaced_pods",
            "Virtual pods of each CapacityBuffer the last round could not place (limits, no type).",
            ["capacitybuffer"],
            registry=self.registry,
        )
        self.batch_window_seconds = Histogram(
            "daiku_scheduler_batch_window_seconds",
            "How long each batch window stayed open.",
            buckets=_SCHEDULING_BUCKETS,
            registry=self.registry,
        )
        self.nodeclaims = Counter(
            "daiku_scheduler_nodeclaims",
            "NodeClaims by lifecycle step (created, launched, registered, initialized, failed, "
            "deleted).",
            ["nodepool", "step"],
            registry=self.registry,
        )
        self.nodeclaims_min_values_relaxed = Counter(
            "daiku_scheduler_nodeclaims_min_values_relaxed",
            "NodeClaims created with a NodePool's minValues lowered (--min-values-policy"
            " BestEffort; Karpenter labels its created-claims metric min_values_relaxed).",
            ["nodepool"],
            registry=self.registry,
        )
        self.pod_bound_seconds = Histogram(
            "daiku_scheduler_pod_pending_to_bound_seconds",
            "Time from a pod's creation to its binding to a node, for pods daiku provisioned for.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.instances_garbage_collected = Counter(
            "daiku_scheduler_instances_garbage_collected",
            "Instances without a NodeClaim that were terminated.",
            registry=self.registry,
        )
        self.disruption_decisions = Counter(
            "daiku_scheduler_disruption_decisions",
            "Disruption decisions by reason (Empty, Expired, Drifted, Underutilized, Unhealthy, "
            "RebalanceRecommended) and outcome (disrupted, invalidated, abandoned, failed, "
            "superseded).",
            ["reason", "outcome"],
            registry=self.registry,
        )
        self.consolidation_decisions = Counter(
            "daiku_scheduler_consolidation_decisions",
            "Underutilized decisions by consolidation_type (single: one node, multi: several "
            "merged), decision (delete: pods fit elsewhere, replace: one cheaper node) and "
            "outcome (disrupted, invalidated, abandoned), as Karpenter's "
            "voluntary_disruption_decisions.",
            ["consolidation_type", "decision", "outcome"],
            registry=self.registry,
        )
        self.consolidation_score = Histogram(
            "daiku_scheduler_consolidation_score",
            "Balanced scores (savings fraction / disruption fraction) of the consolidations "
            "decided in Balanced NodePools, by consolidation_type (single, multi) and outcome "
            "(disrupted, invalidated, abandoned), as Karpenter's consolidation score.",
            ["consolidation_type", "outcome"],
            buckets=_SCORE_BUCKETS,
            registry=self.registry,
        )
        self.disruption_blocked = Counter(
            "daiku_scheduler_disruption_blocked",
            "Nodes a disruption pass kept, by Event reason (DisruptionBlocked, Unconsolidatable); "
            "counted once per distinct message.",
            ["reason"],
            registry=self.registry,
        )
        self.nodeclaims_unhealthy_disrupted = Counter(
            "daiku_scheduler_nodeclaims_unhealthy_disrupted",
            "NodeClaims node repair replaced, by the unhealthy Node condition (Ready, "
            "KernelReady, ...) and NodePool (Karpenter's nodeclaims_unhealthy_disrupted_total).",
            ["condition", "nodepool"],
            registry=self.registry,
        )
        self.evictions = Counter(
            "daiku_scheduler_evictions",
            "Pods drained from terminating nodes by result (evicted, blocked by a "
            "PodDisruptionBudget, failed, forced after the termination grace period).",
            ["result"],
            registry=self.registry,
        )
        self.nodes_terminated = Counter(
            "daiku_scheduler_nodes_terminated",
            "Nodes drained, their instance terminated and their finalizers removed.",
            ["nodepool"],
            registry=self.registry,
        )
        self.cloud_events = Counter(
            "daiku_scheduler_cloud_events",
            "Cloud events from the actuator by kind and what was done (disrupted, noted, ignored).",
            ["kind", "action"],
            registry=self.registry,
        )
        self.is_leader = Gauge(
            "daiku_scheduler_leader",
            "1 while this replica holds the leader Lease.",
            registry=self.registry,
        )

    def track_pending_pods(self, count: Callable[[], int]) -> None:
        """Report the current number of provisionable pods at scrape time."""
        self.pending_pods.set_function(lambda: float(count()))

    def claim_step(self, nodepool: str, step: str) -> None:
        self.nodeclaims.labels(nodepool=nodepool or "unknown", step=step).inc()
