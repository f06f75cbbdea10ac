"""`DefaultScheduler`: kube-scheduler's stand-in, binding pending pods to nodes where they fit.

It watches pods and nodes through the store and keeps an index: each node's allocatable, what
the pods bound to it request, and which pods run where. Pending pods (no nodeName, not being
deleted, `schedulerName: default-scheduler`) are placed in priority then arrival order by the
filters of kube-scheduler's default profile, in its order: NodeUnschedulable, TaintToleration
(NoSchedule/NoExecute), NodeAffinity (nodeSelector + required node affinity), NodeResourcesFit,
VolumeBinding/VolumeZone (claims exist; a bound volume's node affinity and zone),
PodTopologySpread (DoNotSchedule) and InterPodAffinity (required affinity and anti-affinity,
both ways). Among the feasible nodes found (at most `nodes_to_score`, starting where the previous
pod's search stopped, as kube-scheduler's percentageOfNodesToScore does, with a smaller
sample) it picks the least allocated one, binds the pod (pods/binding) and counts it at once
("assumes" it).

A pod that fits nowhere gets `PodScheduled=False`, reason `Unschedulable` and kube-scheduler's
message ("0/3 nodes are available: 3 Insufficient cpu."), plus a FailedScheduling event, and is
retried when a node or a bound pod changes, after `retry_debounce_seconds` so that bursts of
changes cost one retry. Pods with identical scheduling constraints share their static filtering
and, within one pass, their failure, so thousands of pods cost little more than their binds.

The filters that look at other pods and at volumes, and the caches that keep them cheap, live
in scheduler_pod_rules.py; the status and Events it writes in scheduler_writes.py.

A node that is not Ready counts as tainted `node.kubernetes.io/not-ready:NoSchedule` (what the
node lifecycle controller does in a real cluster), so only Ready nodes take pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import Informer, ObjectKey, object_key, resource_types
from localcloud.kube.controllers.pod_fit import (
    CPU,
    MEMORY,
    NOT_READY_TAINT,
    REASON_NODE_AFFINITY,
    REASON_UNSCHEDULABLE,
    UNSCHEDULABLE_TAINT,
    QuantityError,
    Resources,
    first_untolerated_taint,
    insufficient_resources,
    matches_node_selection,
    node_allocatable,
    node_selector_term_matches,
    node_taints,
    pod_requests,
    tolerates,
    unschedulable_message,
    untolerated_taint_reason,
)
from localcloud.kube.controllers.scheduler_pod_rules import (
    ClusterIndex,
    IndexedNode,
    PassCache,
    PodRules,
    anti_affinity_terms,
    claim_names,
)
from localcloud.kube.controllers.scheduler_writes import DEFAULT_SCHEDULER, SchedulingRecorder
from localcloud.kube.errors import ApiError
from localcloud.kube.store import DELETED, Store

JsonObject = dict[str, Any]
_TERMINAL: Final = ("Succeeded", "Failed")
_YIELD_EVERY: Final = 64
_NOTHING: Final[Resources] = {}

log = structlog.get_logger("localcloud.kube.controllers.scheduler")


def is_ready(node: JsonObject) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


class DefaultScheduler:
    """Binds pending pods; see the module docstring. `run()` until cancelled."""

    def __init__(
        self,
        store: Store,
        *,
        retry_debounce_seconds: float = 0.1,
        nodes_to_score: int = 50,
        events: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self._rt = resource_types(store)
        self.clock = clock
        self.retry_debounce_seconds = retry_debounce_seconds
        self.nodes_to_score = max(1, nodes_to_score)
        self.events = events
        # nodes, bound pods and the pass's caches, shared with the pod rules
        self._index = ClusterIndex()
        self._soft_tainted: set[str] = set()
        self._node_names: list[str] = []
        self._used: dict[str, Resources] = {}
        self._accounted: dict[ObjectKey, tuple[str, Resources]] = {}
        self._active: dict[ObjectKey, None] = {}
        self._unschedulable: set[ObjectKey] = set()
        self._static: dict[str, list[str]] = {}
        self._retry_at: float | None = None
        self._wake = asyncio.Event()
        self._start_index = 0
        self.pods = Informer(store, "pods", self._on_pod)
        self.nodes = Informer(store, "nodes", self._on_node)
        self.claims = Informer(store, "persistentvolumeclaims", self._on_volume)
        self.volumes = Informer(store, "persistentvolumes", self._on_volume)
        self._recorder = SchedulingRecorder(store, clock, events=events)
        self._rules = PodRules(self._index, self.claims, self.volumes, self._namespace_labels)

    # ------------------------------------------------------------------ index upkeep

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        name = node["metadata"]["name"]
        self._soft_tainted.discard(name)
        if kind == DELETED:
            self._index.nodes.pop(name, None)
        else:
            if any(t.get("effect") == "PreferNoSchedule" for t in node_taints(node)):
                self._soft_tainted.add(name)
            try:
                allocatable = node_allocatable(node)
            except QuantityError as error:
                log.warning("node_quantity_invalid", node=name, error=str(error))
                allocatable = {}
            taints = node_taints(node)
            if not is_ready(node) and not any(t.get("key") == NOT_READY_TAINT for t in taints):
                taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
            entry = IndexedNode(
                name=name,
                labels=dict(node["metadata"].get("labels") or {}),
                taints=taints,
                allocatable=allocatable,
                unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            )
            old = self._index.nodes.get(name)
            self._index.nodes[name] = entry
            if old == entry:
                return  # a heartbeat: nothing the scheduler looks at changed
        self._node_names = sorted(self._index.nodes)
        self._static.clear()
        self._index.pass_cache = PassCache()
        self._request_retry()

    def _on_volume(self, kind: str, obj: JsonObject, previous: JsonObject | None) -> None:
        self._index.pass_cache = PassCache()
        self._request_retry()

    def _on_pod(self, kind: str, pod: JsonObject, previous: JsonObject | None) -> None:
        key = object_key(pod)
        if kind == DELETED:
            self._active.pop(key, None)
            self._unschedulable.discard(key)
            self._unaccount(key)
            return
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        node_name = spec.get("nodeName")
        if node_name and phase not in _TERMINAL:
            self._active.pop(key, None)
            self._unschedulable.discard(key)
            if self._account(key, pod, node_name):
                self._request_retry()  # placed by someone else: affinity may now be satisfied
            return
        if self._unaccount(key):
            self._request_retry()
        if self._is_pending(pod):
            if (
                key in self._unschedulable
                and previous is not None
                and _scheduling_view(pod) != _scheduling_view(previous)
            ):
                self._unschedulable.discard(key)  # edited (tolerations, labels): try again now
            if key not in self._unschedulable and key not in self._active:
                self._active[key] = None
                self._wake.set()
        else:
            self._active.pop(key, None)
            self._unschedulable.discard(key)

    @staticmethod
    def _is_pending(pod: JsonObject) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
            and (pod.get("status") or {}).get("phase") not in _TERMINAL
        )

    def _account(
        self, key: ObjectKey, pod: JsonObject, node_name: str, *, own: bool = False
    ) -> bool:
        """Count a bound pod on its node; False when it was counted there already. `own` binds
        keep the pass cache (the caller updates it); any other change invalidates it."""
        current = self._accounted.get(key)
        self._index.bound[key] = (node_name, pod)
        if anti_affinity_terms(pod):
            self._index.anti_affinity_pods.add(key)
        if current is not None and current[0] == node_name:
            return False
        if current is not None:
            self._unaccount(key)
            self._index.bound[key] = (node_name, pod)
        try:
            requests = pod_requests(pod)
        except QuantityError:
            requests = {"pods": 1}
        used = self._used.setdefault(node_name, {})
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + amount
        self._accounted[key] = (node_name, requests)
        if not own:
            self._index.pass_cache = PassCache()
        return True

    def _unaccount(self, key: ObjectKey) -> bool:
        self._index.bound.pop(key, None)
        self._index.anti_affinity_pods.discard(key)
        current = self._accounted.pop(key, None)
        if current is None:
            return False
        node_name, requests = current
        used = self._used.get(node_name, {})
        for name, amount in requests.items():
            used[name] = used.get(name, 0) - amount
        self._index.pass_cache = PassCache()
        return True

    def _request_retry(self) -> None:
        # Armed even when no pod waits yet: a pod the running pass is about to mark
        # unschedulable may have been judged before this change.
        if self._retry_at is not None:
            return
        self._retry_at = asyncio.get_running_loop().time() + self.retry_debounce_seconds
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        self.nodes.start()
        self.pods.start()
        self.claims.start()
        self.volumes.start()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.claims.run())
            tasks.create_task(self.volumes.run())
            tasks.create_task(self.nodes.run())
            tasks.create_task(self.pods.run())
            tasks.create_task(self._schedule_forever())

    async def _schedule_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._active:
                timeout = None if self._retry_at is None else max(0.0, self._retry_at - loop.time())
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
                # that arrives as the wake-up does (bpo-42130), and the loop would run on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                self._wake.clear()
            if self._retry_at is not None and loop.time() >= self._retry_at:
                self._retry_at = None
                for key in sorted(self._unschedulable):
                    self._active[key] = None
                self._unschedulable.clear()
            if self._active:
                await self._schedule_pass()

    async def _schedule_pass(self) -> None:
        keys = list(self._active)
        self._active.clear()
        cache = self.pods.cache
        keys.sort(key=lambda k: -int(((cache.get(k) or {}).get("spec") or {}).get("priority") or 0))
        for index, key in enumerate(keys):
            if index % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)
            pod = cache.get(key)
            if pod is None or not self._is_pending(pod) or key in self._accounted:
                continue
            try:
                await self._schedule_one(key, pod)
            except Exception:  # one bad pod must not stop scheduling
                log.exception("schedule_failed", pod=f"{key[0]}/{key[1]}")

    async def _schedule_one(self, key: ObjectKey, pod: JsonObject) -> None:
        try:
            requests = pod_requests(pod)
        except QuantityError as error:
            await self._mark_unschedulable(key, pod, f"invalid resource request: {error}")
            return
        node_name, message = self._place(pod, requests)
        if node_name is None:
            await self._mark_unschedulable(key, pod, message)
            return
        try:
            bound = await self.store.bind(key[0], key[1], node_name)
        except ApiError as error:
            log.info("bind_failed", pod=f"{key[0]}/{key[1]}", node=node_name, error=str(error))
            return
        self._account(key, bound, node_name, own=True)
        self._rules.after_bind(bound, node_name)
        log.debug("pod_scheduled", pod=f"{key[0]}/{key[1]}", node=node_name)
        if self.events:
            await self._recorder.event(
                bound,
                "Normal",
                "Scheduled",
                f"Successfully assigned {key[0]}/{key[1]} to {node_name}",
            )

    # ------------------------------------------------------------------ placement

    def _place(self, pod: JsonObject, requests: Resources) -> tuple[str | None, str]:
        class_key = _class_key(pod, requests)
        failed = self._index.pass_cache.failed.get(class_key)
        if failed is not None:
            return None, failed
        problem = self._rules.claims_problem(pod)
        if problem is not None:
            return None, unschedulable_message(len(self._node_names), {}, problem)
        candidates = self._static_candidates(class_key, pod)
        pod_rules = self._rules.needed(pod)
        requested = [(name, amount) for name, amount in requests.items() if amount > 0]
        preferences = _preferred_terms(pod)
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if self._soft_tainted:
            preferences = preferences or [(0, {})]
        best: str | None = None
        best_score = -1.0
        found = 0
        count = len(candidates)
        start = self._start_index % count if count else 0
        scanned = 0
        nodes, used_by_node = self._index.nodes, self._used
        for offset in range(count):
            scanned = offset + 1
            name = candidates[(start + offset) % count]
            node = nodes.get(name)
            if node is None:
                continue
            used = used_by_node.get(name) or _NOTHING
            allocatable = node.allocatable
            if any(used.get(r, 0) + a > allocatable.get(r, 0) for r, a in requested):
                continue
            if pod_rules and self._rules.reason(pod, class_key, node) is not None:
                continue
            score = _least_allocated(allocatable, used, requests)
            if preferences:
                score += _preference_score(preferences, tolerations, node)
            if score > best_score:
                best, best_score = name, score
            found += 1
            if found >= self.nodes_to_score:
                break
        self._start_index = start + scanned
        if best is not None:
            return best, ""
        message = self._diagnose(pod, class_key, requests)
        self._index.pass_cache.failed[class_key] = message
        return None, message

    def _static_candidates(self, class_key: str, pod: JsonObject) -> list[str]:
        cached = self._static.get(class_key)
        if cached is None:
            cached = [
                name
                for name in self._node_names
                if self._static_reason(pod, self._index.nodes[name]) is None
            ]
            self._static[class_key] = cached
        return cached

    @staticmethod
    def _static_reason(pod: JsonObject, node: IndexedNode) -> str | None:
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if node.unschedulable and not any(
            tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
        ):
            return REASON_UNSCHEDULABLE
        taint = first_untolerated_taint(node.taints, tolerations)
        if taint is not None:
            return untolerated_taint_reason(taint)
        if not matches_node_selection(pod, node.labels, node.name):
            return REASON_NODE_AFFINITY
        return None

    def _diagnose(self, pod: JsonObject, class_key: str, requests: Resources) -> str:
        histogram: dict[str, int] = {}
        pod_rules = self._rules.needed(pod)
        for name in self._node_names:
            node = self._index.nodes[name]
            reasons: list[str] = []
            static = self._static_reason(pod, node)
            if static is not None:
                reasons = [static]
            else:
                reasons = insufficient_resources(
                    requests, node.allocatable, self._used.get(name, {})
                )
                if not reasons and pod_rules:
                    rule = self._rules.reason(pod, class_key, node)
                    reasons = [rule] if rule else []
            for reason in reasons:
                histogram[reason] = histogram.get(reason, 0) + 1
        return unschedulable_message(len(self._node_names), histogram)

    async def _mark_unschedulable(self, key: ObjectKey, pod: JsonObject, message: str) -> None:
        self._unschedulable.add(key)  # tried again on the next retry
        await self._recorder.unschedulable(key, pod, message)

    def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        found = self.store.get_nowait(self._rt["namespaces"], namespace)
        return None if found is None else found["metadata"].get("labels")


# ---------------------------------------------------------------------------- pod spec views


def _preferred_terms(pod: JsonObject) -> list[tuple[int, JsonObject]]:
    """(weight, nodeSelectorTerm) of preferredDuringSchedulingIgnoredDuringExecution."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return [
        (int(p.get("weight", 0)), p.get("preference") or {})
        for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ]


