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

A node that is not Ready counts as tainted `node.kubernetes.io/not-ready:NoSchedule` (what the
node lifecycle controller does in a real cluster), so only Ready nodes take pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import Informer, ObjectKey, object_key, resource_types
from localcloud.kube.controllers.pod_fit import (
    CPU,
    MEMORY,
    NOT_READY_TAINT,
    REASON_EXISTING_ANTI_AFFINITY,
    REASON_NODE_AFFINITY,
    REASON_POD_AFFINITY,
    REASON_POD_ANTI_AFFINITY,
    REASON_SPREAD,
    REASON_SPREAD_MISSING_LABEL,
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
from localcloud.kube.errors import ApiError
from localcloud.kube.selectors import LabelSelector, label_selector_from_object
from localcloud.kube.store import DELETED, Store, copy_json, format_timestamp

JsonObject = dict[str, Any]
DEFAULT_SCHEDULER: Final = "default-scheduler"
_TERMINAL: Final = ("Succeeded", "Failed")
_YIELD_EVERY: Final = 64
_NOTHING: Final[Resources] = {}
REASON_VOLUME_AFFINITY: Final = "node(s) had volume node affinity conflict"
REASON_VOLUME_ZONE: Final = "node(s) had no available volume zone"
ZONE_LABELS: Final = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)

log = structlog.get_logger("localcloud.kube.controllers.scheduler")


def is_ready(node: JsonObject) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


@dataclass(slots=True)
class _Node:
    name: str
    labels: dict[str, str]
    taints: list[JsonObject]
    allocatable: Resources
    unschedulable: bool


