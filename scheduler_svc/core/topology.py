"""Topology: the domains a bin is in or could be pinned to, the domains a spread counts, and how
many copies topology spread, pod affinity and anti-affinity allow in a domain."""

from __future__ import annotations

from scheduler_svc.core.instance_fit import InstanceFit
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_ZONE,
    Requirements,
)
from scheduler_svc.core.solver_state import INF, Bin, Group, PodClass, Pool, Spread
from scheduler_svc.core.taints import first_untolerated


class Topology(InstanceFit):
    """Domains, and the copies topology spread and pod (anti-)affinity allow in one."""

    def _candidates(self, b: Bin, key: str, requirements: Requirements) -> list[str]:
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

    def _existing_domains(self, cls: PodClass, spread: Spread) -> frozenset[object]:
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

    def _counted_reaches(
        self, cls: PodClass, pool: Pool, spread: Spread
    ) -> list[tuple[Requirements, int]]:
        """The requirements and types through which ``pool``'s domains count for the spread's
        minimum, one pair per node-affinity term of the pod the pool can meet (a node matching
        any of the ORed terms counts, as in kube-scheduler), under the spread's node affinity
        and taint policies; none when they do not count."""
        _, _, reason = self._fit_pool(cls, pool)
        if reason is not None and reason.startswith("taint:"):
            if spread.taints_honor:
                return []
            # nodeTaintsPolicy Ignore (the default): the domains of a pool whose taint the pod
            # does not tolerate still count, with 0 pods in them.
            return self._admitted_terms(cls, pool)[0]
        if reason is not None:
            return []
        if not spread.affinity_honor:
            # nodeAffinityPolicy Ignore: every domain the pool reaches counts, not only those
            # the pod's node affinity allows.
            return [(pool.requirements, pool.bits)]
        needed = [o + r for o, r in zip(pool.overhead, cls.request, strict=True)]
        fitting = self.catalog.fits(needed)
        return [
            (term, bits & fitting)
            for term, bits in self._admitted_terms(cls, pool)[0]
            if bits & fitting
        ]

    def _universe(self, cls: PodClass, spread: Spread) -> tuple[object, ...]:
        """The domains a spread counts for its minimum: eligible existing nodes' values plus
        what compatible NodePools can launch into."""
        ident = (cls.id, spread.key)
        cached = self._universe_cache.get(ident)
        if cached is not None:
            return cached
        values: set[object] = set(self._existing_domains(cls, spread))
        for pool in self.pools:
            for term, bits in self._counted_reaches(cls, pool, spread):
                values |= self._domains_reached(spread.key, term, bits)
        result = tuple(sorted(values, key=str))
        self._universe_cache[ident] = result
        return result

    def _domains_reached(self, key: str, term: Requirements, bits: int) -> set[object]:
        """The values of ``key`` new nodes of types ``bits`` under ``term`` can have."""
        values: set[object] = set()
        if key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
            zones = term.get(LABEL_ZONE)
            capacity_types = term.get(LABEL_CAPACITY_TYPE)
            for (zone, capacity_type), pair_bits in self.catalog.zone_capacity_bits.items():
                if (
                    pair_bits & bits
                    and (zones is None or zones.allows(zone))
                    and (capacity_types is None or capacity_types.allows(capacity_type))
                ):
                    values.add(zone if key == LABEL_ZONE else capacity_type)
            return values
        value_set = term.get(key)
        finite = value_set.finite_values() if value_set is not None else None
        if finite:
            values.update(finite)
        elif key in self.catalog.label_index:
            for value, value_bits in self.catalog.label_index[key].items():
                if value_bits & bits:
                    values.add(value)
        return values

    def _topology_cap(self, b: Bin, cls: PodClass, key: str, domain: object) -> int:  # noqa: PLR0912 - one branch per constraint kind reads best
        cap = INF
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

    def _first_group(self, cls: PodClass, key: str) -> Group | None:
        for spread in cls.spreads:
            if spread.key == key:
                return self.groups[spread.group]
        for gid in cls.matched_groups:
            if self.groups[gid].key == key:
                return self.groups[gid]
        return None

    def _spread_domains(self, head: PodClass, pool: Pool, bits: int) -> tuple[str, list[str]]:
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
