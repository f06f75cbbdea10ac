"""`daiku_scheduler_consolidation_score`: the Balanced score of each consolidation decided in a
Balanced NodePool, observed with the decision's outcome; unscored decisions are not observed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from scheduler_svc.core.disruption import DisruptionDecision, DisruptionReason
from scheduler_svc.disruption.controller import DisruptionController
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import ClusterMirror

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
DELETE = DisruptionDecision(
    reason=DisruptionReason.UNDERUTILIZED,
    nodes=("small",),
    nodeclaims=("default-small",),
    replacements=(),
    message="Underutilized: pods of small fit on other nodes",
    decided_at=NOW,
    old_price_per_hour=0.199,
    new_price_per_hour=0.0,
    needs_validation=True,
    balanced_score=0.8,
)


def controller(metrics: SchedulerMetrics) -> DisruptionController:
    return DisruptionController(
        mirror=ClusterMirror(),
        writer=None,  # type: ignore[arg-type]
        metrics=metrics,
        clock=lambda: NOW,
    )


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(f"daiku_scheduler_consolidation_score_{name}", labels)


def test_a_balanced_decision_observes_its_score_with_its_outcome() -> None:
    metrics = SchedulerMetrics()
    controller(metrics)._record(DELETE, "disrupted")
    labels = {"consolidation_type": "single", "outcome": "disrupted"}
    assert sample(metrics, "count", **labels) == 1.0
    assert sample(metrics, "sum", **labels) == 0.8
    # 0.8 falls in the bucket up to 1.0, not the one up to 0.75.
    assert sample(metrics, "bucket", le="0.75", **labels) == 0.0
    assert sample(metrics, "bucket", le="1.0", **labels) == 1.0


def test_an_unscored_decision_observes_nothing() -> None:
    metrics = SchedulerMetrics()
    controller(metrics)._record(dataclasses.replace(DELETE, balanced_score=None), "disrupted")
    labels = {"consolidation_type": "single", "outcome": "disrupted"}
    assert sample(metrics, "count", **labels) is None