@dataclass(frozen=True, slots=True)
class _Term:
    """A required pod (anti-)affinity term, resolved against the pod's namespace.

    It selects pods in `namespaces`, or in any namespace whose labels `namespace_selector`
    matches (an empty selector: every namespace); a nil label selector selects nothing.
    """

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str
    namespace_labels: Callable[[str], Mapping[str, str] | None]

    def selects(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        if self.selector is None or not self.selector.matches(labels):
            return False
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        return self.namespace_selector.is_empty or self.namespace_selector.matches(
            self.namespace_labels(namespace)
        )


@dataclass(slots=True)
class _Spread:
    """One DoNotSchedule constraint of a class of pods, with the pass's counts per domain."""

    topology_key: str
    max_skew: int
    min_domains: int
    selector: LabelSelector
    namespace: str
    self_match: bool
    eligible: set[str]
    counts: dict[str, int]

    def min_count(self) -> int:
        if len(self.counts) < self.min_domains or not self.counts:
            return 0
        return min(self.counts.values())


@dataclass(slots=True)
class _PassCache:
    """What one scheduling pass learns and keeps up to date as it binds."""

    failed: dict[str, str] = field(default_factory=dict)
    term_domains: dict[tuple[str, str], tuple[_Term, set[str]]] = field(default_factory=dict)
    spreads: dict[str, list[_Spread]] = field(default_factory=dict)
    existing_anti: list[tuple[_Term, str]] | None = None
    forbidden: dict[str, set[tuple[str, str]]] = field(default_factory=dict)


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
        self._nodes: dict[str, _Node] = {}
        self._soft_tainted: set[str] = set()
        self._node_names: list[str] = []
        self._used: dict[str, Resources] = {}
        self._accounted: dict[ObjectKey, tuple[str, Resources]] = {}
        self._bound: dict[ObjectKey, tuple[str, JsonObject]] = {}
        self._anti_affinity_pods: set[ObjectKey] = set()
        self._active: dict[ObjectKey, None] = {}
        self._unschedulable: set[ObjectKey] = set()
        self._static: dict[str, list[str]] = {}
        self._pass = _PassCache()
        self._retry_at: float | None = None
        self._wake = asyncio.Event()
        self._start_index = 0
        self.pods = Informer(store, "pods", self._on_pod)
        self.nodes = Informer(store, "nodes", self._on_node)
        self.claims = Informer(store, "persistentvolumeclaims", self._on_volume)
        self.volumes = Informer(store, "persistentvolumes", self._on_volume)

    # ------------------------------------------------------------------ index upkeep

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        name = node["metadata"]["name"]
        self._soft_tainted.discard(name)
        if kind == DELETED:
            self._nodes.pop(name, None)
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
            entry = _Node(
                name=name,
                labels=dict(node["metadata"].get("labels") or {}),
                taints=taints,
                allocatable=allocatable,
                unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            )
            old = self._nodes.get(name)
            self._nodes[name] = entry
            if old == entry:
                return  # a heartbeat: nothing the scheduler looks at changed
        self._node_names = sorted(self._nodes)
        self._static.clear()
        self._pass = _PassCache()
        self._request_retry()

    def _on_volume(self, kind: str, obj: JsonObject, previous: JsonObject | None) -> None:
        self._pass = _PassCache()
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
        self._bound[key] = (node_name, pod)
        if _anti_affinity_terms(pod):
            self._anti_affinity_pods.add(key)
        if current is not None and current[0] == node_name:
            return False
        if current is not None:
            self._unaccount(key)
            self._bound[key] = (node_name, pod)
        try:
            requests = pod_requests(pod)
        except QuantityError:
            requests = {"pods": 1}
        used = self._used.setdefault(node_name, {})
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + amount
        self._accounted[key] = (node_name, requests)
        if not own:
            self._pass = _PassCache()
        return True

    def _unaccount(self, key: ObjectKey) -> bool:
        self._bound.pop(key, None)
        self._anti_affinity_pods.discard(key)
        current = self._accounted.pop(key, None)
        if current is None:
            return False
        node_name, requests = current
        used = self._used.get(node_name, {})
        for name, amount in requests.items():
            used[name] = used.get(name, 0) - amount
        self._pass = _PassCache()
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
        self._after_bind(bound, node_name)
        log.debug("pod_scheduled", pod=f"{key[0]}/{key[1]}", node=node_name)
        if self.events:
            await self._event(
                bound,
                "Normal",
                "Scheduled",
                f"Successfully assigned {key[0]}/{key[1]} to {node_name}",
            )

    # ------------------------------------------------------------------ placement

    def _place(self, pod: JsonObject, requests: Resources) -> tuple[str | None, str]:
        class_key = _class_key(pod, requests)
        failed = self._pass.failed.get(class_key)
        if failed is not None:
            return None, failed
        problem = self._claims_problem(pod)
        if problem is not None:
            return None, unschedulable_message(len(self._node_names), {}, problem)
        candidates = self._static_candidates(class_key, pod)
        pod_rules = self._needs_pod_rules(pod)
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
        nodes, used_by_node = self._nodes, self._used
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
            if pod_rules and self._pod_rule_reason(pod, class_key, node) is not None:
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
        self._pass.failed[class_key] = message
        return None, message

    def _static_candidates(self, class_key: str, pod: JsonObject) -> list[str]:
        cached = self._static.get(class_key)
        if cached is None:
            cached = [
                name
                for name in self._node_names
                if self._static_reason(pod, self._nodes[name]) is None
            ]
            self._static[class_key] = cached
        return cached

    @staticmethod
    def _static_reason(pod: JsonObject, node: _Node) -> str | None:
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
        pod_rules = self._needs_pod_rules(pod)
        for name in self._node_names:
            node = self._nodes[name]
            reasons: list[str] = []
            static = self._static_reason(pod, node)
            if static is not None:
                reasons = [static]
            else:
                reasons = insufficient_resources(
                    requests, node.allocatable, self._used.get(name, {})
                )
                if not reasons and pod_rules:
                    rule = self._pod_rule_reason(pod, class_key, node)
                    reasons = [rule] if rule else []
            for reason in reasons:
                histogram[reason] = histogram.get(reason, 0) + 1
        return unschedulable_message(len(self._node_names), histogram)

    # ------------------------------------------------------------------ pod rules

    def _needs_pod_rules(self, pod: JsonObject) -> bool:
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        return bool(
            self._anti_affinity_pods
            or _claim_names(pod)
            or _required_terms(affinity.get("podAffinity"))
            or _required_terms(affinity.get("podAntiAffinity"))
            or _hard_spread_constraints(pod)
        )

    def _pod_rule_reason(self, pod: JsonObject, class_key: str, node: _Node) -> str | None:
        reason = self._volume_reason(pod, node)
        if reason is not None:
            return reason
        reason = self._spread_reason(pod, class_key, node)
        if reason is not None:
            return reason
        return self._inter_pod_reason(pod, node)

    def _claims_problem(self, pod: JsonObject) -> str | None:
        """What keeps the pod off every node because of its claims (VolumeBinding PreFilter)."""
        namespace = pod["metadata"]["namespace"]
        for claim_name in _claim_names(pod):
            claim = self.claims.cache.get((namespace, claim_name))
            if claim is None:
                return f'persistentvolumeclaim "{claim_name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim_name}" is being deleted'
        return None

    def _volume_reason(self, pod: JsonObject, node: _Node) -> str | None:
        """VolumeBinding/VolumeZone: a bound claim's volume must be reachable from the node.

        An unbound claim is taken as WaitForFirstConsumer (EKS's default gp2/gp3 classes), so
        it does not constrain the node; nothing provisions a volume for it here.
        """
        namespace = pod["metadata"]["namespace"]
        for claim_name in _claim_names(pod):
            claim = self.claims.cache.get((namespace, claim_name))
            volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
            volume = self.volumes.cache.get(("", str(volume_name))) if volume_name else None
            if volume is None:
                continue
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            terms = required.get("nodeSelectorTerms") or []
            if terms and not any(
                node_selector_term_matches(term, node.labels, node.name) for term in terms
            ):
                return REASON_VOLUME_AFFINITY
            volume_labels = volume["metadata"].get("labels") or {}
            for key in ZONE_LABELS:
                zones = volume_labels.get(key)
                if zones is not None and node.labels.get(key) not in zones.split("__"):
                    return REASON_VOLUME_ZONE
        return None

    def _spread_reason(self, pod: JsonObject, class_key: str, node: _Node) -> str | None:
        constraints = _hard_spread_constraints(pod)
        if not constraints:
            return None
        spreads = self._pass.spreads.get(class_key)
        if spreads is None:
            spreads = self._pass.spreads[class_key] = [self._spread(pod, c) for c in constraints]
        for spread in spreads:
            value = node.labels.get(spread.topology_key)
            if value is None:
                return REASON_SPREAD_MISSING_LABEL
            skew = spread.counts.get(value, 0) + int(spread.self_match) - spread.min_count()
            if skew > spread.max_skew:
                return REASON_SPREAD
        return None

    def _spread(self, pod: JsonObject, constraint: JsonObject) -> _Spread:
        topology_key = str(constraint.get("topologyKey", ""))
        namespace = pod["metadata"]["namespace"]
        selector = label_selector_from_object(constraint.get("labelSelector") or {})
        honour_affinity = constraint.get("nodeAffinityPolicy", "Honor") == "Honor"
        honour_taints = constraint.get("nodeTaintsPolicy", "Ignore") == "Honor"
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        eligible: set[str] = set()
        counts: dict[str, int] = {}
        for name, node in self._nodes.items():
            value = node.labels.get(topology_key)
            if value is None:
                continue
            if honour_affinity and not matches_node_selection(pod, node.labels, name):
                continue
            if honour_taints and first_untolerated_taint(node.taints, tolerations) is not None:
                continue
            eligible.add(name)
            counts.setdefault(value, 0)
        for node_name, other in self._bound.values():
            if node_name not in eligible or other["metadata"].get("deletionTimestamp"):
                continue
            if other["metadata"].get("namespace") != namespace:
                continue
            if selector.matches(other["metadata"].get("labels")):
                value = self._nodes[node_name].labels[topology_key]
                counts[value] = counts.get(value, 0) + 1
        return _Spread(
            topology_key=topology_key,
            max_skew=int(constraint.get("maxSkew", 1)),
            min_domains=int(constraint.get("minDomains") or 1),
            selector=selector,
            namespace=namespace,
            self_match=selector.matches(pod["metadata"].get("labels")),
            eligible=eligible,
            counts=counts,
        )

    def _inter_pod_reason(self, pod: JsonObject, node: _Node) -> str | None:
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        for raw in _required_terms(affinity.get("podAffinity")):
            term = self._resolve_term(raw, namespace)
            domains = self._term_domains(raw, term, namespace)
            value = node.labels.get(term.topology_key)
            if value is None:
                return REASON_POD_AFFINITY
            if value in domains:
                continue
            # the first pod of a group that selects itself may go anywhere
            if not domains and term.selects(namespace, labels) and not self._any_match(term):
                continue
            return REASON_POD_AFFINITY
        for raw in _required_terms(affinity.get("podAntiAffinity")):
            term = self._resolve_term(raw, namespace)
            domain = node.labels.get(term.topology_key)
            if domain is not None and domain in self._term_domains(raw, term, namespace):
                return REASON_POD_ANTI_AFFINITY
        if self._anti_affinity_pods:
            forbidden = self._forbidden_domains(namespace, labels)
            for topology_key, forbidden_value in forbidden:
                if node.labels.get(topology_key) == forbidden_value:
                    return REASON_EXISTING_ANTI_AFFINITY
        return None

    def _any_match(self, term: _Term) -> bool:
        return any(
            term.selects(p["metadata"].get("namespace", ""), p["metadata"].get("labels"))
            for _, p in self._bound.values()
        )

    def _resolve_term(self, raw: JsonObject, namespace: str) -> _Term:
        selector_object = raw.get("labelSelector")
        selector = None if selector_object is None else label_selector_from_object(selector_object)
        namespaces = frozenset(str(n) for n in raw.get("namespaces") or [])
        namespace_selector_object = raw.get("namespaceSelector")
        namespace_selector = (
            None
            if namespace_selector_object is None
            else label_selector_from_object(namespace_selector_object)
        )
        if not namespaces and namespace_selector is None:
            namespaces = frozenset({namespace})
        return _Term(
            selector,
            namespaces,
            namespace_selector,
            str(raw.get("topologyKey", "")),
            self._namespace_labels,
        )

    def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        found = self.store.get_nowait(self._rt["namespaces"], namespace)
        return None if found is None else found["metadata"].get("labels")

    def _term_domains(self, raw: JsonObject, term: _Term, namespace: str) -> set[str]:
        """Topology values (of term.topology_key) of the nodes running pods the term selects."""
        key = (json.dumps(raw, sort_keys=True), namespace)
        cached = self._pass.term_domains.get(key)
        if cached is None:
            domains: set[str] = set()
            for node_name, other in self._bound.values():
                meta = other["metadata"]
                if term.selects(meta.get("namespace", ""), meta.get("labels")):
                    node = self._nodes.get(node_name)
                    if node is not None and term.topology_key in node.labels:
                        domains.add(node.labels[term.topology_key])
            cached = self._pass.term_domains[key] = (term, domains)
        return cached[1]

    def _forbidden_domains(self, namespace: str, labels: Mapping[str, str]) -> set[tuple[str, str]]:
        """(topology key, value) pairs where a running pod's anti-affinity rejects this pod."""
        cache_key = json.dumps([namespace, labels], sort_keys=True)
        forbidden = self._pass.forbidden.get(cache_key)
        if forbidden is not None:
            return forbidden
        if self._pass.existing_anti is None:
            existing: list[tuple[_Term, str]] = []
            for key in self._anti_affinity_pods:
                node_name, other = self._bound[key]
                node = self._nodes.get(node_name)
                if node is None:
                    continue
                other_ns = other["metadata"].get("namespace", "")
                for raw in _anti_affinity_terms(other):
                    term = self._resolve_term(raw, other_ns)
                    if term.topology_key in node.labels:
                        existing.append((term, node.labels[term.topology_key]))
            self._pass.existing_anti = existing
        forbidden = {
            (term.topology_key, value)
            for term, value in self._pass.existing_anti
            if term.selects(namespace, labels)
        }
        self._pass.forbidden[cache_key] = forbidden
        return forbidden

    def _after_bind(self, pod: JsonObject, node_name: str) -> None:
        """Keep the pass's caches true after binding `pod` rather than recomputing them: a bind
        only takes room, so failures stay failures, and counts and domains grow by one pod."""
        node = self._nodes.get(node_name)
        if node is None:
            self._pass = _PassCache()
            return
        meta = pod["metadata"]
        namespace, labels = meta.get("namespace", ""), meta.get("labels")
        for spreads in self._pass.spreads.values():
            for spread in spreads:
                if (
                    node_name in spread.eligible
                    and namespace == spread.namespace
                    and spread.selector.matches(labels)
                ):
                    value = node.labels[spread.topology_key]
                    spread.counts[value] = spread.counts.get(value, 0) + 1
        for term, domains in self._pass.term_domains.values():
            if term.topology_key in node.labels and term.selects(namespace, labels):
                domains.add(node.labels[term.topology_key])
        terms = _anti_affinity_terms(pod)
        if terms and self._pass.existing_anti is not None:
            for raw in terms:
                term = self._resolve_term(raw, namespace)
                if term.topology_key in node.labels:
                    self._pass.existing_anti.append((term, node.labels[term.topology_key]))
            self._pass.forbidden.clear()

    # ------------------------------------------------------------------ writes

    async def _mark_unschedulable(self, key: ObjectKey, pod: JsonObject, message: str) -> None:
        self._unschedulable.add(key)
        status = pod.get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        current = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if (
            current is not None
            and current.get("status") == "False"
            and current.get("reason") == "Unschedulable"
            and current.get("message") == message
        ):
            return
        now = format_timestamp(self.clock())
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": (
                current.get("lastTransitionTime", now)
                if current is not None and current.get("status") == "False"
                else now
            ),
            "reason": "Unschedulable",
            "message": message,
        }
        new = copy_json(pod)
        new["status"] = {**new.get("status", {}), "conditions": [*conditions, condition]}
        try:
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_status_update_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
            return
        log.debug("pod_unschedulable", pod=f"{key[0]}/{key[1]}", message=message)
        if self.events:
            await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: JsonObject, kind: str, reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = format_timestamp(self.clock())
        event = {
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "kind": "Pod",
                "apiVersion": "v1",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": DEFAULT_SCHEDULER},
            "reportingComponent": DEFAULT_SCHEDULER,
            "reportingInstance": DEFAULT_SCHEDULER,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.store.create(self._rt["events"], event, meta["namespace"])
        except ApiError as error:
            log.info("event_create_failed", pod=meta["name"], error=str(error))


# ---------------------------------------------------------------------------- pod spec views


def _preferred_terms(pod: JsonObject) -> list[tuple[int, JsonObject]]:
    """(weight, nodeSelectorTerm) of preferredDuringSchedulingIgnoredDuringExecution."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return [
        (int(p.get("weight", 0)), p.get("preference") or {})
        for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ]


def _preference_score(
    preferences: list[tuple[int, JsonObject]], tolerations: list[JsonObject], node: _Node
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


def _claim_names(pod: JsonObject) -> list[str]:
    return [
        str(volume["persistentVolumeClaim"].get("claimName", ""))
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if isinstance(volume.get("persistentVolumeClaim"), dict)
    ]


def _required_terms(affinity: JsonObject | None) -> list[JsonObject]:
    return list((affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _anti_affinity_terms(pod: JsonObject) -> list[JsonObject]:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return _required_terms(affinity.get("podAntiAffinity"))


def _hard_spread_constraints(pod: JsonObject) -> list[JsonObject]:
    return [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]


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
            _claim_names(pod),
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
