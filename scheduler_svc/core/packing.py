"""Packing into bins (decision 0002): how many copies of a class a bin takes, placing them, filling
existing nodes, and opening new NodeClaims per NodePool, each filled with a proportional slice of
every compatible class first, then largest-first (claims spread over domains filled together)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler_svc.core.pricing import Pricing
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_ZONE,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.solver_state import INF, Bin, PodClass, Pool


class Packing(Pricing):
    """Copies per bin, placing them, filling nodes, and opening new NodeClaims."""

    def _max_copies(self, b: Bin, cls: PodClass, want: int) -> tuple[int, Requirements, int]:
        """How many copies of ``cls`` fit on ``b`` now, and the bin's narrowed requirements
        and instance types if they go there: room first, then requirements and taints, host
        ports, topology, minValues, each step lowering the count or ruling the bin out."""
        cap = self._copies_with_room(b, cls, want)
        if cap is None:
            return 0, b.requirements, b.bits
        self._blocked_by_constraint = True
        narrowed = self._requirements_on(b, cls)
        if narrowed is None:
            return 0, b.requirements, b.bits
        requirements, bits = narrowed
        if cls.host_ports:
            taken = self._host_port_taken(b, cls, requirements)
            if taken is not None:
                self.last_failure = taken
                return 0, requirements, bits
            cap = min(cap, 1)
        if cls.keys:
            capped = self._topology_copies(b, cls, cap, requirements, bits)
            if capped is None:
                return 0, requirements, bits
            cap, requirements, bits = capped
        if b.pool is not None and b.pool.min_values:
            cap = self._min_values_cap(b, cls, cap, bits)
            if cap <= 0:
                # minValues count the types that hold the copies: a smaller class of the
                # family may still leave enough of them.
                self._blocked_by_constraint = False
                return 0, requirements, bits
        return cap, requirements, bits

    def _copies_with_room(self, b: Bin, cls: PodClass, want: int) -> int | None:
        """At most ``want`` copies, as many as the bin's free resources hold; None when not
        one fits (the failure names the resource, and is no constraint's: a family's other
        classes, asking less, may still fit)."""
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
                        return None
        return cap

    def _requirements_on(self, b: Bin, cls: PodClass) -> tuple[Requirements, int] | None:
        """The bin's requirements and types with the class on it: an existing node's as they
        are when its labels and taints admit the class; a new claim's narrowed by the class's
        node term. None (the failure named) when they do not admit it."""
        if b.node is not None:
            if self._static_existing(b, cls) is None:
                self.last_failure = "node affinity or taints"
                return None
            return b.requirements, b.bits
        static = self._static_claim(b, cls)
        if static is None:
            self.last_failure = "requirements"
        return static

    def _topology_copies(
        self, b: Bin, cls: PodClass, cap: int, requirements: Requirements, bits: int
    ) -> tuple[int, Requirements, int] | None:
        """``cap`` lowered to what the class's spreads and pod (anti-)affinity allow on the
        bin, with the requirements and types narrowed by the domains it pins; None when they
        allow no copy. A new claim not yet in a domain of a key is pinned to the candidate
        domain allowing the most copies (ties: the one the class's first group counts least,
        then the one the claim's target is cheapest in)."""
        for key in cls.keys:
            domain = self._domain(b, key, requirements)
            if domain is None and b.node is None and key != LABEL_HOSTNAME:
                candidates = self._candidates(b, key, requirements)
                if candidates:
                    best_value, best_cap, best_rank = "", -1, (INF, math.inf)
                    first_group = self._first_group(cls, key)
                    prices = self._target_prices(b, key, requirements)
                    for value in candidates:
                        value_cap = self._topology_cap(b, cls, key, value)
                        count = first_group.counts.get(value, 0) if first_group else 0
                        rank = (count, prices.get(value, math.inf))
                        if value_cap > best_cap or (value_cap == best_cap and rank < best_rank):
                            best_value, best_cap, best_rank = value, value_cap, rank
                    if best_cap <= 0:
                        return None
                    cap = min(cap, best_cap)
                    pin = Requirements.of([Requirement(key, Operator.IN, (best_value,))])
                    requirements = requirements.intersect(pin)
                    bits &= self.catalog.compatible(requirements)
                    continue
            cap = min(cap, self._topology_cap(b, cls, key, domain))
            if cap <= 0:
                return None
        return cap, requirements, bits

    def _target_prices(self, b: Bin, key: str, requirements: Requirements) -> dict[str, float]:
        """For a zone or capacity-type key: the price of the claim target's cheapest offering
        in each of its values the requirements admit (other keys: none)."""
        if key not in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
            return {}
        prices: dict[str, float] = {}
        zones = requirements.get(LABEL_ZONE)
        capacity_types = requirements.get(LABEL_CAPACITY_TYPE)
        for o in self.catalog.matching_offerings(b.target, zones, capacity_types):
            prices.setdefault(o.zone if key == LABEL_ZONE else o.capacity_type, o.price_per_hour)
        return prices

    def _claim_price(self, b: Bin) -> float:
        """The price of the claim target's cheapest offering its requirements admit."""
        offerings = self.catalog.matching_offerings(
            b.target, b.requirements.get(LABEL_ZONE), b.requirements.get(LABEL_CAPACITY_TYPE)
        )
        return offerings[0].price_per_hour if offerings else math.inf

    def _place(
        self, b: Bin, cls: PodClass, count: int, requirements: Requirements, bits: int
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
        if b.pool is not None:
            self._pool_demand_placed(cls, count)

    def _pool_demand_placed(self, cls: PodClass, count: int) -> None:
        demand = self._demand
        for d, amount in enumerate(cls.request):
            demand[d] -= amount * count

    def _fill(self, b: Bin, classes: Sequence[PodClass], fraction: float = 0.0) -> int:
        """Place pods of ``classes`` on ``b``: first each class's ``fraction`` of what waits
        (when set), then as many of each as fit, in class order. Returns the pods placed."""
        # Classes of one family differ only in requests: when one fails for any other reason
        # (topology, ports, requirements) they all do on this bin, so the rest are skipped.
        blocked: set[int] = set()
        placed = self._fill_fractions(b, classes, fraction, blocked) if fraction > 0 else 0
        return placed + self._fill_greedily(b, classes, blocked)

    def _fill_fractions(
        self, b: Bin, classes: Sequence[PodClass], fraction: float, blocked: set[int]
    ) -> int:
        """Each class's ``fraction`` of its waiting pods (the rounding carried over to the
        next class), as far as ``b`` holds them."""
        placed = 0
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
        return placed

    def _fill_greedily(self, b: Bin, classes: Sequence[PodClass], blocked: set[int]) -> int:
        """As many pods of each class as ``b`` holds, in class order, until it is full for
        every class still waiting."""
        placed = 0
        free = b.allocatable
        used = b.used
        smallest = self._smallest
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

    def _provision(self, classes: list[PodClass]) -> None:
        for pool in self.pools:
            candidates = [c for c in classes if c.remaining and self._fit_pool(c, pool)[2] is None]
            for c in classes:
                if c.remaining:
                    reason = self._fit_pool(c, pool)[2]
                    if reason is not None:
                        c.reasons[pool.nodepool.name] = reason
            if candidates:
                self._provision_pool(pool, candidates)

    def _provision_pool(self, pool: Pool, candidates: list[PodClass]) -> None:  # noqa: PLR0912 - one branch per outcome
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
            head_requirements, head_bits, _ = self._fit_pool(head, pool)
            key, domains = self._spread_domains(head, pool, head_bits)
            room_bits, reached = self._limit_room(pool, head_bits, max(1, len(domains)))
            if not room_bits and domains:
                key, domains = "", []
                room_bits, reached = self._limit_room(pool, head_bits, 1)
            # -1: no type within the limits, or none of them has a priced offering.
            target = self._choose_target(pool, room_bits) if room_bits else -1
            if target >= 0:
                target = self._target_keeping_min_values(pool, head_bits, room_bits, target)
            if target < 0:
                head.reasons[pool.nodepool.name] = (
                    f"NodePool {pool.nodepool.name} limit {reached} reached"
                    if reached
                    else f"NodePool {pool.nodepool.name}: no instance type that holds the pod "
                    "has a priced offering"
                )
                failed.add(head.id)
                continue
            assert head_requirements is not None  # a candidate fits the pool
            bins = self._open_bins(
                pool, target, key, domains, room_bits, head_requirements=head_requirements
            )
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

    def _open_bins(
        self,
        pool: Pool,
        target: int,
        key: str,
        domains: list[str],
        room_bits: int,
        *,
        head_requirements: Requirements,
    ) -> list[Bin]:
        """New claims targeting ``target``: one, or one pinned to each domain. A domain
        ``target`` is not offered in gets a claim of the type best there among ``room_bits``
        (the types that hold the head within the limits), as Karpenter's claim pinned to a
        zone keeps the types offered in it: the domain counts for the spread either way, and
        leaving it empty would hold every other domain at maxSkew. Offered means under the
        head's requirements (``head_requirements``: the pool's and its node term's), so a
        spot-only pod's claim in a zone targets a type with spot there."""
        pinned: list[tuple[Requirements, int]] = []
        for domain in domains:
            pin = Requirements.of([Requirement(key, Operator.IN, (domain,))])
            requirements = pool.requirements.intersect(pin)
            there = self.catalog.compatible(head_requirements.intersect(pin))
            if (there >> target) & 1:
                pinned.append((requirements, target))
            elif room_bits & there:
                alternative = self._choose_target(pool, room_bits & there)
                if alternative >= 0:
                    pinned.append((requirements, alternative))
        if len(pinned) < 2:
            pinned = [(pool.requirements, target)]
        bins: list[Bin] = []
        for requirements, claim_target in pinned:
            b = Bin(
                len(self.bins),
                f"nodeclaim-{len(self.claims) + len(bins) + 1}",
                self.catalog.allocatable[claim_target],
                list(pool.overhead),
                pool=pool,
                requirements=requirements,
                bits=pool.bits & self.catalog.compatible(requirements),
                target=claim_target,
                min_values=pool.min_values,
            )
            self.bins.append(b)
            bins.append(b)
        return bins

    def _distribute(self, bins: Sequence[Bin], cls: PodClass, want: int) -> int:
        """Place up to ``want`` copies over ``bins``; a spread class round-robin, emptiest
        domain first, so each claim's skew allowance grows as the others fill. Among domains
        alike, the claim whose target is cheapest there goes first: a lone spread pod goes to
        the cheapest zone, not the first by name."""
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
            order: Sequence[Bin] = bins
            share = want
            if group is not None:
                order = sorted(
                    bins,
                    key=lambda b: (
                        group.counts.get(self._domain(b, group.key), 0),
                        self._claim_price(b),
                        b.id,
                    ),
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

    def _fill_set(self, bins: Sequence[Bin], classes: Sequence[PodClass], fraction: float) -> int:
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
