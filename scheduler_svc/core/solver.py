"""The provisioning solver: pending pods -> placements on existing capacity and new NodeClaims.

How it works (and why it is fast):
* Pods with identical scheduling constraints and requests form one equivalence class; the solver
  places ``m`` copies of a class at once, so its work grows with classes x nodes touched, not
  with pods.
* Bins are filled one at a time: existing nodes and in-flight NodeClaims first, then new
  NodeClaims from NodePools by weight (higher first). A new NodeClaim is anchored on the first
  class still waiting and targets the instance type with the lowest price per unit of the
  remaining demand (FACTS §5's "cheapest that holds it", generalised); it takes a proportional
  slice of every compatible class first (so cpu-heavy and memory-heavy pods share nodes), then
  fills what is left largest-first. Its final instance type is the cheapest that holds what it
  got; every other compatible offering follows, cheapest first, as the actuator's fallbacks.
  When the anchoring class spreads across zones (or capacity types), one claim per domain is
  opened and the claims are filled together, round-robin, so the skew lets each take its share.
* Instance types are bitsets (``CatalogIndex``); topology counts are kept per group and domain
  and updated as pods are placed, never recounted.
* Preferences (preferred node/pod affinity, ScheduleAnyway spreads) start as requirements and
  are relaxed one at a time, lightest first, for the pods that could not be placed.
Every pod left over gets the reason that ruled it out, per NodePool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scheduler_svc.core.catalog_index import (
    BASE_DIMENSIONS,
    CatalogCache,
    CatalogIndex,
    iter_bits,
    resource_vector,
)
from scheduler_svc.core.model import (
    ExistingPlacement,
    HostPort,
    Node,
    NodeClaimPlan,
    NodePool,
    OfferingOption,
    Pod,
    PodAffinityTerm,
    Resources,
    SchedulingInput,
    SchedulingResult,
    TopologySpreadConstraint,
    UnschedulablePod,
    WhenUnsatisfiable,
)
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.taints import Taint, first_untolerated

_INF = 1 << 62
_NO_RESOURCES = Resources()
_TAIL_NODES = 4
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
class _Group:
    key: str
    selector: Requirements
    namespaces: frozenset[str]
    counts: dict[object, int] = field(default_factory=dict)
    total: int = 0

    def matches(self, namespace: str, labels: dict[str, str]) -> bool:
        return namespace in self.namespaces and self.selector.matches(labels)


@dataclass(frozen=True)
class _Spread:
    group: int
    key: str
    max_skew: int
    min_domains: int | None
    self_match: bool
    affinity_honor: bool
    taints_honor: bool
    description: str


@dataclass(frozen=True)
class _AffinityRef:
    group: int
    key: str
    self_match: bool
    description: str


@dataclass(frozen=True)
class _Soft:
    """A preference the solver treats as required until relaxed."""

    weight: int
    kind: str  # node | affinity | anti | spread
    node_requirements: Requirements | None = None
    term: PodAffinityTerm | None = None
    spread: TopologySpreadConstraint | None = None


class _Class:
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
        self.softs: list[_Soft] = []
        self.node_terms: list[Requirements] = []
        self.spreads: list[_Spread] = []
        self.affinity: list[_AffinityRef] = []
        self.anti: list[_AffinityRef] = []
        self.inverse_owned: list[int] = []
        self.inverse_matched: list[int] = []
        self.matched_groups: list[int] = []
        self.keys: list[str] = []
        self.host_ports: tuple[HostPort, ...] = pods[0].host_ports
        self.reasons: dict[str, str] = {}
        self.relaxed: list[str] = []

    def take(self, count: int) -> list[Pod]:
        taken = self.pods[self.next : self.next + count]
        self.next += len(taken)
        self.remaining = len(self.pods) - self.next
        return taken


@dataclass
class _Bin:
    """A node being filled: an existing node / in-flight claim, or a new NodeClaim."""

    id: int
    name: str
    allocatable: tuple[int, ...]
    used: list[int]
    node: Node | None = None
    pool: _Pool | None = None
    requirements: Requirements = field(default_factory=Requirements)
    bits: int = 0
    target: int = -1
    pods: list[str] = field(default_factory=list)
    ports: list[HostPort] = field(default_factory=list)
    limit_capacity: tuple[int, ...] | None = None


@dataclass
class _Pool:
    index: int
    nodepool: NodePool
    requirements: Requirements
    taints: tuple[Taint, ...]
    overhead: tuple[int, ...]
    bits: int
    used_capacity: list[int]
    nodes: int
    min_values: tuple[tuple[str, int], ...] = ()


class _Solver:
    def __init__(self, problem: SchedulingInput, catalogs: CatalogCache | None = None) -> None:
        self.problem = problem
        extended = sorted(
            {name for pod in problem.pods for c in pod.containers for name, _ in c.extended}
            | {
                name
                for pod in (*problem.pods, *problem.daemonsets)
                for name, _ in pod.requests().extended
                if pod.init_containers or pod.overhead.extended
            }
            | {name for pod in problem.daemonsets for name, _ in pod.requests().extended}
        )
        self.dimensions = (*BASE_DIMENSIONS, *extended)
        self._requests = {id(pod): self._request_vector(pod) for pod in problem.pods}
        if catalogs is None:
            self.catalog = CatalogIndex(
                problem.instance_types, self.dimensions, problem.unavailable_offerings
            )
        else:
            self.catalog = catalogs.index(
                problem.instance_types, self.dimensions, problem.unavailable_offerings
            )
        self.groups: list[_Group] = []
        self.group_ids: dict[tuple[str, Requirements, frozenset[str]], int] = {}
        self.inverse: list[_Group] = []
        self.inverse_ids: dict[tuple[str, Requirements, frozenset[str]], int] = {}
        self.bins: list[_Bin] = []
        self.claims: list[_Bin] = []
        self.unschedulable: list[UnschedulablePod] = []
        self.pools = self._build_pools()
        self.classes = self._build_classes(problem.pods)
        self._collect_running()
        self._static_claim_cache: dict[
            tuple[Requirements, int], tuple[Requirements, int] | None
        ] = {}
        self._static_node: dict[tuple[int, int], Requirements | None] = {}
        self._pool_fit: dict[tuple[int, int], tuple[Requirements | None, int, str | None]] = {}
        self._claim_requirement_cache: dict[tuple[Requirements, int], tuple[Requirement, ...]] = {}
        self._launchable: dict[int, tuple[tuple[OfferingOption, ...], Requirements]] = {}
        self._existing_domain_cache: dict[object, frozenset[object]] = {}
        self._universe_cache: dict[tuple[int, str], tuple[object, ...]] = {}
        self._targets: dict[tuple[int, int, Requirements], int] = {}
        self.last_failure = ""
        self._blocked_by_constraint = False
        # A lower bound on every waiting class's request, per resource (set per round).
        self._smallest: list[int] = []

    # -- set-up ---------------------------------------------------------------------------------

    def _vector(self, resources: Resources) -> tuple[int, ...]:
        return resource_vector(resources, self.dimensions)

    def _request_vector(self, pod: Pod) -> tuple[int, ...]:
        """The pod's effective requests as a vector (the one-container shape without building
        intermediate Resources: this runs once per pending pod)."""
        if pod.init_containers or len(pod.containers) != 1 or pod.overhead != _NO_RESOURCES:
            return self._vector(pod.requests())
        c = pod.containers[0]
        base = (c.cpu_millis, c.memory_bytes, c.pods + 1, c.ephemeral_storage_bytes)
        if len(self.dimensions) == len(BASE_DIMENSIONS):
            return base
        extended = dict(c.extended)
        return base + tuple(extended.get(d, 0) for d in self.dimensions[len(BASE_DIMENSIONS) :])

    def _build_pools(self) -> list[_Pool]:
        pools: list[_Pool] = []
        ordered = sorted(self.problem.nodepools, key=lambda p: (-p.weight, p.name))
        for index, nodepool in enumerate(ordered):
            labels = nodepool.node_labels()
            requirements = Requirements.of(nodepool.requirements).intersect(
                Requirements.from_labels(labels)
            )
            overhead = [0] * len(self.dimensions)
            for daemon in self.problem.daemonsets:
                if first_untolerated(daemon.tolerations, nodepool.taints) is not None:
                    continue
                if not any(
                    term.conflict(requirements) is None for term in self._node_terms(daemon, [])
                ):
                    continue
                for d, amount in enumerate(self._vector(daemon.requests())):
                    overhead[d] += amount
            bits = self.catalog.compatible(requirements) & self.catalog.fits(overhead)
            used = [0] * len(self.dimensions)
            count = 0
            for node in self.problem.nodes:
                if node.nodepool() == nodepool.name:
                    count += 1
                    for d, amount in enumerate(self._vector(node.capacity or node.allocatable)):
                        used[d] += amount
            pools.append(
                _Pool(
                    index,
                    nodepool,
                    requirements,
                    nodepool.taints,
                    tuple(overhead),
                    bits,
                    used,
                    count,
                    tuple((r.key, r.min_values) for r in nodepool.requirements if r.min_values),
                )
            )
        return pools

    def _min_values_unmet(self, pool: _Pool, bits: int) -> str | None:
        """The first minValues requirement the types in ``bits`` cannot meet (None: all met)."""
        for key, wanted in pool.min_values:
            by_value = self.catalog.label_index.get(key, {})
            have = sum(1 for value_bits in by_value.values() if value_bits & bits)
            if have < wanted:
                return f"minValues {wanted} for {key} (only {have} fit)"
        return None

    @staticmethod
    def _node_terms(pod: Pod, softs: Sequence[_Soft]) -> list[Requirements]:
        base = Requirements.from_labels(pod.node_selector)
        if pod.volume_zones:
            base = base.intersect(
                Requirements.of([Requirement(LABEL_ZONE, Operator.IN, tuple(pod.volume_zones))])
            )
        for soft in softs:
            if soft.node_requirements is not None:
                base = base.intersect(soft.node_requirements)
        if not pod.required_node_affinity:
            return [base]
        return [base.intersect(Requirements.of(term)) for term in pod.required_node_affinity]

    def _group(self, key: str, selector: Requirements, namespaces: frozenset[str]) -> int:
        ident = (key, selector, namespaces)
        gid = self.group_ids.get(ident)
        if gid is None:
            gid = len(self.groups)
            self.groups.append(_Group(key, selector, namespaces))
            self.group_ids[ident] = gid
        return gid

    def _inverse_group(self, key: str, selector: Requirements, namespaces: frozenset[str]) -> int:
        ident = (key, selector, namespaces)
        iid = self.inverse_ids.get(ident)
        if iid is None:
            iid = len(self.inverse)
            self.inverse.append(_Group(key, selector, namespaces))
            self.inverse_ids[ident] = iid
        return iid

    def _build_classes(self, pods: Iterable[Pod]) -> list[_Class]:
        by_key: dict[object, list[Pod]] = {}
        requests: dict[object, tuple[int, ...]] = {}
        families: dict[object, int] = {}
        family_of: dict[object, int] = {}
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
            request = self._requests[id(pod)]
            constraints = (
                pod.namespace,
                tuple(sorted(pod.labels.items())),
                tuple(sorted(pod.node_selector.items())),
                pod.required_node_affinity,
                pod.preferred_node_affinity,
                pod.tolerations,
                pod.topology_spread,
                pod.pod_affinity,
                pod.pod_anti_affinity,
                pod.preferred_pod_affinity,
                pod.preferred_pod_anti_affinity,
                pod.host_ports,
                pod.volume_zones,
            )
            key = (request, constraints)
            members = by_key.get(key)
            if members is None:
                by_key[key] = members = []
                requests[key] = request
                family_of[key] = families.setdefault(constraints, len(families))
            members.append(pod)
        classes: list[_Class] = []
        for class_key, members in by_key.items():
            cls = _Class(len(classes), members, requests[class_key])
            cls.family = family_of[class_key]
            cls.softs = self._softs(cls.sample)
            self._compile(cls)
            classes.append(cls)
        # Groups are known only once every class is compiled: match each class against all.
        for cls in classes:
            self._match_groups(cls)
        classes.sort(key=self._class_order)
        return classes

    def _class_order(self, cls: _Class) -> tuple[object, ...]:
        # Largest first (cpu, then memory), as kube-scheduler-minded bin packers do.
        return (tuple(-x for x in cls.request[:2]), -len(cls.keys), cls.sample.key)

    @staticmethod
    def _softs(pod: Pod) -> list[_Soft]:
        """Preferences in the order they are relaxed (first dropped first): preferred pod
        affinity, preferred anti-affinity, preferred node affinity, ScheduleAnyway spreads;
        lightest first within each kind."""
        softs: list[_Soft] = []
        softs += [
            _Soft(w.weight, "affinity", term=w.term)
            for w in sorted(pod.preferred_pod_affinity, key=lambda w: w.weight)
        ]
        softs += [
            _Soft(w.weight, "anti", term=w.term)
            for w in sorted(pod.preferred_pod_anti_affinity, key=lambda w: w.weight)
        ]
        softs += [
            _Soft(p.weight, "node", node_requirements=Requirements.of(p.requirements))
            for p in sorted(pod.preferred_node_affinity, key=lambda p: p.weight)
        ]
        softs += [
            _Soft(0, "spread", spread=s)
            for s in pod.topology_spread
            if s.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
        ]
        return softs

    def _compile(self, cls: _Class) -> None:
        pod = cls.sample
        cls.node_terms = self._node_terms(pod, cls.softs)
        own_namespace = frozenset({pod.namespace})
        cls.spreads, cls.affinity, cls.anti, cls.inverse_owned = [], [], [], []
        spreads = [
            s
            for s in pod.topology_spread
            if s.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE
        ] + [s.spread for s in cls.softs if s.spread is not None]
        for spread in spreads:
            selector = spread.label_selector.requirements if spread.label_selector else None
            if selector is None:
                continue  # a spread without a selector matches no pod: Kubernetes ignores it
            extra = {k: cls.labels[k] for k in spread.match_label_keys if k in cls.labels}
            selector = selector.intersect(Requirements.from_labels(extra))
            gid = self._group(spread.topology_key, selector, own_namespace)
            cls.spreads.append(
                _Spread(
                    gid,
                    spread.topology_key,
                    spread.max_skew,
                    spread.min_domains,
                    selector.matches(cls.labels),
                    spread.node_affinity_policy_honor,
                    spread.node_taints_policy_honor,
                    f"topology spread on {spread.topology_key} (maxSkew {spread.max_skew})",
                )
            )
        for refs, hard, kind, what in (
            (cls.affinity, pod.pod_affinity, "affinity", "pod affinity"),
            (cls.anti, pod.pod_anti_affinity, "anti", "pod anti-affinity"),
        ):
            terms = list(hard) + [s.term for s in cls.softs if s.kind == kind and s.term]
            for term in terms:
                namespaces = frozenset(term.namespaces) or own_namespace
                selector = term.label_selector.requirements
                refs.append(
                    _AffinityRef(
                        self._group(term.topology_key, selector, namespaces),
                        term.topology_key,
                        namespace_ok(cls.namespace, namespaces) and selector.matches(cls.labels),
                        f"{what} on {term.topology_key}",
                    )
                )
        for term in pod.pod_anti_affinity:
            namespaces = frozenset(term.namespaces) or own_namespace
            cls.inverse_owned.append(
                self._inverse_group(term.topology_key, term.label_selector.requirements, namespaces)
            )

    def _match_groups(self, cls: _Class) -> None:
        cls.matched_groups = [
            gid for gid, g in enumerate(self.groups) if g.matches(cls.namespace, cls.labels)
        ]
        # Terms the class owns count too: a running pod with the same term blocks it as well.
        cls.inverse_matched = [
            iid for iid, g in enumerate(self.inverse) if g.matches(cls.namespace, cls.labels)
        ]
        keys = (
            {s.key for s in cls.spreads} | {a.key for a in cls.affinity} | {a.key for a in cls.anti}
        )
        keys |= {self.groups[g].key for g in cls.matched_groups}
        keys |= {self.inverse[i].key for i in cls.inverse_matched}
        keys |= {self.inverse[i].key for i in cls.inverse_owned}
        cls.keys = sorted(keys)

    def _collect_running(self) -> None:  # noqa: PLR0912 - one branch per constraint kind reads best
        """Existing nodes become bins; their pods count in topology groups."""
        nodes = sorted(self.problem.nodes, key=lambda n: (n.is_in_flight, n.name))
        for node in nodes:
            used = [0] * len(self.dimensions)
            for pod in node.pods:
                for d, amount in enumerate(self._vector(pod.requests())):
                    used[d] += amount
            b = _Bin(
                len(self.bins),
                node.name,
                self._vector(node.allocatable),
                used,
                node=node,
                ports=[p for pod in node.pods for p in pod.host_ports],
            )
            self.bins.append(b)
            for pod in node.pods:
                labels = dict(pod.labels)
                for group in self.groups:
                    if group.matches(pod.namespace, labels):
                        domain = self._domain(b, group.key)
                        if domain is not None:
                            group.counts[domain] = group.counts.get(domain, 0) + 1
                            group.total += 1
                for term in pod.pod_anti_affinity:
                    namespaces = frozenset(term.namespaces) or frozenset({pod.namespace})
                    ident = (term.topology_key, term.label_selector.requirements, namespaces)
                    iid = self.inverse_ids.get(ident)
                    if iid is None:
                        iid = self._inverse_group(*ident)
                        for cls in self.classes:
                            if self.inverse[iid].matches(cls.namespace, cls.labels):
                                cls.inverse_matched.append(iid)
                                if self.inverse[iid].key not in cls.keys:
                                    cls.keys = sorted({*cls.keys, self.inverse[iid].key})
                    domain = self._domain(b, term.topology_key)
                    if domain is not None:
                        inv = self.inverse[iid]
                        inv.counts[domain] = inv.counts.get(domain, 0) + 1
                        inv.total += 1

    # -- domains --------------------------------------------------------------------------------

    def _domain(self, b: _Bin, key: str, requirements: Requirements | None = None) -> object:
        if key == LABEL_HOSTNAME:
            return b.id
        if b.node is not None:
            return b.node.labels.get(key)
        value_set = (requirements or b.requirements).get(key)
        return value_set.single_value() if value_set is not None else None

    def _candidates(self, b: _Bin, key: str, requirements: Requirements) -> list[str]:
        """Values a new NodeClaim could still take for ``key`` (to pin it)."""
        if b.node is not None or key == LABEL_HOSTNAME:
            return []
        zones = requirements.get(LABEL_ZONE)
        capacity_types = requirements.get(LABEL_CAPACITY_TYPE)
        if key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
            offers = self.catalog.matching_offerings(b.target, zones, capacity_types)
            if key == LABEL_ZONE:
                return sorted({o.zone for o in offers})
            return sorted({o.capacity_type for o in offers})
        value = self.catalog.labels[b.target].get(key)
        if key in self.catalog.label_index:
            return [value] if value is not None else []
        value_set = requirements.get(key)
        finite = value_set.finite_values() if value_set is not None else None
        return sorted(finite) if finite else []

    def _existing_domains(self, cls: _Class, spread: _Spread) -> frozenset[object]:
        """Values of the spread's key on existing nodes the policies let count (shared by every
        class with the same node terms and tolerations: large clusters have many nodes)."""
        ident = (
            spread.key,
            tuple(cls.node_terms) if spread.affinity_honor else (),
            cls.sample.tolerations if spread.taints_honor else None,
        )
        cached = self._existing_domain_cache.get(ident)
        if cached is not None:
            return cached
        values: set[object] = set()
        for b in self.bins:
            if b.node is None:
                continue
            if spread.affinity_honor and not any(t.matches(b.node.labels) for t in cls.node_terms):
                continue
            if spread.taints_honor and first_untolerated(cls.sample.tolerations, b.node.taints):
                continue
            value = b.node.labels.get(spread.key)
            if value is not None:
                values.add(value)
        result = frozenset(values)
        self._existing_domain_cache[ident] = result
        return result

    def _universe(self, cls: _Class, spread: _Spread) -> tuple[object, ...]:
        """The domains a spread counts for its minimum: eligible existing nodes' values plus
        what compatible NodePools can launch into."""
        ident = (cls.id, spread.key)
        cached = self._universe_cache.get(ident)
        if cached is not None:
            return cached
        values: set[object] = set(self._existing_domains(cls, spread))
        for pool in self.pools:
            term, bits, reason = self._fit_pool(cls, pool)
            if term is None or reason is not None:
                continue
            if not spread.affinity_honor:
                # nodeAffinityPolicy Ignore: every domain the pool reaches counts, not only those
                # the pod's node affinity allows.
                term, bits = pool.requirements, pool.bits
            if spread.key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
                zones = term.get(LABEL_ZONE)
                capacity_types = term.get(LABEL_CAPACITY_TYPE)
                for (zone, capacity_type), pair_bits in self.catalog.zone_capacity_bits.items():
                    if (
                        pair_bits & bits
                        and (zones is None or zones.allows(zone))
                        and (capacity_types is None or capacity_types.allows(capacity_type))
                    ):
                        values.add(zone if spread.key == LABEL_ZONE else capacity_type)
            else:
                value_set = term.get(spread.key)
                finite = value_set.finite_values() if value_set is not None else None
                if finite:
                    values.update(finite)
                elif spread.key in self.catalog.label_index:
                    for value, value_bits in self.catalog.label_index[spread.key].items():
                        if value_bits & bits:
                            values.add(value)
        result = tuple(sorted(values, key=str))
        self._universe_cache[ident] = result
        return result

    # -- compatibility ----------------------------------------------------------------------------

    def _fit_pool(self, cls: _Class, pool: _Pool) -> tuple[Requirements | None, int, str | None]:
        """(the pod's requirements under this pool, the types that hold one pod, why not)."""
        ident = (cls.id, pool.index)
        cached = self._pool_fit.get(ident)
        if cached is not None:
            return cached
        result = self._fit_pool_uncached(cls, pool)
        self._pool_fit[ident] = result
        return result

    def _fit_pool_uncached(
        self, cls: _Class, pool: _Pool
    ) -> tuple[Requirements | None, int, str | None]:
        name = pool.nodepool.name
        taint = first_untolerated(cls.sample.tolerations, pool.taints)
        if taint is not None:
            return None, 0, f"taint:{taint.describe()}"
        conflicts: list[str] = []
        compatible: list[tuple[Requirements, int]] = []
        for term in cls.node_terms:
            hostname = term.get(LABEL_HOSTNAME)
            if hostname is not None and not hostname.allows_absent:
                # A node that does not exist yet has no hostname a pod could select.
                conflicts.append(
                    f"requires {hostname.describe(LABEL_HOSTNAME)}, which no new node can have"
                )
                continue
            conflict = term.conflict(pool.requirements)
            if conflict is not None:
                conflicts.append(conflict)
                continue
            merged = pool.requirements.intersect(term)
            compatible.append((merged, pool.bits & self.catalog.compatible(merged)))
        if not compatible:
            return None, 0, f"NodePool {name}: pod {conflicts[0].replace('the NodePool', name)}"
        needed = [o + r for o, r in zip(pool.overhead, cls.request, strict=True)]
        fitting = self.catalog.fits(needed)
        for merged, bits in compatible:
            if bits & fitting:
                return merged, bits & fitting, None
        merged, bits = compatible[0]
        if not bits:
            return (
                merged,
                0,
                (
                    f"no instance type with an available offering satisfies the pod's requirements "
                    f"under NodePool {name}"
                ),
            )
        for d, amount in enumerate(needed):
            if amount and all(self.catalog.allocatable[p][d] < amount for p in iter_bits(bits)):
                shown = amount - pool.overhead[d]
                extra = " (with DaemonSet overhead)" if pool.overhead[d] else ""
                return (
                    merged,
                    0,
                    (
                        f"no instance type has {format_amount(self.dimensions[d], shown)} "
                        f"allocatable{extra} under NodePool {name}"
                    ),
                )
        return merged, 0, f"no single instance type holds the pod's requests under NodePool {name}"

    def _static_existing(self, b: _Bin, cls: _Class) -> Requirements | None:
        ident = (b.id, cls.id)
        if ident in self._static_node:
            return self._static_node[ident]
        node = b.node
        assert node is not None
        result: Requirements | None = None
        if first_untolerated(cls.sample.tolerations, node.taints) is None:
            for term in cls.node_terms:
                if term.matches(node.labels):
                    result = term
                    break
        self._static_node[ident] = result
        return result

    def _static_claim(self, b: _Bin, cls: _Class) -> tuple[Requirements, int] | None:
        assert b.pool is not None
        ident = (b.requirements, cls.id)
        if ident in self._static_claim_cache:
            return self._static_claim_cache[ident]
        result: tuple[Requirements, int] | None = None
        pool_term, _, reason = self._fit_pool(cls, b.pool)
        if pool_term is not None and reason is None:
            for term in cls.node_terms:
                if term.conflict(b.requirements) is not None:
                    continue
                merged = b.requirements.intersect(term)
                bits = b.bits & self.catalog.compatible(merged)
                if (bits >> b.target) & 1:
                    result = (merged, bits)
                    break
        self._static_claim_cache[ident] = result
        return result

    # -- topology -------------------------------------------------------------------------------

    def _topology_cap(self, b: _Bin, cls: _Class, key: str, domain: object) -> int:  # noqa: PLR0912 - one branch per constraint kind reads best
        cap = _INF
        for spread in cls.spreads:
            if spread.key != key:
                continue
            if domain is None:
                self.last_failure = f"{spread.description}: node has no {key} label"
                return 0
            group = self.groups[spread.group]
            count = group.counts.get(domain, 0)
            if key == LABEL_HOSTNAME:
                minimum = 0  # a new node (count 0) can always be added to the domains
            else:
                universe = self._universe(cls, spread)
                minimum = min((group.counts.get(v, 0) for v in universe), default=0)
                if spread.min_domains is not None and len(universe) < spread.min_domains:
                    minimum = 0
            if spread.self_match:
                cap = min(cap, spread.max_skew + minimum - count)
            elif count - minimum > spread.max_skew:
                cap = 0
            if cap <= 0:
                self.last_failure = f"{spread.description} cannot be met"
                return 0
        for ref in cls.affinity:
            if ref.key != key:
                continue
            group = self.groups[ref.group]
            if domain is not None and group.counts.get(domain, 0) > 0:
                continue
            if domain is not None and group.total == 0 and ref.self_match:
                continue
            self.last_failure = f"{ref.description}: no matching pod in a reachable domain"
            return 0
        for ref in cls.anti:
            if ref.key != key or domain is None:
                continue
            if self.groups[ref.group].counts.get(domain, 0) > 0:
                self.last_failure = (
                    f"{ref.description}: every reachable domain already runs a matching pod"
                )
                return 0
            if ref.self_match:
                cap = min(cap, 1)
        for iid in cls.inverse_matched:
            inverse = self.inverse[iid]
            if inverse.key == key and domain is not None and inverse.counts.get(domain, 0) > 0:
                self.last_failure = (
                    f"another pod's anti-affinity on {key} excludes it from every reachable domain"
                )
                return 0
        return cap

    # -- placing ---------------------------------------------------------------------------------

    def _max_copies(  # noqa: PLR0911, PLR0912 - one exit per constraint kind
        self, b: _Bin, cls: _Class, want: int
    ) -> tuple[int, Requirements, int]:
        """How many copies of ``cls`` fit on ``b`` now, and the bin's narrowed requirements
        and instance types if they go there."""
        free = b.allocatable
        used = b.used
        cap = want
        for d, amount in enumerate(cls.request):
            if amount:
                room = (free[d] - used[d]) // amount
                if room < cap:
                    cap = room
                    if cap <= 0:
                        self.last_failure = f"not enough {self.dimensions[d]}"
                        self._blocked_by_constraint = False
                        return 0, b.requirements, b.bits
        self._blocked_by_constraint = True
        if b.node is not None:
            term = self._static_existing(b, cls)
            if term is None:
                self.last_failure = "node affinity or taints"
                return 0, b.requirements, b.bits
            requirements, bits = b.requirements, b.bits
        else:
            static = self._static_claim(b, cls)
            if static is None:
                self.last_failure = "requirements"
                return 0, b.requirements, b.bits
            requirements, bits = static
        if cls.host_ports:
            if any(p.conflicts(q) for p in cls.host_ports for q in b.ports):
                self.last_failure = "host port conflict"
                return 0, requirements, bits
            cap = min(cap, 1)
        for key in cls.keys:
            domain = self._domain(b, key, requirements)
            if domain is None and b.node is None and key != LABEL_HOSTNAME:
                candidates = self._candidates(b, key, requirements)
                if candidates:
                    best_value, best_cap, best_count = "", -1, _INF
                    first_group = self._first_group(cls, key)
                    for value in candidates:
                        value_cap = self._topology_cap(b, cls, key, value)
                        count = first_group.counts.get(value, 0) if first_group else 0
                        if value_cap > best_cap or (value_cap == best_cap and count < best_count):
                            best_value, best_cap, best_count = value, value_cap, count
                    if best_cap <= 0:
                        return 0, requirements, bits
                    cap = min(cap, best_cap)
                    pin = Requirements.of([Requirement(key, Operator.IN, (best_value,))])
                    requirements = requirements.intersect(pin)
                    bits &= self.catalog.compatible(requirements)
                    continue
            cap = min(cap, self._topology_cap(b, cls, key, domain))
            if cap <= 0:
                return 0, requirements, bits
        if b.pool is not None and b.pool.min_values:
            cap = self._min_values_cap(b, cls, cap, bits)
            if cap <= 0:
                return 0, requirements, bits
        return cap, requirements, bits

    def _min_values_cap(self, b: _Bin, cls: _Class, cap: int, bits: int) -> int:
        """The most copies that keep enough instance types for the pool's minValues."""
        pool = b.pool
        assert pool is not None

        def ok(count: int) -> bool:
            needed = [u + r * count for u, r in zip(b.used, cls.request, strict=True)]
            return self._min_values_unmet(pool, bits & self.catalog.fits(needed)) is None

        if ok(cap):
            return cap
        low, high = 0, cap  # ok(low) holds (the claim as it is), ok(high) does not
        while high - low > 1:
            middle = (low + high) // 2
            if ok(middle):
                low = middle
            else:
                high = middle
        if low == 0:
            self.last_failure = (
                self._min_values_unmet(
                    pool,
                    bits
                    & self.catalog.fits([u + r for u, r in zip(b.used, cls.request, strict=True)]),
                )
                or "minValues"
            )
        return low

    def _first_group(self, cls: _Class, key: str) -> _Group | None:
        for spread in cls.spreads:
            if spread.key == key:
                return self.groups[spread.group]
        for gid in cls.matched_groups:
            if self.groups[gid].key == key:
                return self.groups[gid]
        return None

    def _place(
        self, b: _Bin, cls: _Class, count: int, requirements: Requirements, bits: int
    ) -> None:
        b.requirements, b.bits = requirements, bits
        for d, amount in enumerate(cls.request):
            if amount:
                b.used[d] += amount * count
        b.pods.extend(p.key for p in cls.take(count))
        if cls.host_ports:
            b.ports.extend(cls.host_ports)
        for gid in cls.matched_groups:
            group = self.groups[gid]
            domain = self._domain(b, group.key)
            if domain is not None:
                group.counts[domain] = group.counts.get(domain, 0) + count
                group.total += count
        for iid in cls.inverse_owned:
            inverse = self.inverse[iid]
            domain = self._domain(b, inverse.key)
            if domain is not None:
                inverse.counts[domain] = inverse.counts.get(domain, 0) + count
                inverse.total += count
        if b.pool is not None:
            self._pool_demand_placed(cls, count)

    def _pool_demand_placed(self, cls: _Class, count: int) -> None:
        demand = self._demand
        for d, amount in enumerate(cls.request):
            demand[d] -= amount * count

    def _fill(self, b: _Bin, classes: Sequence[_Class], fraction: float = 0.0) -> int:
        placed = 0
        # Classes of one family differ only in requests: when one fails for any other reason
        # (topology, ports, requirements) they all do on this bin, so the rest are skipped.
        blocked: set[int] = set()
        free = b.allocatable
        used = b.used
        smallest = self._smallest
        if fraction > 0:
            carry = 0.0
            for cls in classes:
                if not cls.remaining:
                    continue
                carry += cls.remaining * fraction
                want = min(int(carry), cls.remaining)
                if want <= 0 or cls.family in blocked:
                    continue
                count, requirements, bits = self._max_copies(b, cls, want)
                carry -= count
                if count > 0:
                    self._place(b, cls, count, requirements, bits)
                    placed += count
                elif self._blocked_by_constraint:
                    blocked.add(cls.family)
        room = [f - u for f, u in zip(free, used, strict=True)]
        for cls in classes:
            if not cls.remaining or cls.family in blocked:
                continue
            if any(r > left for r, left in zip(cls.request, room, strict=True)):
                continue
            count, requirements, bits = self._max_copies(b, cls, cls.remaining)
            if count > 0:
                self._place(b, cls, count, requirements, bits)
                placed += count
                room = [f - u for f, u in zip(free, used, strict=True)]
                # Full for every class still waiting: stop scanning them.
                if any(left < m for left, m in zip(room, smallest, strict=True)):
                    break
            elif self._blocked_by_constraint:
                blocked.add(cls.family)
        return placed

    # -- new NodeClaims --------------------------------------------------------------------------

    def _limit_room(self, pool: _Pool, head_bits: int, share: int) -> tuple[int, str | None]:
        """(types that hold the head pod within the pool's remaining limits split ``share``
        ways, the limit reached when there are none)."""
        limits = pool.nodepool.limits
        if not limits.is_limited():
            return head_bits, None
        if limits.nodes is not None and pool.nodes + share > limits.nodes:
            return 0, f"nodes={limits.nodes}"
        bits = head_bits
        for d, limit in ((0, limits.cpu_millis), (1, limits.memory_bytes)):
            if limit is None:
                continue
            room = (limit - pool.used_capacity[d]) // share
            allowed = 0
            for p in iter_bits(bits):
                if self.catalog.capacity[p][d] <= room:
                    allowed |= 1 << p
            if not allowed:
                return 0, format_limit(self.dimensions[d], limit)
            bits = allowed
        return bits, None

    def _choose_target(self, pool: _Pool, bits: int) -> int:
        """The type with the lowest price per unit of remaining demand (ties: bigger)."""
        epoch = self._epoch
        # The pool-wide choice serves every head it can hold (most of them): one scan of the
        # pool's types per demand epoch instead of one per claim.
        pool_wide = (pool.bits, epoch, pool.requirements)
        cached = self._targets.get(pool_wide)
        if cached is None:
            cached = self._scan_targets(pool, pool.bits)
            self._targets[pool_wide] = cached
        if cached >= 0 and (bits >> cached) & 1:
            return cached
        ident = (bits, epoch, pool.requirements)
        cached = self._targets.get(ident)
        if cached is None:
            cached = self._scan_targets(pool, bits)
            self._targets[ident] = cached
        return cached

    def _scan_targets(self, pool: _Pool, bits: int) -> int:
        zones = pool.requirements.get(LABEL_ZONE)
        capacity_types = pool.requirements.get(LABEL_CAPACITY_TYPE)
        # Cheapest price per type memoized in the index, and only the demanded resources
        # looked at: this loop runs over the pool's whole catalog for every demand epoch.
        prices = self.catalog.cheapest_prices(zones, capacity_types)
        demanded = [
            (d, amount, pool.overhead[d]) for d, amount in enumerate(self._demand) if amount > 0
        ]
        allocatable = self.catalog.allocatable
        names = self.catalog.names
        best, best_key = -1, (float("inf"), 0.0, "")
        for p in self.catalog.positions(bits):
            price = prices[p]
            if price is None:
                continue
            alloc = allocatable[p]
            units = 1.0
            for d, amount, overhead in demanded:
                fraction = (alloc[d] - overhead) / amount
                if fraction < units:  # noqa: PLR1730 - a comparison is cheaper than min() here
                    units = fraction
            if units <= 0:
                continue
            # Price per unit of demand; near the tail (a few nodes of this type would hold all
            # that is left) count whole nodes, so a type needing a second, mostly empty node
            # does not look cheap. Rounded so that equal prices tie despite float noise (then
            # the bigger type wins: fewer nodes for the same price).
            nodes_needed = 1.0 / units
            if nodes_needed <= _TAIL_NODES:
                nodes_needed = math.ceil(nodes_needed - 1e-9)
            score = float(f"{price * nodes_needed:.9g}")
            key = (score, -units, names[p])
            if key < best_key:
                best, best_key = p, key
        return best

    def _provision(self, classes: list[_Class]) -> None:
        for pool in self.pools:
            candidates = [c for c in classes if c.remaining and self._fit_pool(c, pool)[2] is None]
            for c in classes:
                if c.remaining:
                    reason = self._fit_pool(c, pool)[2]
                    if reason is not None:
                        c.reasons[pool.nodepool.name] = reason
            if candidates:
                self._provision_pool(pool, candidates)

    def _provision_pool(self, pool: _Pool, candidates: list[_Class]) -> None:  # noqa: PLR0912 - one branch per outcome
        """New claims from one NodePool until its candidates are placed or ruled out."""
        self._demand = [0] * len(self.dimensions)
        for c in candidates:
            for d, amount in enumerate(c.request):
                self._demand[d] += amount * c.remaining
        total = sum(c.remaining for c in candidates)
        epoch_mark = total
        self._epoch = 0
        failed: set[int] = set()
        while True:
            head = next((c for c in candidates if c.remaining and c.id not in failed), None)
            if head is None:
                break
            if total < epoch_mark * 0.9:
                self._epoch += 1
                epoch_mark = total
            _, head_bits, _ = self._fit_pool(head, pool)
            key, domains = self._spread_domains(head, pool, head_bits)
            room_bits, reached = self._limit_room(pool, head_bits, max(1, len(domains)))
            if not room_bits and domains:
                key, domains = "", []
                room_bits, reached = self._limit_room(pool, head_bits, 1)
            if not room_bits:
                head.reasons[pool.nodepool.name] = (
                    f"NodePool {pool.nodepool.name} limit {reached} reached"
                )
                failed.add(head.id)
                continue
            target = self._choose_target(pool, room_bits)
            bins = self._open_bins(pool, target, key, domains)
            units = 1.0
            alloc = self.catalog.allocatable[target]
            for d, amount in enumerate(self._demand):
                if amount > 0:
                    units = min(units, (alloc[d] - pool.overhead[d]) / amount)
            fraction = units if units < 1.0 else 0.0
            # One copy of the head per claim proves the claims can exist; the rest comes
            # proportionally, then largest-first.
            placed = self._distribute(bins, head, len(bins))
            if placed == 0:
                for b in bins:
                    self.bins.remove(b)
                head.reasons[pool.nodepool.name] = (
                    f"NodePool {pool.nodepool.name}: {self.last_failure}"
                )
                failed.add(head.id)
                continue
            if len(bins) == 1:
                placed += self._fill(bins[0], candidates, fraction)
            else:
                placed += self._fill_set(bins, candidates, fraction * len(bins))
            total -= placed
            for b in bins:
                if b.pods:
                    self._close_claim(b)
                else:
                    self.bins.remove(b)
            candidates = [c for c in candidates if c.remaining]

    def _spread_domains(self, head: _Class, pool: _Pool, bits: int) -> tuple[str, list[str]]:
        """For a head spread across zones (or capacity types): the key and the domains this
        pool can launch it into. Claims are then opened one per domain and filled together,
        so the spread's skew lets each take its share instead of one pod."""
        for spread in head.spreads:
            if spread.key not in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
                continue
            term, _, _ = self._fit_pool(head, pool)
            if term is None:
                return "", []
            zones = term.get(LABEL_ZONE)
            capacity_types = term.get(LABEL_CAPACITY_TYPE)
            values = set()
            for (zone, capacity_type), pair_bits in self.catalog.zone_capacity_bits.items():
                if (
                    pair_bits & bits
                    and (zones is None or zones.allows(zone))
                    and (capacity_types is None or capacity_types.allows(capacity_type))
                ):
                    values.add(zone if spread.key == LABEL_ZONE else capacity_type)
            domains = sorted(values & {str(v) for v in self._universe(head, spread)})
            return (spread.key, domains) if len(domains) > 1 else ("", [])
        return "", []

    def _open_bins(self, pool: _Pool, target: int, key: str, domains: list[str]) -> list[_Bin]:
        """New claims targeting ``target``: one, or one pinned to each domain it offers."""
        pinned: list[Requirements] = []
        for domain in domains:
            requirements = pool.requirements.intersect(
                Requirements.of([Requirement(key, Operator.IN, (domain,))])
            )
            if (self.catalog.compatible(requirements) >> target) & 1:
                pinned.append(requirements)
        if len(pinned) < 2:
            pinned = [pool.requirements]
        bins: list[_Bin] = []
        for requirements in pinned:
            b = _Bin(
                len(self.bins),
                f"nodeclaim-{len(self.claims) + len(bins) + 1}",
                self.catalog.allocatable[target],
                list(pool.overhead),
                pool=pool,
                requirements=requirements,
                bits=pool.bits & self.catalog.compatible(requirements),
                target=target,
            )
            self.bins.append(b)
            bins.append(b)
        return bins

    def _distribute(self, bins: Sequence[_Bin], cls: _Class, want: int) -> int:
        """Place up to ``want`` copies over ``bins``; a spread class round-robin, emptiest
        domain first, so each claim's skew allowance grows as the others fill."""
        if len(bins) == 1:
            count, requirements, bits = self._max_copies(bins[0], cls, min(want, cls.remaining))
            if count > 0:
                self._place(bins[0], cls, count, requirements, bits)
            return count
        placed = 0
        group = self.groups[cls.spreads[0].group] if cls.spreads else None
        progress = True
        while want > 0 and cls.remaining and progress:
            progress = False
            order: Sequence[_Bin] = bins
            share = want
            if group is not None:
                order = sorted(
                    bins, key=lambda b: (group.counts.get(self._domain(b, group.key), 0), b.id)
                )
                share = max(1, -(-want // len(bins)))
            for b in order:
                if want <= 0 or not cls.remaining:
                    break
                count, requirements, bits = self._max_copies(b, cls, min(share, want))
                if count > 0:
                    self._place(b, cls, count, requirements, bits)
                    placed += count
                    want -= count
                    progress = True
        return placed

    def _fill_set(self, bins: Sequence[_Bin], classes: Sequence[_Class], fraction: float) -> int:
        """``_fill`` for claims filled together (see ``_spread_domains``)."""
        placed = 0
        if fraction > 0:
            carry = 0.0
            for cls in classes:
                if not cls.remaining:
                    continue
                carry += cls.remaining * fraction
                want = min(int(carry), cls.remaining)
                if want > 0:
                    got = self._distribute(bins, cls, want)
                    carry -= got
                    placed += got
        for cls in classes:
            if cls.remaining:
                placed += self._distribute(bins, cls, cls.remaining)
        return placed

    def _close_claim(self, b: _Bin) -> None:
        pool = b.pool
        assert pool is not None
        self.claims.append(b)
        pool.nodes += 1
        limits = pool.nodepool.limits
        if not limits.is_limited():
            return
        target_capacity = self.catalog.capacity[b.target]
        fit = b.bits & self.catalog.fits(b.used)
        reserved = [0] * len(self.dimensions)
        limited = [d for d, lim in ((0, limits.cpu_millis), (1, limits.memory_bytes)) if lim]
        allowed = 0
        for p in iter_bits(fit):
            capacity = self.catalog.capacity[p]
            if all(capacity[d] <= target_capacity[d] for d in limited):
                allowed |= 1 << p
                for d in limited:
                    reserved[d] = max(reserved[d], capacity[d])
        b.bits = allowed | (1 << b.target)
        for d in limited:
            reserved[d] = max(reserved[d], target_capacity[d])
            pool.used_capacity[d] += reserved[d]
        b.limit_capacity = tuple(reserved)

    def _offerings(self, b: _Bin) -> tuple[OfferingOption, ...]:
        fit = b.bits & self.catalog.fits(b.used)
        return self.catalog.offering_options(
            fit, b.requirements.get(LABEL_ZONE), b.requirements.get(LABEL_CAPACITY_TYPE)
        )

    # -- relaxing and reasons --------------------------------------------------------------------

    def _relax(self, cls: _Class) -> _Class | None:
        if not cls.softs:
            return None
        dropped = cls.softs[0]
        relaxed = _Class(len(self.classes) + len(self._extra), cls.pods[cls.next :], cls.request)
        relaxed.softs = cls.softs[1:]
        relaxed.reasons = dict(cls.reasons)
        relaxed.relaxed = [*cls.relaxed, dropped.kind]
        self._compile(relaxed)
        self._match_groups(relaxed)
        cls.next = len(cls.pods)
        cls.remaining = 0
        relaxed.family = -1 - relaxed.id
        self._extra.append(relaxed)
        return relaxed

    def _reason(self, cls: _Class) -> str:
        if not cls.reasons:
            return "no NodePool can launch a node for it"
        taints = [r.removeprefix("taint:") for r in cls.reasons.values() if r.startswith("taint:")]
        if len(taints) == len(cls.reasons):
            return f"tolerates no NodePool's taint {', '.join(sorted(set(taints)))}"
        parts = []
        for name in (p.nodepool.name for p in self.pools):
            reason = cls.reasons.get(name)
            if reason is None:
                continue
            if reason.startswith("taint:"):
                reason = (
                    f"does not tolerate NodePool {name}'s taint {reason.removeprefix('taint:')}"
                )
            parts.append(reason)
        return "; ".join(parts)

    # -- the whole solve -------------------------------------------------------------------------

    def solve(self) -> SchedulingResult:
        self._extra: list[_Class] = []
        self._demand = [0] * len(self.dimensions)
        self._epoch = 0
        pending = list(self.classes)
        while pending:
            # No class asks for less than this in any resource: bins with less room in one of
            # them are skipped without looking at a class (large clusters are mostly full).
            smallest = [min(c.request[d] for c in pending) for d in range(len(self.dimensions))]
            self._smallest = smallest
            active = list(pending)
            for index, b in enumerate(self.bins):
                if b.node is None and (b.pool is None or b.limit_capacity is not None):
                    continue
                free, used = b.allocatable, b.used
                if any(f - u < m for f, u, m in zip(free, used, smallest, strict=True)):
                    continue
                if index % 64 == 0:
                    active = [c for c in active if c.remaining]  # drop exhausted classes
                self._fill(b, active)
            self._provision(pending)
            relaxed = []
            for cls in pending:
                if cls.remaining:
                    next_class = self._relax(cls)
                    if next_class is not None:
                        relaxed.append(next_class)
            pending = relaxed
        for cls in (*self.classes, *self._extra):
            if cls.remaining:
                reason = self._reason(cls)
                self.unschedulable.extend(
                    UnschedulablePod(p.key, reason) for p in cls.pods[cls.next :]
                )
        return self._result()

    def _claim_requirements(
        self, b: _Bin, offerings: tuple[OfferingOption, ...]
    ) -> tuple[Requirement, ...]:
        """The claim's requirements narrowed to what its offerings can launch (as Karpenter's
        NodeClaims carry them: instance types, zones and capacity types listed)."""
        # Offering lists are shared between claims (memoised), so is what they launch; the
        # cache holds the list itself so that its id stays unique.
        cached = self._launchable.get(id(offerings))
        if cached is None:
            launchable = Requirements.of(
                [
                    Requirement(
                        LABEL_INSTANCE_TYPE,
                        Operator.IN,
                        tuple(sorted({o.instance_type for o in offerings})),
                    ),
                    Requirement(
                        LABEL_ZONE, Operator.IN, tuple(sorted({o.zone for o in offerings}))
                    ),
                    Requirement(
                        LABEL_CAPACITY_TYPE,
                        Operator.IN,
                        tuple(sorted({o.capacity_type for o in offerings})),
                    ),
                ]
            )
            cached = (offerings, launchable)
            self._launchable[id(offerings)] = cached
        ident = (b.requirements, id(offerings))
        written = self._claim_requirement_cache.get(ident)
        if written is None:
            written = b.requirements.intersect(cached[1]).to_requirements()
            self._claim_requirement_cache[ident] = written
        return written

    def _resources(self, vector: Sequence[int]) -> Resources:
        base = len(BASE_DIMENSIONS)
        extended = tuple(
            (name, amount)
            for name, amount in zip(self.dimensions[base:], vector[base:], strict=True)
            if amount
        )
        return Resources(vector[0], vector[1], vector[2], vector[3], extended)

    def _result(self) -> SchedulingResult:
        claims = []
        for b in self.claims:
            if not b.pods:
                continue
            offerings = self._offerings(b)
            if b.limit_capacity is not None:
                capacity = {
                    self.catalog.names[p]: self.catalog.capacity[p] for p in iter_bits(b.bits)
                }
                offerings = tuple(
                    o
                    for o in offerings
                    if all(
                        capacity[o.instance_type][d] <= b.limit_capacity[d]
                        for d in range(len(self.dimensions))
                        if b.limit_capacity[d]
                    )
                )
            claims.append(
                NodeClaimPlan(
                    nodepool=b.pool.nodepool.name if b.pool else "",
                    requirements=self._claim_requirements(b, offerings),
                    pods=tuple(b.pods),
                    requests=self._resources(b.used),
                    offerings=offerings,
                )
            )
        placements = tuple(
            ExistingPlacement(b.name, tuple(b.pods))
            for b in self.bins
            if b.node is not None and b.pods
        )
        unschedulable = tuple(sorted(self.unschedulable, key=lambda u: u.pod))
        return SchedulingResult(tuple(claims), placements, unschedulable)


def namespace_ok(namespace: str, namespaces: frozenset[str]) -> bool:
    """Whether a pod in ``namespace`` is within a term's namespaces."""
    return namespace in namespaces


def solve(problem: SchedulingInput, *, catalogs: CatalogCache | None = None) -> SchedulingResult:
    """Place every pending pod of ``problem``: on existing nodes and in-flight claims first, then
    on new NodeClaims (NodePools by weight). Deterministic; pure. See the module docstring.

    ``catalogs`` reuses the catalog index across solves (built once per distinct catalog instead
    of on every call; the plan is the same either way)."""
    return _Solver(problem, catalogs).solve()


__all__ = ["format_amount", "format_limit", "solve"]
