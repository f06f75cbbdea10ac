"""What kube-scheduler's filter plugins decide, on the wire form of pods and nodes.

Pure functions over JSON-like objects (no store, no clock): pod requests, node allocatable,
taints and tolerations, node selectors and required node affinity, and the failure histogram
message ("0/3 nodes are available: 3 Insufficient cpu."). The default scheduler composes them
with its node index; pod (anti-)affinity and topology spread need the cluster's pods, so they
live with the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from actuator_svc.core.quantities import parse_bytes, parse_cpu_millis, parse_quantity

JsonObject = dict[str, Any]
Resources = dict[str, int]  # cpu in millicores, memory/ephemeral-storage in bytes, others as counts

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"
FILTERING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})

# kube-scheduler's filter failure reasons, word for word
REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
REASON_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS: Final = "Too many pods"
REASON_POD_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_POD_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_MISSING_LABEL: Final = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)
NO_NODES_MESSAGE: Final = "no nodes available to schedule pods"


class QuantityError(ValueError):
    """A resource quantity in a pod or node that is not a Kubernetes quantity."""


def _amount(name: str, value: Any) -> int:
    text = str(value)
    try:
        if name == CPU:
            return parse_cpu_millis(text)
        if name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
            return parse_bytes(text)
        return int(parse_quantity(text).to_integral_value(rounding="ROUND_CEILING"))
    except ValueError as error:
        raise QuantityError(f"resource {name}: {error}") from error


def resources_of(quantities: Mapping[str, Any] | None) -> Resources:
    """A resource list (`{"cpu": "500m", "memory": "1Gi"}`) in base units."""
    return {name: _amount(name, value) for name, value in (quantities or {}).items()}


def pod_requests(pod: JsonObject) -> Resources:
    """What the pod asks of a node: its containers' requests summed, at least each init
    container's, plus overhead, plus one pod slot (the NodeResourcesFit plugin's arithmetic)."""
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or []:
        for name, amount in resources_of(
            (container.get("resources") or {}).get("requests")
        ).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in resources_of(
            (container.get("resources") or {}).get("requests")
        ).items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in resources_of(spec.get("overhead")).items():
        total[name] = total.get(name, 0) + amount
    total[PODS] = 1
    return total


def node_allocatable(node: JsonObject) -> Resources:
    status = node.get("status") or {}
    return resources_of(status.get("allocatable") or status.get("capacity"))


def insufficient_resources(
    requests: Resources, allocatable: Resources, used: Resources
) -> list[str]:
    """The NodeResourcesFit reasons ("Insufficient cpu", "Too many pods"), [] when it fits."""
    reasons = []
    for name, amount in requests.items():
        if amount <= 0:
            continue
        if used.get(name, 0) + amount > allocatable.get(name, 0):
            reasons.append(REASON_TOO_MANY_PODS if name == PODS else f"Insufficient {name}")
    return reasons


# ---------------------------------------------------------------------------- taints


def node_taints(node: JsonObject) -> list[JsonObject]:
    return list((node.get("spec") or {}).get("taints") or [])


def tolerates(toleration: JsonObject, taint: JsonObject) -> bool:
    """Whether one toleration tolerates one taint (key, value, effect; Exists vs Equal)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated_taint(
    taints: Iterable[JsonObject], tolerations: list[JsonObject]
) -> JsonObject | None:
    """The first NoSchedule/NoExecute taint none of `tolerations` tolerates, else None."""
    for taint in taints:
        if taint.get("effect") not in FILTERING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def untolerated_taint_reason(taint: JsonObject) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


# ---------------------------------------------------------------------------- node affinity


def _expression_matches(expression: JsonObject, value: str | None) -> bool:  # noqa: PLR0911 - one return per operator
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            number, bound = int(value), int(values[0])
        except ValueError:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def node_selector_term_matches(term: JsonObject, labels: Mapping[str, str], name: str) -> bool:
    """One nodeSelectorTerm: all its expressions and fields match (an empty term matches none)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    for expression in expressions:
        if not _expression_matches(expression, labels.get(str(expression.get("key")))):
            return False
    for field in fields:
        value = name if field.get("key") == "metadata.name" else None
        if not _expression_matches(field, value):
            return False
    return True


def matches_node_selection(pod: JsonObject, labels: Mapping[str, str], name: str) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity."""
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or None
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") or []
    return any(node_selector_term_matches(term, labels, name) for term in terms)


# ---------------------------------------------------------------------------- messages


def unschedulable_message(
    node_count: int, histogram: Mapping[str, int], pod_reason: str | None = None
) -> str:
    """kube-scheduler's FitError text: reasons counted, sorted as strings, joined; or the one
    reason that rules out every node at once (a PreFilter failure)."""
    if node_count == 0:
        return NO_NODES_MESSAGE
    if pod_reason is not None:
        return f"0/{node_count} nodes are available: {pod_reason}."
    reasons = sorted(f"{count} {reason}" for reason, count in histogram.items())
    return f"0/{node_count} nodes are available: {', '.join(reasons)}."


__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "NOT_READY_TAINT",
    "PODS",
    "UNSCHEDULABLE_TAINT",
    "QuantityError",
    "Resources",
    "first_untolerated_taint",
    "insufficient_resources",
    "matches_node_selection",
    "node_allocatable",
    "node_selector_term_matches",
    "node_taints",
    "pod_requests",
    "resources_of",
    "tolerates",
    "unschedulable_message",
    "untolerated_taint_reason",
]
