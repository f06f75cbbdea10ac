"""A running pod's conditions as the kubelet's status manager writes them (pure).

The kubelet owns PodReadyToStartContainers, Initialized, ContainersReady and Ready; other
conditions in a pod's status (a readiness gate's, written by a load-balancer controller, say)
are kept as they are. Ready is ContainersReady and every `spec.readinessGates` condition True,
with kubelet's reason and message otherwise (`pkg/kubelet/status/generate.go`).
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


def unready_gates(pod: JsonObject) -> list[str]:
    """kubelet's message for each readiness gate whose condition is missing or not True."""
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    messages = []
    for gate in (pod.get("spec") or {}).get("readinessGates") or []:
        kind = gate.get("conditionType", "")
        condition = conditions.get(kind)
        if condition is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{kind}" does not exist.'
            )
        elif condition.get("status") != "True":
            messages.append(
                f'the status of pod readiness gate "{kind}" is not "True", '
                f"but {condition.get('status')}"
            )
    return messages


def ready_condition(pod: JsonObject, now: str) -> JsonObject:
    """The Ready condition of a pod whose containers all run and are ready; its transition time
    moves only when its status changes."""
    messages = unready_gates(pod)
    wanted: JsonObject = {"type": "Ready", "status": "False" if messages else "True"}
    if messages:
        wanted["reason"] = READINESS_GATES_NOT_READY
        wanted["message"] = ", ".join(messages)
    current = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    since = current.get("lastTransitionTime") if current else None
    if current is None or current.get("status") != wanted["status"] or since is None:
        since = now
    return {**wanted, "lastProbeTime": None, "lastTransitionTime": since}


def running_conditions(pod: JsonObject, now: str) -> list[JsonObject]:
    """Conditions of a pod whose containers have just started and are ready: the kubelet's own
    (all True, Ready subject to the readiness gates), PodScheduled (kept, or True now), then
    the pod's others unchanged."""
    others = [
        c
        for c in (pod.get("status") or {}).get("conditions") or []
        if c.get("type") not in KUBELET_CONDITIONS
    ]
    started = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for kind in ("PodReadyToStartContainers", "Initialized")
    ]
    ready = ready_condition(
        {**pod, "status": {**(pod.get("status") or {}), "conditions": others}}, now
    )
    containers_ready = {
        "type": "ContainersReady",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    scheduled = next(
        (c for c in others if c.get("type") == "PodScheduled"),
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        },
    )
    rest = [c for c in others if c.get("type") != "PodScheduled"]
    return [*started, ready, containers_ready, scheduled, *rest]


def with_ready_refreshed(pod: JsonObject, now: str) -> list[JsonObject] | None:
    """A running pod's conditions with Ready recomputed from its readiness gates, or None when
    Ready would not change (no write needed)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    current = next((c for c in conditions if c.get("type") == "Ready"), None)
    wanted = ready_condition(pod, now)
    if current is not None and all(
        current.get(k) == wanted.get(k) for k in ("status", "reason", "message")
    ):
        return None
    if current is None:
        return [*conditions, wanted]
    return [wanted if c.get("type") == "Ready" else c for c in conditions]
