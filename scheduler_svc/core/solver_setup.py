"""Solver set-up: request vectors, NodePools (with DaemonSet overhead and what already runs),
equivalence classes of pending pods with their constraints compiled into topology groups, and
existing nodes as bins."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler_svc.core.catalog_index import (
    BASE_DIMENSIONS,
    CatalogCache,
    CatalogIndex,
    resource_vector,
)
from scheduler_svc.core.model import (
    NamespaceScope,
    OfferingOption,
    Pod,
    Resources,
    SchedulingInput,
    UnschedulablePod,
    WhenUnsatisfiable,
)
from scheduler_svc.core.requirements import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.reservations import ReservationLedger
from scheduler_svc.core.solver_state import (
    AffinityRef,
    Bin,
    DaemonPorts,
    Group,
    PodClass,
    Pool,
    Soft,
    Spread,
)
from scheduler_svc.core.taints import first_untolerated

_NO_RESOURCES = Resources()


def _constraints(pod: Pod) -> tuple[object, ...]:
    """Everything but the request that decides where a pod may go: pods equal in it and in
    their request share a class."""
    return (
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


class SolverSetup:
    """The solver's state for one solve, built from the problem; the classes below add the
    steps that work on it (fit, topology, pricing, packing; ``solver._Solver`` runs them)."""

    def __init__(self, problem: SchedulingInput, catalogs: CatalogCache | None = None) -> None:
        self.problem = problem
        extended = sorted(
            {name for pod in problem.pods for c in pod.containers for name, _ in c.extended}
            | {
                name
                for pod in (*problem.pods, *problem.daemonsets)
                if pod.init_containers or pod.overhead.extended
                for name, _ in pod.requests().extended
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
        self.groups: list[Group] = []
        self.group_ids: dict[tuple[str, Requirements, NamespaceScope], int] = {}
        self.inverse: list[Group] = []
        self.inverse_ids: dict[tuple[str, Requirements, NamespaceScope], int] = {}
        self.bins: list[Bin] = []
        self.claims: list[Bin] = []
        self.unschedulable: list[UnschedulablePod] = []
        self.pools = self._build_pools()
        self.classes = self._build_classes(problem.pods)
        self._collect_running()
        self._static_claim_cache: dict[
            tuple[Requirements, int, int], tuple[Requirements, int] | None
        ] = {}
        self._static_node: dict[tuple[int, int], Requirements | None] = {}
        self._pool_fit: dict[tuple[int, int], tuple[Requirements | None, int, str | None]] = {}
        self._claim_requirement_cache: dict[tuple[Requirements, int], tuple[Requirement, ...]] = {}
        self._launchable: dict[int, tuple[tuple[OfferingOption, ...], Requirements]] = {}
        self._existing_domain_cache: dict[object, frozenset[object]] = {}
        self._universe_cache: dict[tuple[int, str], tuple[object, ...]] = {}
        self._targets: dict[tuple[int, int, Requirements], int] = {}
        # (pool, head's types) -> the targets whose claims keep the pool's minValues.
        self._min_values_targets: dict[tuple[int, int], int] = {}
        # (limited resources, target) -> the types no bigger than it in them (_kept_types).
        self._no_bigger_cache: dict[tuple[tuple[int, ...], int], int] = {}
        # Reserved offerings' free instances, taken as claims close (core.reservations).
        self.reservations = ReservationLedger(self.catalog)
        self.last_failure = ""
        self._blocked_by_constraint = False
        # A lower bound on every waiting class's request, per resource (set per round).
        self._smallest: list[int] = []
        # Set per solve (relaxed classes) and per NodePool being provisioned (demand, epoch).
        self._extra: list[PodClass] = []
        self._demand: list[int] = []
        self._epoch = 0

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

    def _build_pools(self) -> list[Pool]:
        pools: list[Pool] = []
        ordered = sorted(self.problem.nodepools, key=lambda p: (-p.weight, p.name))
        for index, nodepool in enumerate(ordered):
            labels = nodepool.node_labels()
            requirements = Requirements.of(nodepool.requirements).intersect(
                Requirements.from_labels(labels)
            )
            overhead = [0] * len(self.dimensions)
            daemon_ports: list[DaemonPorts] = []
            for daemon in self.problem.daemonsets:
                if first_untolerated(daemon.tolerations, nodepool.taints) is not None:
                    continue
                daemon_terms = self._node_terms(daemon, [])
                if not any(term.conflict(requirements) is None for term in daemon_terms):
                    continue
                for d, amount in enumerate(self._vector(daemon.requests())):
                    overhead[d] += amount
                if daemon.host_ports:
                    daemon_ports.append(
                        DaemonPorts(daemon.name, daemon.host_ports, tuple(daemon_terms))
                    )
            bits = self.catalog.compatible(requirements) & self.catalog.fits(overhead)
            used = [0] * len(self.dimensions)
            count = 0
            for node in self.problem.nodes:
                if node.nodepool() == nodepool.name:
                    count += 1
                    for d, amount in enumerate(self._vector(node.capacity or node.allocatable)):
                        used[d] += amount
            pools.append(
                Pool(
                    index,
                    nodepool,
                    requirements,
                    nodepool.taints,
                    tuple(overhead),
                    bits,
                    used,
                    count,
                    tuple((r.key, r.min_values) for r in nodepool.requirements if r.min_values),
                    tuple(daemon_ports),
                )
            )
        return pools

    def _distinct_values(self, key: str, bits: int) -> int:
        """How many distinct values of label ``key`` the types in ``bits`` have."""
        by_value = self.catalog.label_index.get(key, {})
        return sum(1 for value_bits in by_value.values() if value_bits & bits)

    def _min_values_unmet(self, min_values: tuple[tuple[str, int], ...], bits: int) -> str | None:
        """The first minValues requirement the types in ``bits`` cannot meet (None: all met)."""
        for key, wanted in min_values:
            have = self._distinct_values(key, bits)
            if have < wanted:
                return f"minValues {wanted} for {key} (only {have} fit)"
        return None

    @staticmethod
    def _node_terms(pod: Pod, softs: Sequence[Soft]) -> list[Requirements]:
        base = Requirements.from_labels(pod.node_selector)
        if pod.volume_zones:
            base = base.intersect(
                Requirements.of([Requirement(LABEL_ZONE, Operator.IN, tuple(pod.volume_zones))])
            )
        # Only the heaviest preferred node term still standing applies (Karpenter: "select
        # heaviest preference and treat as a requirement"); relaxing drops it for the next.
        preferred = next((s.node_requirements for s in softs if s.node_requirements), None)
        if preferred is not None:
            base = base.intersect(preferred)
        if not pod.required_node_affinity:
            return [base]
        # Each relaxed "required-term" soft dropped the first term still standing.
        standing = 1 + sum(s.kind == "required-term" for s in softs)
        return [
            base.intersect(Requirements.of(term)) for term in pod.required_node_affinity[-standing:]
        ]

    def _group(self, key: str, selector: Requirements, namespaces: NamespaceScope) -> int:
        ident = (key, selector, namespaces)
        gid = self.group_ids.get(ident)
        if gid is None:
            gid = len(self.groups)
            self.groups.append(Group(key, selector, namespaces, self.problem.namespaces))
            self.group_ids[ident] = gid
        return gid

    def _inverse_group(self, key: str, selector: Requirements, namespaces: NamespaceScope) -> int:
        ident = (key, selector, namespaces)
        iid = self.inverse_ids.get(ident)
        if iid is None:
            iid = len(self.inverse)
            self.inverse.append(Group(key, selector, namespaces, self.problem.namespaces))
            self.inverse_ids[ident] = iid
        return iid

    def _build_classes(self, pods: Iterable[Pod]) -> list[PodClass]:
        """One class per request and constraints (compiled once for all its pods), matched
        against every topology group, largest first."""
        classes = [
            self._new_class(index, members, request, family)
            for index, (members, request, family) in enumerate(self._alike(pods))
        ]
        # Groups are known only once every class is compiled: match each class against all.
        for cls in classes:
            self._match_groups(cls)
        classes.sort(key=self._class_order)
        return classes

    def _alike(self, pods: Iterable[Pod]) -> list[tuple[list[Pod], tuple[int, ...], int]]:
        """Pods with the same request and constraints, in order of first appearance (pods by
        namespace and name): (pods, request, family). A family is the classes whose pods
        differ only in requests."""
        by_key: dict[object, tuple[list[Pod], tuple[int, ...], int]] = {}
        families: dict[object, int] = {}
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
            request = self._requests[id(pod)]
            constraints = _constraints(pod)
            key = (request, constraints)
            alike = by_key.get(key)
            if alike is None:
                family = families.setdefault(constraints, len(families))
                by_key[key] = alike = ([], request, family)
            alike[0].append(pod)
        return list(by_key.values())

    def _new_class(
        self, index: int, members: list[Pod], request: tuple[int, ...], family: int
    ) -> PodClass:
        """A class of ``members``, its preferences listed and its constraints compiled."""
        cls = PodClass(index, members, request)
        cls.family = family
        cls.softs = self._softs(cls.sample)
        self._compile(cls)
        return cls

    def _class_order(self, cls: PodClass) -> tuple[object, ...]:
        # Largest first (cpu, then memory), as kube-scheduler-minded bin packers do.
        return (tuple(-x for x in cls.request[:2]), -len(cls.keys), cls.sample.key)

    def _softs(self, pod: Pod) -> list[Soft]:
        """Preferences in the order they are relaxed (first dropped first), as Karpenter's
        Preferences.Relax: required node-affinity terms but the last (new nodes take the first
        term that fits; dropping it moves them on to the next, as removeRequiredNodeAffinityTerm
        does), preferred pod affinity and anti-affinity (lightest first: every term applies at once,
        decision 0002), preferred node affinity (one term applies at a time, heaviest first;
        Karpenter's NewPodRequirements and removePreferredNodeAffinityTerm), ScheduleAnyway
        spreads, and last the NodePools' PreferNoSchedule taints (toleratePreferNoSchedule)."""
        softs = [
            Soft(0, "required-term", required_term=Requirements.of(term))
            for term in pod.required_node_affinity[:-1]
        ]
        softs += [
            Soft(w.weight, "affinity", term=w.term)
            for w in sorted(pod.preferred_pod_affinity, key=lambda w: w.weight)
        ]
        softs += [
            Soft(w.weight, "anti", term=w.term)
            for w in sorted(pod.preferred_pod_anti_affinity, key=lambda w: w.weight)
        ]
        softs += [
            Soft(p.weight, "node", node_requirements=Requirements.of(p.requirements))
            for p in sorted(pod.preferred_node_affinity, key=lambda p: -p.weight)
        ]
        softs += [
            Soft(0, "spread", spread=s)
            for s in pod.topology_spread
            if s.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
        ]
        if any(
            first_untolerated(pod.tolerations, p.taints, preferences=True) is not None
            and first_untolerated(pod.tolerations, p.taints) is None
            for p in self.problem.nodepools
        ):
            softs.append(Soft(0, "taints"))
        return softs

    def _compile(self, cls: PodClass) -> None:
        pod = cls.sample
        cls.node_terms = self._node_terms(pod, cls.softs)
        cls.avoids_preferred_taints = any(s.kind == "taints" for s in cls.softs)
        own_namespace = NamespaceScope(frozenset({pod.namespace}))
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
                Spread(
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
                namespaces = term.scope(pod.namespace)
                selector = term.label_selector.requirements
                refs.append(
                    AffinityRef(
                        self._group(term.topology_key, selector, namespaces),
                        term.topology_key,
                        selector.matches(cls.labels)
                        and namespaces.includes(cls.namespace, self.problem.namespaces),
                        f"{what} on {term.topology_key}",
                    )
                )
        for term in pod.pod_anti_affinity:
            cls.inverse_owned.append(
                self._inverse_group(
                    term.topology_key, term.label_selector.requirements, term.scope(pod.namespace)
                )
            )

    def _match_groups(self, cls: PodClass) -> None:
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
            b = Bin(
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
                    ident = (
                        term.topology_key,
                        term.label_selector.requirements,
                        term.scope(pod.namespace),
                    )
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

    def _domain(self, b: Bin, key: str, requirements: Requirements | None = None) -> object:
        if key == LABEL_HOSTNAME:
            return b.id
        if b.node is not None:
            return b.node.labels.get(key)
        value_set = (requirements or b.requirements).get(key)
        return value_set.single_value() if value_set is not None else None
