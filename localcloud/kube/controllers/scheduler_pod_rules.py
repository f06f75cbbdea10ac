"""The default scheduler's filters that look at other pods and volumes (pod_rules of
scheduler.py): VolumeBinding/VolumeZone, PodTopologySpread (DoNotSchedule) and InterPodAffinity
(required affinity and anti-affinity, both ways), with the per-pass caches that keep them cheap
across thousands of pods and true as the pass binds pods.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from localcloud.kube.controllers.informer import Informer, ObjectKey
from localcloud.kube.controllers.pod_fit import (
    REASON_EXISTING_ANTI_AFFINITY,
    REASON_POD_AFFINITY,
    REASON_POD_ANTI_AFFINITY,
    REASON_SPREAD,
    REASON_SPREAD_MISSING_LABEL,
    Resources,
    first_untolerated_taint,
    matches_node_selection,
    node_selector_term_matches,
)
from localcloud.kube.selectors import LabelSelector, label_selector_from_object

JsonObject = dict[str, Any]
REASON_VOLUME_AFFINITY: Final = "node(s) had volume node affinity conflict"
REASON_VOLUME_ZONE: Final = "node(s) had no available volume zone"
ZONE_LABELS: Final = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


@dataclass(slots=True)
class IndexedNode:
    """What the scheduler keeps of a node."""

    name: str
    labels: dict[str, str]
    taints: list[JsonObject]
    allocatable: Resources
    unschedulable: bool


@dataclass(frozen=True, slots=True)
class Term:
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
class Spread:
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
class PassCache:
    """What one scheduling pass learns and keeps up to date as it binds."""

    failed: dict[str, str] = field(default_factory=dict)
    term_domains: dict[tuple[str, str], tuple[Term, set[str]]] = field(default_factory=dict)
    spreads: dict[str, list[Spread]] = field(default_factory=dict)
    existing_anti: list[tuple[Term, str]] | None = None
    forbidden: dict[str, set[tuple[str, str]]] = field(default_factory=dict)


@dataclass(slots=True)
class ClusterIndex:
    """The scheduler's view of the cluster, shared with its pod rules: nodes by name, bound
    pods (node, pod) by key, the bound pods with required anti-affinity, and the current
    pass's caches (replaced, not cleared, when a change invalidates them)."""

    nodes: dict[str, IndexedNode] = field(default_factory=dict)
    bound: dict[ObjectKey, tuple[str, JsonObject]] = field(default_factory=dict)
    anti_affinity_pods: set[ObjectKey] = field(default_factory=set)
    pass_cache: PassCache = field(default_factory=PassCache)


