"""consolidateAfter on destinations (issue 15 item 3, Karpenter v1.14): a node that just
received pods, for example the pods a consolidation moved, restarts its quiet time, so it is
not consolidated again before its own consolidateAfter and the pods are not moved twice in a
row. The controller stamps a pod's arrival on its new node; the core refuses a node stamped
within consolidateAfter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_svc.core.disruption import plan_disruption
from scheduler_svc.disruption.controller import DisruptionController
from scheduler_svc.kube.resources import PODS
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import Change, ClusterMirror
from tests.scheduler_svc.core.disruption.builders import at, candidate, pods, pool, snapshot

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def pod(node: str | None, phase: str = "Running") -> dict[str, Any]:
    spec = {"nodeName": node} if node else {}
    return {
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_pod_arriving_on_a_node_restarts_that_nodes_quiet_time() -> None:
    controller = DisruptionController(
        mirror=ClusterMirror(),
        writer=None,  # type: ignore[arg-type]
        metrics=SchedulerMetrics(),
        clock=lambda: NOW,
    )
    controller.on_change(Change(PODS, "MODIFIED", "default/web-1", pod(None), pod("dest")))
    assert controller.last_pod_event_at == {"dest": NOW}


@pytest.mark.parametrize(("since_arrival", "consolidated"), [(59, False), (60, True)])
def test_a_destination_waits_its_own_consolidate_after(
    since_arrival: int, consolidated: bool
) -> None:
    """``dest`` received a pod at t=1000 (a consolidation moved it there); its pods would fit
    on ``room``, but it stays until its consolidateAfter (60 s) has passed since the arrival."""
    dest = candidate("dest", "c4.large", pods("moved", 1), created=0, last_event=1000)
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    settings = pool(consolidate_after_seconds=60.0, expire_after_seconds=None, budgets=())
    plan = plan_disruption(snapshot([dest, room], [settings]), at(1000 + since_arrival))
    assert [d.nodes for d in plan.decisions] == ([("dest",)] if consolidated else [])
    if not consolidated:
        (held,) = [b for b in plan.blocked if b.node == "dest"]
        assert held.message == "pods changed 59s ago (consolidateAfter 1m)"


def test_the_stamp_is_on_the_destination_clock() -> None:
    """The arrival is stamped on the disruption clock, whatever the pod's own timestamps."""
    later = NOW + timedelta(hours=1)
    controller = DisruptionController(
        mirror=ClusterMirror(),
        writer=None,  # type: ignore[arg-type]
        metrics=SchedulerMetrics(),
        clock=lambda: later,
    )
    controller.on_change(Change(PODS, "ADDED", "default/web-1", None, pod("dest")))
    assert controller.last_pod_event_at["dest"] == later
