"""The solver's input and output: small frozen dataclasses in base units.

Quantities are integers (``cpu_millis``, ``memory_bytes``); labels are plain mappings; every
constraint is already parsed (``scheduler_svc.kube`` or ``daiku plan`` convert at the edge).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType

from scheduler_svc.core.requirements import (
    LABEL_ALIASES,
    LABEL_KARPENTER_NODEPOOL,
    LABEL_NODEPOOL,
    LABEL_ZONE_ID,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.taints import Taint, Toleration

RESOURCE_CPU = "cpu"
RESOURCE_MEMORY = "memory"
RESOURCE_PODS = "pods"
RESOURCE_EPHEMERAL_STORAGE = "ephemeral-storage"


@dataclass(frozen=True)
class Resources:
    """Amounts of resources in integer base units (extended resources by name, sorted)."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0
    ephemeral_storage_bytes: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def from_mapping(amounts: Mapping[str, int]) -> Resources:
        """From Kubernetes resource names (``cpu`` in millis, the others in base units)."""
        base = {RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_PODS, RESOURCE_EPHEMERAL_STORAGE}
        return Resources(
            cpu_millis=amounts.get(RESOURCE_CPU, 0),
            memory_bytes=amounts.get(RESOURCE_MEMORY, 0),
            pods=amounts.get(RESOURCE_PODS, 0),
            ephemeral_storage_bytes=amounts.get(RESOURCE_EPHEMERAL_STORAGE, 0),
            extended=tuple(sorted((k, v) for k, v in amounts.items() if k not in base and v)),
        )

    def as_mapping(self) -> dict[str, int]:
        """Kubernetes resource names to amounts (zeros left out)."""
        out = {
            RESOURCE_CPU: self.cpu_millis,
            RESOURCE_MEMORY: self.memory_bytes,
            RESOURCE_PODS: self.pods,
            RESOURCE_EPHEMERAL_STORAGE: self.ephemeral_storage_bytes,
            **dict(self.extended),
        }
        return {k: v for k, v in out.items() if v}

    def __add__(self, other: Resources) -> Resources:
        a, b = self.as_mapping(), other.as_mapping()
        return Resources.from_mapping({k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()})

    def max_with(self, other: Resources) -> Resources:
        """The larger amount of each resource."""
        a, b = self.as_mapping(), other.as_mapping()
        return Resources.from_mapping(
            {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()}
        )


_NONE = Resources()


