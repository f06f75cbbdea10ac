"""PodDisruptionBudgets inside the store: the eviction subresource and budget status.

Eviction counts live: a pod is evicted unless the one budget selecting it would have fewer
healthy pods than it desires. The status of a namespace's budgets is refreshed soon after its
pods or budgets change (coalesced), as the disruption controller does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from localcloud.kube.errors import InternalError, TooManyRequests
from localcloud.kube.objects import JsonObject, format_timestamp
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import label_selector_from_object
from localcloud.kube.watch import MODIFIED

if TYPE_CHECKING:
    from localcloud.kube.store import Store

TERMINAL_PHASES: Final = ("Succeeded", "Failed")


class DisruptionBudgets:
    """Evictions checked against PodDisruptionBudgets, and the budgets' status."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._dirty_namespaces: set[str] = set()
        self._pending_refresh: asyncio.Handle | None = None

    def evict(
        self, namespace: str, pod_name: str, grace_period_seconds: int | None = None
    ) -> JsonObject:
        """Delete a pod unless that would violate its PodDisruptionBudget.

        Raises NotFound, TooManyRequests (budget exhausted; details.causes reason
        DisruptionBudget) or InternalError when more than one budget selects the pod, as the
        real eviction API does. Pods that are already terminating, Pending or terminal are
        evicted without consulting budgets.
        """
        store = self._store
        pods = store.resource("pods")
        pod = store._get(pods, pod_name, namespace)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in (*TERMINAL_PHASES, "Pending"):
            return store._served(
                pods,
                store._delete(pods, pod_name, namespace, grace_period_seconds=grace_period_seconds),
                copy=True,
            )
        budgets = [
            pdb
            for pdb in store._bucket(store.resource("poddisruptionbudgets")).objects.values()
            if pdb["metadata"]["namespace"] == namespace
            and label_selector_from_object((pdb.get("spec") or {}).get("selector")).matches(
                pod["metadata"].get("labels")
            )
            and (pdb.get("spec") or {}).get("selector") is not None
        ]
        if len(budgets) > 1:
            raise InternalError(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support."
            )
        if budgets:
            self._check(budgets[0], pods, namespace, pod_ready=_is_ready(pod))
        return store._served(
            pods,
            store._delete(pods, pod_name, namespace, grace_period_seconds=grace_period_seconds),
            copy=True,
        )

    def _check(
        self, pdb: JsonObject, pods: ResourceType, namespace: str, *, pod_ready: bool
    ) -> None:
        """TooManyRequests unless the budget lets this pod go. A pod that is not ready costs
        the budget nothing: with `unhealthyPodEvictionPolicy: AlwaysAllow` it always goes, with
        `IfHealthyBudget` (the default) when the budget has the healthy pods it desires."""
        _, healthy, desired = self._counts(pdb, pods, namespace)
        if not pod_ready:
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            if policy == "AlwaysAllow" or healthy >= desired:
                return
        if healthy - desired <= 0:
            name = pdb["metadata"]["name"]
            raise TooManyRequests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} needs {desired} healthy pods "
                        f"and has {healthy} currently",
                    }
                ],
            )

    def schedule_status(self, namespace: str) -> None:
        """Refresh the status of the namespace's PodDisruptionBudgets soon (coalesced), as the
        disruption controller does; eviction itself always counts live."""
        store = self._store
        budgets = store._bucket(store.resource("poddisruptionbudgets")).objects
        if not any(ns == namespace for ns, _ in budgets):
            return
        self._dirty_namespaces.add(namespace)
        if self._pending_refresh is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._refresh_status()
                return
            self._pending_refresh = loop.call_soon(self._refresh_status)

    def _refresh_status(self) -> None:
        store = self._store
        self._pending_refresh = None
        dirty, self._dirty_namespaces = self._dirty_namespaces, set()
        pdbs = store.resource("poddisruptionbudgets")
        pods = store.resource("pods")
        for (namespace, _), pdb in list(store._bucket(pdbs).objects.items()):
            if namespace not in dirty:
                continue
            expected, healthy, desired = self._counts(pdb, pods, namespace)
            allowed = max(0, healthy - desired)
            old_status = pdb.get("status") or {}
            old_conditions = old_status.get("conditions") or [{}]
            condition_status = "True" if allowed > 0 else "False"
            status = {
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": condition_status,
                        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                        "message": "",
                        "observedGeneration": pdb["metadata"].get("generation", 1),
                        "lastTransitionTime": old_conditions[0].get("lastTransitionTime")
                        if old_conditions[0].get("status") == condition_status
                        else format_timestamp(store._clock()),
                    }
                ],
            }
            if status != old_status:
                new = {**pdb, "metadata": dict(pdb["metadata"]), "status": status}
                store._commit(pdbs, MODIFIED, new, pdb)
        self._dirty_namespaces.clear()  # our own status writes marked the namespaces again

    def _counts(self, pdb: JsonObject, pods: ResourceType, namespace: str) -> tuple[int, int, int]:
        """(expected pods, currently healthy, desired healthy) for a PodDisruptionBudget."""
        store = self._store
        spec = pdb.get("spec") or {}
        selector = label_selector_from_object(spec.get("selector"))
        selected = [
            p
            for p in store._bucket(pods).objects.values()
            if p["metadata"]["namespace"] == namespace
            and selector.matches(p["metadata"].get("labels"))
            and (p.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        healthy = sum(
            1 for p in selected if not p["metadata"].get("deletionTimestamp") and _is_ready(p)
        )
        expected = len(selected)
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        return expected, healthy, desired


def _is_ready(pod: JsonObject) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        percent = int(value[:-1])
        scaled = total * percent / 100
        return int(-(-scaled // 1)) if round_up else int(scaled)
    return int(value)