def _preference_score(
    preferences: list[tuple[int, JsonObject]], tolerations: list[JsonObject], node: IndexedNode
) -> float:
    """kube's NodeAffinity (weight 2) and TaintToleration (weight 3) scores on the scale of
    LeastAllocated (0..1): the share of preferred-term weight the node matches, less a share
    for each PreferNoSchedule taint the pod does not tolerate."""
    score = 0.0
    total_weight = sum(weight for weight, _ in preferences)
    if total_weight > 0:
        matched = sum(
            weight
            for weight, term in preferences
            if term and node_selector_term_matches(term, node.labels, node.name)
        )
        score += 2.0 * matched / total_weight
    untolerated = sum(
        1
        for taint in node.taints
        if taint.get("effect") == "PreferNoSchedule"
        and not any(tolerates(t, taint) for t in tolerations)
    )
    return score - 3.0 * min(1.0, untolerated / 3)


def _least_allocated(allocatable: Resources, used: Resources, requests: Resources) -> float:
    """kube's LeastAllocated score: the share of cpu and memory left after placing the pod."""
    total = 0.0
    shares = 0
    for resource in (CPU, MEMORY):
        capacity = allocatable.get(resource, 0)
        if capacity > 0:
            total += (capacity - used.get(resource, 0) - requests.get(resource, 0)) / capacity
            shares += 1
    return total / shares if shares else 0.0


def _scheduling_view(pod: JsonObject) -> tuple[Any, Any]:
    """What of a pod its placement depends on (its spec and labels, not its status)."""
    return pod.get("spec"), pod["metadata"].get("labels")


def _class_key(pod: JsonObject, requests: Resources) -> str:
    """Pods with equal keys are interchangeable for every filter (an equivalence class)."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    meta = pod["metadata"]
    pod_rules = bool(
        affinity.get("podAffinity")
        or affinity.get("podAntiAffinity")
        or spec.get("topologySpreadConstraints")
    )
    return json.dumps(
        [
            requests,
            spec.get("nodeSelector"),
            affinity.get("nodeAffinity"),
            spec.get("tolerations"),
            meta.get("namespace"),
            # labels matter when pods select each other (affinity, spread, others' anti-affinity)
            meta.get("labels"),
            affinity.get("podAffinity") if pod_rules else None,
            affinity.get("podAntiAffinity") if pod_rules else None,
            spec.get("topologySpreadConstraints") if pod_rules else None,
            claim_names(pod),
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