class PodRules:
    """The filters that depend on other pods and on volumes, against `index`."""

    def __init__(
        self,
        index: ClusterIndex,
        claims: Informer,
        volumes: Informer,
        namespace_labels: Callable[[str], Mapping[str, str] | None],
    ) -> None:
        self.index = index
        self._claims = claims
        self._volumes = volumes
        self._namespace_labels = namespace_labels

    def needed(self, pod: JsonObject) -> bool:
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        return bool(
            self.index.anti_affinity_pods
            or claim_names(pod)
            or required_terms(affinity.get("podAffinity"))
            or required_terms(affinity.get("podAntiAffinity"))
            or hard_spread_constraints(pod)
        )

    def reason(self, pod: JsonObject, class_key: str, node: IndexedNode) -> str | None:
        reason = self._volume_reason(pod, node)
        if reason is not None:
            return reason
        reason = self._spread_reason(pod, class_key, node)
        if reason is not None:
            return reason
        return self._inter_pod_reason(pod, node)

    def claims_problem(self, pod: JsonObject) -> str | None:
        """What keeps the pod off every node because of its claims (VolumeBinding PreFilter)."""
        namespace = pod["metadata"]["namespace"]
        for claim_name in claim_names(pod):
            claim = self._claims.cache.get((namespace, claim_name))
            if claim is None:
                return f'persistentvolumeclaim "{claim_name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim_name}" is being deleted'
        return None

    def _volume_reason(self, pod: JsonObject, node: IndexedNode) -> str | None:
        """VolumeBinding/VolumeZone: a bound claim's volume must be reachable from the node.

        An unbound claim is taken as WaitForFirstConsumer (EKS's default gp2/gp3 classes), so
        it does not constrain the node; nothing provisions a volume for it here.
        """
        namespace = pod["metadata"]["namespace"]
        for claim_name in claim_names(pod):
            claim = self._claims.cache.get((namespace, claim_name))
            volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
            volume = self._volumes.cache.get(("", str(volume_name))) if volume_name else None
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

    def _spread_reason(self, pod: JsonObject, class_key: str, node: IndexedNode) -> str | None:
        constraints = hard_spread_constraints(pod)
        if not constraints:
            return None
        cached = self.index.pass_cache.spreads
        spreads = cached.get(class_key)
        if spreads is None:
            spreads = cached[class_key] = [self._spread(pod, c) for c in constraints]
        for spread in spreads:
            value = node.labels.get(spread.topology_key)
            if value is None:
                return REASON_SPREAD_MISSING_LABEL
            skew = spread.counts.get(value, 0) + int(spread.self_match) - spread.min_count()
            if skew > spread.max_skew:
                return REASON_SPREAD
        return None

    def _spread(self, pod: JsonObject, constraint: JsonObject) -> Spread:
        topology_key = str(constraint.get("topologyKey", ""))
        namespace = pod["metadata"]["namespace"]
        selector = label_selector_from_object(constraint.get("labelSelector") or {})
        honour_affinity = constraint.get("nodeAffinityPolicy", "Honor") == "Honor"
        honour_taints = constraint.get("nodeTaintsPolicy", "Ignore") == "Honor"
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        eligible: set[str] = set()
        counts: dict[str, int] = {}
        for name, node in self.index.nodes.items():
            value = node.labels.get(topology_key)
            if value is None:
                continue
            if honour_affinity and not matches_node_selection(pod, node.labels, name):
                continue
            if honour_taints and first_untolerated_taint(node.taints, tolerations) is not None:
                continue
            eligible.add(name)
            counts.setdefault(value, 0)
        for node_name, other in self.index.bound.values():
            if node_name not in eligible or other["metadata"].get("deletionTimestamp"):
                continue
            if other["metadata"].get("namespace") != namespace:
                continue
            if selector.matches(other["metadata"].get("labels")):
                value = self.index.nodes[node_name].labels[topology_key]
                counts[value] = counts.get(value, 0) + 1
        return Spread(
            topology_key=topology_key,
            max_skew=int(constraint.get("maxSkew", 1)),
            min_domains=int(constraint.get("minDomains") or 1),
            selector=selector,
            namespace=namespace,
            self_match=selector.matches(pod["metadata"].get("labels")),
            eligible=eligible,
            counts=counts,
        )

    def _inter_pod_reason(self, pod: JsonObject, node: IndexedNode) -> str | None:
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        for raw in required_terms(affinity.get("podAffinity")):
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
        for raw in required_terms(affinity.get("podAntiAffinity")):
            term = self._resolve_term(raw, namespace)
            domain = node.labels.get(term.topology_key)
            if domain is not None and domain in self._term_domains(raw, term, namespace):
                return REASON_POD_ANTI_AFFINITY
        if self.index.anti_affinity_pods:
            forbidden = self._forbidden_domains(namespace, labels)
            for topology_key, forbidden_value in forbidden:
                if node.labels.get(topology_key) == forbidden_value:
                    return REASON_EXISTING_ANTI_AFFINITY
        return None

    def _any_match(self, term: Term) -> bool:
        return any(
            term.selects(p["metadata"].get("namespace", ""), p["metadata"].get("labels"))
            for _, p in self.index.bound.values()
        )

    def _resolve_term(self, raw: JsonObject, namespace: str) -> Term:
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
        return Term(
            selector,
            namespaces,
            namespace_selector,
            str(raw.get("topologyKey", "")),
            self._namespace_labels,
        )

    def _term_domains(self, raw: JsonObject, term: Term, namespace: str) -> set[str]:
        """Topology values (of term.topology_key) of the nodes running pods the term selects."""
        key = (json.dumps(raw, sort_keys=True), namespace)
        cached = self.index.pass_cache.term_domains.get(key)
        if cached is None:
            domains: set[str] = set()
            for node_name, other in self.index.bound.values():
                meta = other["metadata"]
                if term.selects(meta.get("namespace", ""), meta.get("labels")):
                    node = self.index.nodes.get(node_name)
                    if node is not None and term.topology_key in node.labels:
                        domains.add(node.labels[term.topology_key])
            cached = self.index.pass_cache.term_domains[key] = (term, domains)
        return cached[1]

    def _forbidden_domains(self, namespace: str, labels: Mapping[str, str]) -> set[tuple[str, str]]:
        """(topology key, value) pairs where a running pod's anti-affinity rejects this pod."""
        cache_key = json.dumps([namespace, labels], sort_keys=True)
        forbidden = self.index.pass_cache.forbidden.get(cache_key)
        if forbidden is not None:
            return forbidden
        if self.index.pass_cache.existing_anti is None:
            existing: list[tuple[Term, str]] = []
            for key in self.index.anti_affinity_pods:
                node_name, other = self.index.bound[key]
                node = self.index.nodes.get(node_name)
                if node is None:
                    continue
                other_ns = other["metadata"].get("namespace", "")
                for raw in anti_affinity_terms(other):
                    term = self._resolve_term(raw, other_ns)
                    if term.topology_key in node.labels:
                        existing.append((term, node.labels[term.topology_key]))
            self.index.pass_cache.existing_anti = existing
        forbidden = {
            (term.topology_key, value)
            for term, value in self.index.pass_cache.existing_anti
            if term.selects(namespace, labels)
        }
        self.index.pass_cache.forbidden[cache_key] = forbidden
        return forbidden

    def after_bind(self, pod: JsonObject, node_name: str) -> None:
        """Keep the pass's caches true after binding `pod` rather than recomputing them: a bind
        only takes room, so failures stay failures, and counts and domains grow by one pod."""
        node = self.index.nodes.get(node_name)
        if node is None:
            self.index.pass_cache = PassCache()
            return
        meta = pod["metadata"]
        namespace, labels = meta.get("namespace", ""), meta.get("labels")
        for spreads in self.index.pass_cache.spreads.values():
            for spread in spreads:
                if (
                    node_name in spread.eligible
                    and namespace == spread.namespace
                    and spread.selector.matches(labels)
                ):
                    value = node.labels[spread.topology_key]
                    spread.counts[value] = spread.counts.get(value, 0) + 1
        for term, domains in self.index.pass_cache.term_domains.values():
            if term.topology_key in node.labels and term.selects(namespace, labels):
                domains.add(node.labels[term.topology_key])
        terms = anti_affinity_terms(pod)
        existing = self.index.pass_cache.existing_anti
        if terms and existing is not None:
            for raw in terms:
                term = self._resolve_term(raw, namespace)
                if term.topology_key in node.labels:
                    existing.append((term, node.labels[term.topology_key]))
            self.index.pass_cache.forbidden.clear()


def claim_names(pod: JsonObject) -> list[str]:
    return [
        str(volume["persistentVolumeClaim"].get("claimName", ""))
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if isinstance(volume.get("persistentVolumeClaim"), dict)
    ]


def required_terms(affinity: JsonObject | None) -> list[JsonObject]:
    return list((affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def anti_affinity_terms(pod: JsonObject) -> list[JsonObject]:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return required_terms(affinity.get("podAntiAffinity"))


def hard_spread_constraints(pod: JsonObject) -> list[JsonObject]:
    return [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]


__all__ = [
    "REASON_VOLUME_AFFINITY",
    "REASON_VOLUME_ZONE",
    "ClusterIndex",
    "IndexedNode",
    "PassCache",
    "PodRules",
    "anti_affinity_terms",
    "claim_names",
]
