"""Readiness gates as the kubelet computes them: Ready is False, in kubelet's words, until
every `spec.readinessGates` condition is True (test_kubelets drives it through a client)."""

from __future__ import annotations

from typing import Any

from localcloud.kube.controllers.pod_readiness import (
    READINESS_GATES_NOT_READY,
    ready_condition,
    running_conditions,
    with_ready_refreshed,
)

GATE = "target-health.example.com/web"
NOW = "2026-11-26T10:00:00Z"
LATER = "2026-11-26T10:05:00Z"


def gated(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "spec": {"readinessGates": [{"conditionType": GATE}, {"conditionType": "b.example/x"}]},
        "status": {"conditions": conditions or []},
    }


def test_ready_names_every_gate_not_true_in_kubelets_words() -> None:
    """A missing gate condition and one that is not True each get kubelet's message."""
    condition = ready_condition(gated([{"type": GATE, "status": "False"}]), NOW)
    assert condition == {
        "type": "Ready",
        "status": "False",
        "reason": READINESS_GATES_NOT_READY,
        "message": f'the status of pod readiness gate "{GATE}" is not "True", but False, '
        'corresponding condition of pod readiness gate "b.example/x" does not exist.',
        "lastProbeTime": None,
        "lastTransitionTime": NOW,
    }
    both = [{"type": GATE, "status": "True"}, {"type": "b.example/x", "status": "True"}]
    assert ready_condition(gated(both), NOW)["status"] == "True"


def test_starting_keeps_other_conditions_and_refreshing_moves_only_on_change() -> None:
    """Starting keeps the gate's condition and PodScheduled; a refresh writes nothing while
    Ready stays, and a flip moves lastTransitionTime."""
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"}
    gate = {"type": GATE, "status": "True"}
    started = running_conditions(gated([scheduled, gate]), NOW)
    assert [c["type"] for c in started] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        GATE,
    ]
    assert started[4] == scheduled
    running = {**gated(started)}
    assert with_ready_refreshed(running, LATER) is None  # still False: b.example/x missing
    running["status"]["conditions"].append({"type": "b.example/x", "status": "True"})
    refreshed = with_ready_refreshed(running, LATER)
    assert refreshed is not None
    ready = next(c for c in refreshed if c["type"] == "Ready")
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", LATER)
    assert "reason" not in ready