def _normalized(requirements: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    """Requirements with deprecated label aliases renamed to the current labels."""
    if all(r.key not in LABEL_ALIASES for r in requirements):
        return requirements
    return tuple(replace(r, key=LABEL_ALIASES.get(r.key, r.key)) for r in requirements)


def _normalized_selector(
    selector: Mapping[str, str],
) -> tuple[dict[str, str], tuple[Requirement, ...]]:
    """A node selector with aliases renamed, and the aliased entries that disagree with the
    value already selected under the current name (as ``In`` requirements)."""
    current = {k: v for k, v in selector.items() if k not in LABEL_ALIASES}
    clashing: list[Requirement] = []
    for key, value in selector.items():
        target = LABEL_ALIASES.get(key)
        if target is None:
            continue
        if current.setdefault(target, value) != value:
            clashing.append(Requirement(target, Operator.IN, (value,)))
    return current, tuple(clashing)


@dataclass(frozen=True)
class InitContainer:
    """An init container's requests; ``is_sidecar`` for restartPolicy Always (KEP-753)."""

    requests: Resources
    is_sidecar: bool = False


@dataclass(frozen=True)
class LabelSelector:
    """A label selector as requirements (matchLabels become ``In [value]``)."""

    requirements: Requirements = field(default_factory=Requirements)

    @staticmethod
    def of(
        match_labels: Mapping[str, str] | None = None,
        match_expressions: Iterable[Requirement] = (),
    ) -> LabelSelector:
        """From a Kubernetes selector's matchLabels and matchExpressions."""
        labels = Requirements.from_labels(match_labels or {})
        return LabelSelector(labels.intersect(Requirements.of(match_expressions)))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with ``labels`` is selected."""
        return self.requirements.matches(labels)


class WhenUnsatisfiable(StrEnum):
    """A topology spread constraint's hardness."""

    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


@dataclass(frozen=True)
class TopologySpreadConstraint:
    """A pod's topology spread constraint (policies as in Kubernetes 1.27+)."""

    topology_key: str
    max_skew: int = 1
    when_unsatisfiable: WhenUnsatisfiable = WhenUnsatisfiable.DO_NOT_SCHEDULE
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy_honor: bool = True
    node_taints_policy_honor: bool = False
    match_label_keys: tuple[str, ...] = ()


#: The label every namespace carries with its own name (Kubernetes sets it since 1.22).
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"


_NO_NAMESPACES: Mapping[str, Mapping[str, str]] = MappingProxyType({})


def namespace_labels(known: Mapping[str, Mapping[str, str]], namespace: str) -> Mapping[str, str]:
    """The labels of ``namespace``: its Namespace object's (``known``, by name) with
    ``kubernetes.io/metadata.name``, which the API server sets on every namespace; a namespace
    not in ``known`` is taken to carry that label only."""
    labels = known.get(namespace)
    if labels is None:
        return {LABEL_NAMESPACE_NAME: namespace}
    return {**labels, LABEL_NAMESPACE_NAME: namespace}


@dataclass(frozen=True)
class NamespaceScope:
    """The namespaces whose pods a term counts: ``names``, plus every namespace ``selector``
    selects by its labels (an empty selector selects all)."""

    names: frozenset[str]
    selector: LabelSelector | None = None

    def includes(
        self, namespace: str, known: Mapping[str, Mapping[str, str]] = _NO_NAMESPACES
    ) -> bool:
        """Whether pods in ``namespace`` count; ``known`` holds the cluster's namespace labels
        by name (see ``namespace_labels``)."""
        if namespace in self.names:
            return True
        return self.selector is not None and self.selector.matches(
            namespace_labels(known, namespace)
        )


@dataclass(frozen=True)
class PodAffinityTerm:
    """Pods selected by ``label_selector`` within one ``topology_key`` domain, in
    ``namespaces`` and the namespaces ``namespace_selector`` selects (both unset: the pod's
    own; ``namespace_selector`` empty: every namespace)."""

    topology_key: str
    label_selector: LabelSelector = field(default_factory=LabelSelector)
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None

    def scope(self, own_namespace: str) -> NamespaceScope:
        """The namespaces this term counts pods in, for a pod in ``own_namespace``."""
        if not self.namespaces and self.namespace_selector is None:
            return NamespaceScope(frozenset({own_namespace}))
        return NamespaceScope(frozenset(self.namespaces), self.namespace_selector)


@dataclass(frozen=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True)
class PreferredNodeAffinityTerm:
    """A preferred node affinity term."""

    weight: int
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True)
class HostPort:
    """A host port a container binds (0.0.0.0 conflicts with every address)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"  # noqa: S104 - the Kubernetes default meaning "every address"

    def describe(self) -> str:
        """``8080/TCP`` (``10.0.0.1:8080/UDP`` with a host IP)."""
        address = "" if self.host_ip == "0.0.0.0" else f"{self.host_ip}:"  # noqa: S104
        return f"{address}{self.port}/{self.protocol}"

    def conflicts(self, other: HostPort) -> bool:
        """Whether two pods binding these cannot share a node."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wildcard = "0.0.0.0"  # noqa: S104
        return self.host_ip in (wildcard, other.host_ip) or other.host_ip == wildcard


def _names_zone_id(pod: Pod) -> bool:
    """Whether the pod's selectors, node affinity or topology terms name the zone id (plain
    loops: this runs once per pod converted)."""
    return (
        LABEL_ZONE_ID in pod.node_selector
        or _node_affinity_names_zone_id(pod)
        or _topology_names_zone_id(pod)
    )


def _node_affinity_names_zone_id(pod: Pod) -> bool:
    for term in pod.required_node_affinity:
        for requirement in term:
            if requirement.key == LABEL_ZONE_ID:
                return True
    for preferred in pod.preferred_node_affinity:
        for requirement in preferred.requirements:
            if requirement.key == LABEL_ZONE_ID:
                return True
    return False


def _topology_names_zone_id(pod: Pod) -> bool:
    for spread in pod.topology_spread:
        if spread.topology_key == LABEL_ZONE_ID:
            return True
    for affinity in (pod.pod_affinity, pod.pod_anti_affinity):
        for affinity_term in affinity:
            if affinity_term.topology_key == LABEL_ZONE_ID:
                return True
    for weighted_terms in (pod.preferred_pod_affinity, pod.preferred_pod_anti_affinity):
        for weighted in weighted_terms:
            if weighted.term.topology_key == LABEL_ZONE_ID:
                return True
    return False


