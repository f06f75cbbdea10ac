"""The solver's working state: pod equivalence classes, the bins they fill (existing nodes and new
NodeClaims), NodePools with their running totals, topology groups, and how amounts are shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler_svc.core.model import (
    HostPort,
    NamespaceScope,
    Node,
    NodePool,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import Requirements
from scheduler_svc.core.taints import Taint

INF = 1 << 62
_GIB = 1024**3


def format_amount(dimension: str, amount: int) -> str:
    """A resource amount as a person reads it: ``96 GiB``, ``8 cpu``, ``1 nvidia.com/gpu``."""
    if dimension == "cpu":
        cores = amount / 1000
        return f"{cores:g} cpu"
    if dimension in ("memory", "ephemeral-storage"):
        gib = amount / _GIB
        suffix = "" if dimension == "memory" else " ephemeral-storage"
        return f"{gib:.3g} GiB{suffix}" if gib < 10 else f"{gib:.0f} GiB{suffix}"
    if dimension == "pods":
        return f"{amount} pods"
    return f"{amount} {dimension}"


def format_limit(dimension: str, amount: int) -> str:
    """A limit as written in a NodePool: ``cpu=100``, ``memory=1000Gi``, ``nodes=3``."""
    if dimension == "cpu":
        return f"cpu={amount // 1000}" if amount % 1000 == 0 else f"cpu={amount}m"
    if dimension == "memory":
        for suffix, size in (("Ti", 1024**4), ("Gi", _GIB), ("Mi", 1024**2)):
            if amount % size == 0:
                return f"memory={amount // size}{suffix}"
        return f"memory={amount}"
    return f"{dimension}={amount}"


# ---------------------------------------------------------------------------------------------
# Topology groups: pods matched by (key, selector, namespaces), counted per domain.


@dataclass
class Group:
    key: str
    selector: Requirements
    namespaces: NamespaceScope
    # The cluster's namespace labels by name (SchedulingInput.namespaces).
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    counts: dict[object, int] = field(default_factory=dict)
    # Matching pods in every domain; read for pod affinity (a first pod may open a domain).
    # Groups of anti-affinity owners (Solver.inverse) read only whether a domain's count is 0.
    total: int = 0

    def matches(self, namespace: str, labels: dict[str, str]) -> bool:
        return self.selector.matches(labels) and self.namespaces.includes(
            namespace, self.namespace_labels
        )


@dataclass(frozen=True)
class Spread:
    group: int
    key: str
    max_skew: int
    min_domains: int | None
    self_match: bool
    affinity_honor: bool
    taints_honor: bool
    description: str


@dataclass(frozen=True)
class AffinityRef:
    group: int
    key: str
    self_match: bool
    description: str


@dataclass(frozen=True)
class Soft:
    """A preference the solver treats as required until relaxed (or a required node-affinity
    term with another after it: relaxing it moves the pod's new nodes on to the next term)."""

    weight: int
    kind: str  # required-term | affinity | anti | node | spread | taints
    node_requirements: Requirements | None = None
    term: PodAffinityTerm | None = None
    spread: TopologySpreadConstraint | None = None
    required_term: Requirements | None = None

    def describe(self) -> str:
        """The preference as the pod spells it, for ``daiku plan --explain``."""
        if self.term is not None:
            what = "pod affinity" if self.kind == "affinity" else "pod anti-affinity"
            return f"preferred {what} (weight {self.weight}) on {self.term.topology_key}"
        if self.node_requirements is not None:
            terms = ", ".join(v.describe(k) for k, v in self.node_requirements.items)
            return f"preferred node affinity (weight {self.weight}): {terms}"
        if self.required_term is not None:
            terms = ", ".join(v.describe(k) for k, v in self.required_term.items)
            return f"required node affinity term {terms} (a later term applies)"
        if self.spread is not None:
            return (
                f"ScheduleAnyway topology spread on {self.spread.topology_key} "
                f"(maxSkew {self.spread.max_skew})"
            )
        return "avoiding NodePools' PreferNoSchedule taints"


class PodClass:
    """Pods that schedule identically, with their constraints compiled."""

    def __init__(self, class_id: int, pods: list[Pod], request: tuple[int, ...]) -> None:
        self.id = class_id
        self.pods = pods
        self.next = 0
        self.remaining = len(pods)
        self.family = 0
        self.sample = pods[0]
        self.namespace = pods[0].namespace
        self.labels = dict(pods[0].labels)
        self.request = request
        self.softs: list[Soft] = []
        self.node_terms: list[Requirements] = []
        self.spreads: list[Spread] = []
        self.affinity: list[AffinityRef] = []
        self.anti: list[AffinityRef] = []
        self.inverse_owned: list[int] = []
        self.inverse_matched: list[int] = []
        self.matched_groups: list[int] = []
        self.keys: list[str] = []
        self.host_ports: tuple[HostPort, ...] = pods[0].host_ports
        self.reasons: dict[str, str] = {}
        # The preferences dropped to reach this class (Soft.describe), first dropped first.
        self.relaxed: list[str] = []
        # PreferNoSchedule taints keep the class off until that preference is relaxed.
        self.avoids_preferred_taints = False

    def take(self, count: int) -> list[Pod]:
        taken = self.pods[self.next : self.next + count]
        self.next += len(taken)
        self.remaining = len(self.pods) - self.next
        return taken


@dataclass
class Bin:
    """A node being filled: an existing node / in-flight claim, or a new NodeClaim."""

    id: int
    name: str
    allocatable: tuple[int, ...]
    used: list[int]
    node: Node | None = None
    pool: Pool | None = None
    requirements: Requirements = field(default_factory=Requirements)
    bits: int = 0
    target: int = -1
    pods: list[str] = field(default_factory=list)
    ports: list[HostPort] = field(default_factory=list)
    limit_capacity: tuple[int, ...] | None = None
    # The pool's minValues this claim keeps: as written, or lowered when it was opened
    # (``MinValuesPolicy.BEST_EFFORT``); its later pods must keep these.
    min_values: tuple[tuple[str, int], ...] = ()
    # The capacity reservation a closed new claim took an instance of ("": none).
    reservation: str = ""


@dataclass(frozen=True)
class DaemonPorts:
    """A DaemonSet that runs on a pool's new nodes and binds host ports there (its pod
    arrives with the node, before any pending pod), on nodes one of ``node_terms`` admits."""

    name: str
    host_ports: tuple[HostPort, ...]
    node_terms: tuple[Requirements, ...]


@dataclass
class Pool:
    index: int
    nodepool: NodePool
    requirements: Requirements
    taints: tuple[Taint, ...]
    overhead: tuple[int, ...]
    bits: int
    used_capacity: list[int]
    nodes: int
    min_values: tuple[tuple[str, int], ...] = ()
    daemon_ports: tuple[DaemonPorts, ...] = ()
