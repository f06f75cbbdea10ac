"""Which instance types can hold a pod class: under a NodePool (taints, requirements, one pod
with DaemonSet overhead, and why not), on an existing node, on an open NodeClaim, and how many
copies keep a NodePool's minValues."""

from __future__ import annotations

from scheduler_svc.core.catalog_index import iter_bits
from scheduler_svc.core.model import MinValuesPolicy
from scheduler_svc.core.requirements import LABEL_HOSTNAME, Requirements
from scheduler_svc.core.solver_setup import SolverSetup
from scheduler_svc.core.solver_state import Bin, PodClass, Pool, format_amount
from scheduler_svc.core.taints import first_untolerated


class InstanceFit(SolverSetup):
    """Instance types that hold a class under a NodePool, on a node or on an open claim."""

    def _fit_pool(self, cls: PodClass, pool: Pool) -> tuple[Requirements | None, int, str | None]:
        """(the pod's requirements under this pool, the types that hold one pod, why not)."""
        ident = (cls.id, pool.index)
        cached = self._pool_fit.get(ident)
        if cached is not None:
            return cached
        result = self._fit_pool_uncached(cls, pool)
        self._pool_fit[ident] = result
        return result

    def _fit_pool_uncached(
        self, cls: PodClass, pool: Pool
    ) -> tuple[Requirements | None, int, str | None]:
        name = pool.nodepool.name
        taint = first_untolerated(
            cls.sample.tolerations, pool.taints, preferences=cls.avoids_preferred_taints
        )
        if taint is not None:
            return None, 0, f"taint:{taint.describe()}"
        compatible, conflicts = self._admitted_terms(cls, pool)
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

    def _admitted_terms(
        self, cls: PodClass, pool: Pool
    ) -> tuple[list[tuple[Requirements, int]], list[str]]:
        """The pod's node-affinity terms a new node of ``pool`` can meet, each merged with the
        pool's requirements with the pool's types compatible with it, in the pod's order; and
        why each other term cannot be met."""
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
        return compatible, conflicts

    def _static_existing(self, b: Bin, cls: PodClass) -> Requirements | None:
        ident = (b.id, cls.id)
        if ident in self._static_node:
            return self._static_node[ident]
        node = b.node
        assert node is not None
        result: Requirements | None = None
        if (
            first_untolerated(
                cls.sample.tolerations, node.taints, preferences=cls.avoids_preferred_taints
            )
            is None
        ):
            for term in cls.node_terms:
                if term.matches(node.labels):
                    result = term
                    break
        self._static_node[ident] = result
        return result

    def _static_claim(self, b: Bin, cls: PodClass) -> tuple[Requirements, int] | None:
        assert b.pool is not None
        # The answer depends on the claim's target type too: claims with equal requirements
        # may target different types (one that cannot hold the class, one that can).
        ident = (b.requirements, b.target, cls.id)
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

    @staticmethod
    def _limited_dimensions(pool: Pool) -> list[int]:
        limits = pool.nodepool.limits
        return [d for d, lim in ((0, limits.cpu_millis), (1, limits.memory_bytes)) if lim]

    def _kept_types(self, pool: Pool, fit: int, target: int) -> int:
        """The types a closed claim of ``pool`` targeting ``target`` keeps of ``fit`` (those
        that hold its pods): in a pool with limits, only those no bigger than the target in
        the limited resources (so the reservation stays the target's), and the target."""
        limited = self._limited_dimensions(pool)
        if not limited:
            return fit | (1 << target)
        return (fit & self._no_bigger_than(tuple(limited), target)) | (1 << target)

    def _no_bigger_than(self, limited: tuple[int, ...], target: int) -> int:
        """The catalog's types no bigger than ``target`` in the ``limited`` resources. Memoised:
        the minValues check asks it for every count it tries on a claim."""
        ident = (limited, target)
        cached = self._no_bigger_cache.get(ident)
        if cached is None:
            capacities = self.catalog.capacity
            bound = [capacities[target][d] for d in limited]
            cached = 0
            for p, capacity in enumerate(capacities):
                if all(capacity[d] <= most for d, most in zip(limited, bound, strict=True)):
                    cached |= 1 << p
            self._no_bigger_cache[ident] = cached
        return cached

    def _min_values_cap(self, b: Bin, cls: PodClass, cap: int, bits: int) -> int:
        """The most copies that keep enough instance types for the claim's minValues. The
        types counted are those the claim keeps when it closes (``_kept_types``: in a pool
        with limits, none bigger than its target), so a claim never closes short of them.
        Under ``BestEffort`` a claim's first pod lowers them to what the types holding it
        offer (Karpenter relaxes them as it opens a NodeClaim); later pods keep the lowered
        values."""
        pool = b.pool
        assert pool is not None
        limited = bool(self._limited_dimensions(pool))

        def types_holding(count: int) -> int:
            needed = [u + r * count for u, r in zip(b.used, cls.request, strict=True)]
            fit = bits & self.catalog.fits(needed)
            return self._kept_types(pool, fit, b.target) if limited and fit else fit

        if not b.pods and self.problem.min_values_policy is MinValuesPolicy.BEST_EFFORT:
            first = types_holding(1)
            if first and self._min_values_unmet(b.min_values, first) is not None:
                b.min_values = tuple(
                    (key, min(wanted, self._distinct_values(key, first)))
                    for key, wanted in b.min_values
                )

        def ok(count: int) -> bool:
            return self._min_values_unmet(b.min_values, types_holding(count)) is None

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
                self._min_values_unmet(b.min_values, types_holding(1)) or "minValues"
            )
        return low

    @staticmethod
    def _host_port_taken(b: Bin, cls: PodClass, requirements: Requirements) -> str | None:
        """Why the class's host ports cannot be bound on ``b`` (None: they can): a pod already
        there binds one, or a DaemonSet that will run on the new node (one whose node terms
        the claim, narrowed to ``requirements``, still admits) binds it first."""
        for port in cls.host_ports:
            if any(port.conflicts(other) for other in b.ports):
                return f"hostPort {port.describe()} is already bound on {b.name}"
            if b.pool is None:
                continue
            for daemon in b.pool.daemon_ports:
                if any(port.conflicts(other) for other in daemon.host_ports) and any(
                    term.conflict(requirements) is None for term in daemon.node_terms
                ):
                    return f"hostPort {port.describe()} taken by DaemonSet {daemon.name}"
        return None