@dataclass(frozen=True)
class Pod:
    """A pod as the solver sees it. ``containers`` and ``init_containers`` carry requests;
    ``volume_zones`` lists the zones its volumes allow (empty: no volume constraint)."""

    name: str
    namespace: str = "default"
    labels: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[Resources, ...] = ()
    init_containers: tuple[InitContainer, ...] = ()
    overhead: Resources = field(default_factory=Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: tuple[tuple[Requirement, ...], ...] = ()
    preferred_node_affinity: tuple[PreferredNodeAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volume_zones: tuple[str, ...] = ()
    # Whether a selector, affinity or spread names topology.k8s.aws/zone-id (set at
    # construction, once per pod, so each solve's check of every pod costs a lookup).
    names_zone_id: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Deprecated node-label aliases in the node selector and node affinity become the
        current labels, as Karpenter normalises them (``beta.kubernetes.io/arch`` selects what
        ``kubernetes.io/arch`` does)."""
        terms = tuple(_normalized(term) for term in self.required_node_affinity)
        if self.node_selector and not LABEL_ALIASES.keys().isdisjoint(self.node_selector):
            selector, clashing = _normalized_selector(self.node_selector)
            object.__setattr__(self, "node_selector", selector)
            if clashing:
                # Both spellings with different values: no node has both, so the pod keeps
                # both as requirements (unsatisfiable) rather than one silently winning.
                terms = tuple((*t, *clashing) for t in terms) if terms else (clashing,)
        object.__setattr__(self, "required_node_affinity", terms)
        if any(
            r.key in LABEL_ALIASES for p in self.preferred_node_affinity for r in p.requirements
        ):
            object.__setattr__(
                self,
                "preferred_node_affinity",
                tuple(
                    replace(p, requirements=_normalized(p.requirements))
                    for p in self.preferred_node_affinity
                ),
            )
        object.__setattr__(self, "names_zone_id", _names_zone_id(self))

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def requests(self) -> Resources:
        """Effective requests: max(sum of containers + sidecars, each init container with the
        sidecars started before it), plus overhead and one pod (kube-scheduler's rule)."""
        if not self.init_containers and len(self.containers) == 1 and self.overhead == _NONE:
            # The common shape, without the general path's mapping arithmetic.
            c = self.containers[0]
            return Resources(
                c.cpu_millis, c.memory_bytes, c.pods + 1, c.ephemeral_storage_bytes, c.extended
            )
        sidecars = Resources()
        init_peak = Resources()
        for init in self.init_containers:
            if init.is_sidecar:
                sidecars = sidecars + init.requests
                init_peak = init_peak.max_with(sidecars)
            else:
                init_peak = init_peak.max_with(init.requests + sidecars)
        running = sidecars
        for container in self.containers:
            running = running + container
        return running.max_with(init_peak) + self.overhead + Resources(pods=1)


@dataclass(frozen=True)
class Node:
    """A node that exists (or an in-flight NodeClaim, ``is_in_flight``), with its bound pods.

    ``taints`` block scheduling; an in-flight claim lists only its NodePool's taints, not its
    startup taints. ``capacity`` counts against NodePool limits (allocatable when unknown).
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=Resources)
    capacity: Resources | None = None
    pods: tuple[Pod, ...] = ()
    is_in_flight: bool = False

    def nodepool(self) -> str | None:
        """The NodePool that launched it (from its labels)."""
        return self.labels.get("daiku.dev/nodepool") or self.labels.get("karpenter.sh/nodepool")


@dataclass(frozen=True)
class NodePoolLimits:
    """Ceilings on the total capacity of a NodePool's nodes (None: no limit)."""

    cpu_millis: int | None = None
    memory_bytes: int | None = None
    nodes: int | None = None

    def is_limited(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.cpu_millis, self.memory_bytes, self.nodes))


@dataclass(frozen=True)
class NodePool:
    """A NodePool (Karpenter v1 fields the solver uses)."""

    name: str
    requirements: tuple[Requirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    weight: int = 0
    limits: NodePoolLimits = field(default_factory=NodePoolLimits)
    # Static NodePool (Karpenter's ``spec.replicas``): exactly this many nodes, whatever the
    # pods; never a target for pending pods' new claims (None: an ordinary, dynamic pool).
    replicas: int | None = None

    @property
    def is_static(self) -> bool:
        """Whether it keeps a fixed node count instead of following pending pods."""
        return self.replicas is not None

    def __post_init__(self) -> None:
        """Deprecated label aliases in the requirements become the current labels (Karpenter
        normalises NodePool requirements as it does a pod's)."""
        object.__setattr__(self, "requirements", _normalized(tuple(self.requirements)))

    def node_labels(self) -> dict[str, str]:
        """The labels every node of this pool carries: its own, plus the pool's name under
        daiku's label and Karpenter's, so workloads written for either select it."""
        return {**self.labels, LABEL_NODEPOOL: self.name, LABEL_KARPENTER_NODEPOOL: self.name}


@dataclass(frozen=True, slots=True)  # ~12,000 per catalog, and a zone-id copy of each
class Offering:
    """Where an instance type can be launched: zone x capacity type, at a price; ``zone_id``
    is the zone's AWS-wide id (``use1-az1``; "" when not known)."""

    zone: str
    capacity_type: str
    price_per_hour: float
    available: bool = True
    zone_id: str = ""
    # A reserved offering's capacity reservation and its type (default | capacity-block).
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""
    # A reserved offering's free instances this round (Karpenter's ReservationCapacity): the
    # solver gives it to at most this many new NodeClaims. None: not counted.
    reservation_capacity: int | None = None


@dataclass(frozen=True)
class InstanceType:
    """An instance type: capacity (what the node reports), allocatable (what pods get),
    labels (``kubernetes.io/arch``, ``karpenter.k8s.aws/instance-*`` …) and offerings."""

    name: str
    capacity: Resources
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    offerings: tuple[Offering, ...] = ()


@dataclass(frozen=True)
class UnavailableOffering:
    """An offering the actuator reported exhausted (insufficient capacity)."""

    instance_type: str
    zone: str
    capacity_type: str


class MinValuesPolicy(StrEnum):
    """What the solver does when a NodePool's minValues cannot be met (Karpenter's global
    ``--min-values-policy``): ``Strict`` leaves the pods pending; ``BestEffort`` opens the
    claim with each minValues lowered to what the types that hold its first pod offer."""

    STRICT = "Strict"
    BEST_EFFORT = "BestEffort"


@dataclass(frozen=True)
class RelaxedMinValues:
    """One NodePool minValues a claim was opened with lowered (``BestEffort``): ``written``
    distinct values of ``key`` asked for, only ``relaxed`` among the types that hold its pods."""

    key: str
    written: int
    relaxed: int

    def describe(self) -> str:
        return f"minValues for {self.key} relaxed from {self.written} to {self.relaxed}"


@dataclass(frozen=True)
class SchedulingInput:
    """One snapshot to solve. ``daemonsets`` are pod templates that will run on every new node
    they tolerate and select. ``namespaces`` are the labels of the cluster's namespaces by name,
    which pod (anti-)affinity's ``namespaceSelector`` selects on (see ``namespace_labels`` for a
    namespace left out)."""

    pods: tuple[Pod, ...]
    nodepools: tuple[NodePool, ...]
    instance_types: tuple[InstanceType, ...]
    nodes: tuple[Node, ...] = ()
    daemonsets: tuple[Pod, ...] = ()
    unavailable_offerings: frozenset[UnavailableOffering] = frozenset()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    min_values_policy: MinValuesPolicy = MinValuesPolicy.STRICT


@dataclass(frozen=True)
class OfferingOption:
    """One launchable choice for a NodeClaim, in the order the actuator should try them."""

    instance_type: str
    zone: str
    capacity_type: str
    price_per_hour: float
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""


@dataclass(frozen=True)
class NodeClaimPlan:
    """A NodeClaim to launch: its pods, requirements, and every compatible offering, cheapest
    first (``offerings[0]`` is the choice; the rest are the fallbacks)."""

    nodepool: str
    requirements: tuple[Requirement, ...]
    pods: tuple[str, ...]
    requests: Resources
    offerings: tuple[OfferingOption, ...]
    # The pool's minValues this claim could not keep (``MinValuesPolicy.BEST_EFFORT`` only).
    min_values_relaxed: tuple[RelaxedMinValues, ...] = ()

    @property
    def instance_type(self) -> str:
        """The chosen (cheapest) instance type."""
        return self.offerings[0].instance_type

    @property
    def price_per_hour(self) -> float:
        """The chosen offering's price."""
        return self.offerings[0].price_per_hour


@dataclass(frozen=True)
class ExistingPlacement:
    """Pods the plan puts on a node that exists (or a claim already in flight)."""

    node: str
    pods: tuple[str, ...]


@dataclass(frozen=True)
class UnschedulablePod:
    """A pod the plan cannot place, with the reason a person can act on."""

    pod: str
    reason: str


@dataclass(frozen=True)
class RelaxedPod:
    """A placed pod whose ``preferences`` the plan dropped (in the order they were dropped,
    Karpenter's relaxation order) because it could not be placed with them."""

    pod: str
    preferences: tuple[str, ...]


@dataclass(frozen=True)
class SchedulingResult:
    """The plan. Every input pod appears exactly once: in a claim, a placement or
    ``unschedulable``. ``relaxed`` lists the placed pods that lost preferences on the way."""

    new_claims: tuple[NodeClaimPlan, ...]
    existing_placements: tuple[ExistingPlacement, ...]
    unschedulable: tuple[UnschedulablePod, ...]
    relaxed: tuple[RelaxedPod, ...] = ()

    @property
    def total_price_per_hour(self) -> float:
        """Sum of the chosen offerings' prices."""
        return sum(claim.price_per_hour for claim in self.new_claims)
