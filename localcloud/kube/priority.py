"""The Priority admission plugin: a pod's `priorityClassName` becomes its `spec.priority`.

As kube-apiserver's plugin does on pod create: a named PriorityClass must exist (403
Forbidden otherwise) and gives the pod its value and, when the class sets one, its
preemptionPolicy; a pod naming none takes the globalDefault class (the lowest such), or
priority 0. A priority or preemptionPolicy the pod states itself must agree with the class's.
The two system classes answer by name without being stored objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from localcloud.kube.errors import Forbidden

JsonObject = dict[str, Any]
PRIORITY_CLASSES_KEY: Final = "scheduling.k8s.io/v1/priorityclasses"
SYSTEM_CLASSES: Final = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}


def default_priority_class(priority_class: JsonObject) -> None:
    priority_class.setdefault("preemptionPolicy", "PreemptLowerPriority")


def admit_pod(
    pod: JsonObject,
    named: Callable[[str], JsonObject | None],
    every: Callable[[], Iterable[JsonObject]],
) -> None:
    """Set the pod's priority from its class (`named` finds one, `every` lists them all)."""
    spec = pod.setdefault("spec", {})
    pod_name = (pod.get("metadata") or {}).get("name", "")
    class_name = spec.get("priorityClassName") or ""
    found: JsonObject | None
    if class_name:
        found = named(class_name)
        if found is None and class_name in SYSTEM_CLASSES:
            found = {"value": SYSTEM_CLASSES[class_name]}
        if found is None:
            raise Forbidden(
                f'pods "{pod_name}" is forbidden: no PriorityClass with name {class_name} '
                "was found",
                kind="pods",
                name=pod_name,
            )
    else:
        defaults = [c for c in every() if c.get("globalDefault")]
        found = min(defaults, key=lambda c: int(c.get("value", 0)), default=None)
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    value = int(found.get("value", 0)) if found is not None else 0
    if "priority" in spec and spec["priority"] is not None and int(spec["priority"]) != value:
        raise Forbidden(
            f'pods "{pod_name}" is forbidden: the integer value of priority ({spec["priority"]}) '
            "must not be provided in pod spec; priority admission controller computed "
            f"{value} from the given PriorityClass name",
            kind="pods",
            name=pod_name,
        )
    spec["priority"] = value
    policy = (found or {}).get("preemptionPolicy")
    if policy is not None:
        if spec.get("preemptionPolicy") not in (None, policy):
            raise Forbidden(
                f'pods "{pod_name}" is forbidden: the string value of PreemptionPolicy '
                f"({spec['preemptionPolicy']}) must not be provided in pod spec; priority "
                f"admission controller computed {policy} from the given PriorityClass name",
                kind="pods",
                name=pod_name,
            )
        spec["preemptionPolicy"] = policy
