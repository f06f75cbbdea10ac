"""A second opinion on the greedy claims: pods that only need room are packed again by the
integer program of ``integer_packing`` and take its nodes when they are cheaper (decision 0002).

Which claims: new NodeClaims whose every pod belongs
to a class with no topology term (spread, pod (anti-)affinity, or a term that counts it), no
host port, no preference and one node-affinity term. They are grouped by NodePool and claim
requirements (so every pod of a group accepted those requirements); a group of at most
``PackingSettings.max_pods`` pods is solved again, over every instance type the pool and the
requirements admit, each at its cheapest offering there. The greedy claims stay unless the new
packing costs less, so the plan is never dearer than the greedy one, and, in a NodePool with
limits, unless the new nodes fit the limits the greedy claims fitted (nodes, and each claim's
type capacity, as the greedy pass counts them). In a NodePool with minValues, a new packing
is taken only when each of its claims keeps, among the types that hold its pods, enough
distinct values for every minValues the greedy claims kept (the greedy pass's own check,
``_min_values_unmet``); the cheapest packing that does wins, else the greedy claims stay.

Binding limits: the greedy pass opens claims one at a time, each of the type cheapest per unit
of what is left, and may reach a NodePool's limit (say ``nodes: 2`` on two one-pod nodes) with
pods left over that fewer, larger nodes would have held. When pods that only need room were
left unschedulable because a limit was reached, their group (placed and unplaced pods alike)
is solved again by ``pattern_packing.limited_packing``, whose program keeps the new nodes
within what the limits leave; the pods are placed when it finds nodes for all of them, at
whatever they cost (a placed pod beats a cheaper pending one).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.integer_packing import (
    NodeOption,
    PackedNode,
    PackingSettings,
    cheapest_packing,
    cost_lower_bound,
    packing_cost,
)
from scheduler_svc.core.model import SchedulingInput, UnschedulablePod
from scheduler_svc.core.packing import Packing
from scheduler_svc.core.pattern_packing import LimitRoom, downsized, limited_packing
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_ZONE, Requirements
from scheduler_svc.core.solver_state import Bin, PodClass, Pool

_SAVING_EPSILON = 1e-9


@dataclass
class _Claim:
    """A claim of the first-fit-decreasing packing: requests so far, types that still hold
    them, pods per shape."""

    used: list[int]
    types: int
    counts: list[int]


class Repacking(Packing):
    """Replaces groups of greedy claims by the integer program's cheaper packing."""

    def __init__(
        self,
        problem: SchedulingInput,
        catalogs: CatalogCache | None = None,
        packing: PackingSettings | None = None,
    ) -> None:
        super().__init__(problem, catalogs)
        self.packing_settings = packing if packing is not None else PackingSettings()

    def _room_only(self) -> dict[str, PodClass]:
        """Pod key -> class, for the classes whose pods only need room."""
        owner: dict[str, PodClass] = {}
        for cls in self.classes:
            if cls.keys or cls.host_ports or cls.softs or len(cls.node_terms) != 1:
                continue
            for pod in cls.pods:
                owner[pod.key] = cls
        return owner

    def _improve_claims(self) -> None:
        """Re-pack each eligible group of claims (see the module docstring)."""
        if not self.packing_settings.enabled:
            return
        owner = self._room_only()
        groups: dict[tuple[int, Requirements], list[Bin]] = {}
        for b in self.claims:
            pool = b.pool
            if pool is None:
                continue
            if b.pods and all(key in owner for key in b.pods):
                groups.setdefault((pool.index, b.requirements), []).append(b)
        for (pool_index, requirements), waiting in self._limit_bound(owner).items():
            bins = groups.get((pool_index, requirements), [])
            pods = len(waiting) + sum(len(b.pods) for b in bins)
            if pods <= self.packing_settings.max_pods and self._repack_within_limits(
                self.pools[pool_index], requirements, bins, waiting, owner
            ):
                groups.pop((pool_index, requirements), None)
        for (pool_index, requirements), bins in groups.items():
            # One pod: its greedy claim already buys the cheapest type that holds it, and the
            # programs would cost a live round 20 ms for nothing (bench.reaction's 1-pod case).
            if 1 < sum(len(b.pods) for b in bins) <= self.packing_settings.max_pods:
                self._repack(self.pools[pool_index], requirements, bins, owner)

    def _limit_bound(self, owner: dict[str, PodClass]) -> dict[tuple[int, Requirements], list[str]]:
        """Unschedulable pods that only need room and were refused by the first NodePool
        (by weight) whose limit they reached, grouped as claims are (pool, requirements)."""
        waiting: dict[tuple[int, Requirements], list[str]] = {}
        for refused in self.unschedulable:
            cls = owner.get(refused.pod)
            if cls is None:
                continue
            for pool in self.pools:
                name = pool.nodepool.name
                if not cls.reasons.get(name, "").startswith(f"NodePool {name} limit "):
                    continue
                requirements = self._fit_pool(cls, pool)[0]
                if requirements is not None and not pool.min_values:
                    waiting.setdefault((pool.index, requirements), []).append(refused.pod)
                break
        return waiting

    def _first_fit_decreasing(
        self,
        pool: Pool,
        *,
        bits: int,
        shapes: list[tuple[int, ...]],
        counts: list[int],
        positions: list[int],
        prices: list[float],
        min_values: tuple[tuple[str, int], ...] = (),
    ) -> list[PackedNode]:
        """Karpenter's packing of the group: pods largest first (cpu, then memory) join the
        first claim whose remaining types still hold them all, else open one; each claim buys
        its cheapest remaining type; with ``min_values``, a claim's remaining (priced) types
        must still meet them, as Karpenter's claims must. Pods
        of one shape are alike, so each claim takes as many of a shape as it can at once (the
        same result as one pod at a time)."""
        option_of = {p: i for i, p in enumerate(positions)}
        claims: list[_Claim] = []
        order = sorted(range(len(shapes)), key=lambda s: (-shapes[s][0], -shapes[s][1]))
        for s in order:
            left = counts[s]
            for claim in claims:
                if left == 0:
                    break
                left -= self._take(claim, s, shapes[s], left, min_values)
            while left:
                claim = _Claim(list(pool.overhead), bits, [0] * len(shapes))
                taken = self._take(claim, s, shapes[s], left, min_values)
                if not taken:
                    return []
                claims.append(claim)
                left -= taken
        return [
            PackedNode(
                option_of[min(self.catalog.positions(c.types), key=lambda p: prices[p])],
                tuple(c.counts),
            )
            for c in claims
        ]

    def _take(
        self,
        claim: _Claim,
        s: int,
        request: tuple[int, ...],
        most: int,
        min_values: tuple[tuple[str, int], ...] = (),
    ) -> int:
        """Put as many as ``most`` pods of ``request`` on ``claim`` as some type still holds
        (with ``min_values``: as the types still holding them meet them)."""

        def types_holding(count: int) -> int:
            needed = [u + r * count for u, r in zip(claim.used, request, strict=True)]
            types = claim.types & self.catalog.fits(needed)
            if min_values and self._min_values_unmet(min_values, types) is not None:
                return 0
            return types

        if not types_holding(1):
            return 0
        low, high = 1, most  # types_holding(low) is not empty
        while low < high:
            middle = (low + high + 1) // 2
            if types_holding(middle):
                low = middle
            else:
                high = middle - 1
        claim.types = types_holding(low)
        for d, amount in enumerate(request):
            claim.used[d] += amount * low
        claim.counts[s] += low
        return low

    def _node_options(
        self, pool: Pool, requirements: Requirements
    ) -> tuple[int, list[float | None], list[int], list[NodeOption]]:
        """The types a claim of ``pool`` under ``requirements`` may be (bits), the cheapest
        price of every type there, the priced positions and their options (room for pods:
        allocatable less the pool's DaemonSet overhead)."""
        bits = pool.bits & self.catalog.compatible(requirements)
        # Reserved offerings are left out of the program's prices (it does not count them);
        # the new claims take the room again as they close, so the plan only gets cheaper.
        prices = self.reservations.cheapest_prices(
            self.catalog,
            requirements.get(LABEL_ZONE),
            requirements.get(LABEL_CAPACITY_TYPE),
            without=self.reservations.counted,
        )
        positions = [p for p in self.catalog.positions(bits) if prices[p] is not None]
        options = [
            NodeOption(
                tuple(
                    a - o for a, o in zip(self.catalog.allocatable[p], pool.overhead, strict=True)
                ),
                prices[p] or 0.0,
            )
            for p in positions
        ]
        return bits, prices, positions, options

    def _repack_within_limits(
        self,
        pool: Pool,
        requirements: Requirements,
        bins: list[Bin],
        waiting: list[str],
        owner: dict[str, PodClass],
    ) -> bool:
        """Place ``bins``' pods and the ``waiting`` ones on nodes within what the pool's limits
        leave (module docstring); True when more of them are placed than ``bins`` held."""
        pods_by_request: dict[tuple[int, ...], list[str]] = {}
        group = [*(k for b in bins for k in b.pods), *waiting]
        for key in group:
            pods_by_request.setdefault(owner[key].request, []).append(key)
        shapes = list(pods_by_request)
        bits, _, positions, options = self._node_options(pool, requirements)
        limits = pool.nodepool.limits
        limited = [(0, limits.cpu_millis), (1, limits.memory_bytes)]
        capacities = [[self.catalog.capacity[p][d] for d, _ in limited] for p in positions]
        room = LimitRoom.of(
            None if limits.nodes is None else limits.nodes - pool.nodes + len(bins),
            [
                None
                if limit is None
                else limit
                - pool.used_capacity[d]
                + sum((b.limit_capacity or (0, 0))[d] for b in bins)
                for d, limit in limited
            ],
        )
        counts = [len(pods_by_request[shape]) for shape in shapes]
        packed = limited_packing(
            shapes,
            counts,
            options,
            capacities=capacities,
            room=room,
            settings=self.packing_settings,
        )
        if sum(sum(node.counts) for node in packed) <= sum(len(b.pods) for b in bins):
            return False
        for nodes in (downsized(packed, shapes, options), packed):
            if self._within_limits(pool, bins, [positions[node.option] for node in nodes]):
                self._replace(
                    pool,
                    requirements,
                    bins,
                    bits=bits,
                    positions=positions,
                    packed=nodes,
                    pods_by_request=pods_by_request,
                )
                self._still_waiting(pool, group, pods_by_request, owner)
                return True
        return False

    def _still_waiting(
        self,
        pool: Pool,
        group: list[str],
        left: dict[tuple[int, ...], list[str]],
        owner: dict[str, PodClass],
    ) -> None:
        """The unschedulable list once ``group``'s pods are packed within limits: those ``left``
        unplaced wait (with the limit their NodePool reached), the others are placed."""
        unplaced = {key for keys in left.values() for key in keys}
        placed = set(group) - unplaced
        known = {u.pod for u in self.unschedulable}
        name = pool.nodepool.name
        self.unschedulable = [u for u in self.unschedulable if u.pod not in placed] + [
            UnschedulablePod(key, owner[key].reasons.get(name, f"NodePool {name} limit reached"))
            for key in sorted(unplaced - known)
        ]

    def _repack(
        self, pool: Pool, requirements: Requirements, bins: list[Bin], owner: dict[str, PodClass]
    ) -> None:
        pods_by_request: dict[tuple[int, ...], list[str]] = {}
        for b in bins:
            for key in b.pods:
                pods_by_request.setdefault(owner[key].request, []).append(key)
        shapes = list(pods_by_request)
        bits, prices, positions, options = self._node_options(pool, requirements)
        counts = [len(pods_by_request[shape]) for shape in shapes]
        greedy = sum(self._offerings(b)[0].price_per_hour for b in bins)
        min_values = self._group_min_values(bins)
        if cost_lower_bound(shapes, counts, options) >= greedy - _SAVING_EPSILON:
            return  # no packing is cheaper: skip the programs (and loading numpy and HiGHS)
        priced = 0
        for p in positions:
            priced |= 1 << p
        candidates = [
            cheapest_packing(shapes, counts, options, self.packing_settings),
            self._first_fit_decreasing(
                pool,
                bits=bits & priced,
                shapes=shapes,
                counts=counts,
                positions=positions,
                prices=[p or 0.0 for p in prices],
                min_values=min_values,
            ),
        ]
        found = [
            nodes
            for nodes in candidates
            if nodes
            and self._keeps_min_values(
                pool, nodes, bits=bits, shapes=shapes, positions=positions, min_values=min_values
            )
        ]
        if not found:
            return
        packed = min(found, key=lambda nodes: packing_cost(nodes, options))
        if packing_cost(packed, options) >= greedy - _SAVING_EPSILON:
            return
        if not self._within_limits(pool, bins, [positions[node.option] for node in packed]):
            return
        self._replace(
            pool,
            requirements,
            bins,
            bits=bits,
            positions=positions,
            packed=packed,
            pods_by_request=pods_by_request,
            min_values=min_values,
        )

    @staticmethod
    def _group_min_values(bins: list[Bin]) -> tuple[tuple[str, int], ...]:
        """The minValues a repacked claim of ``bins`` must keep: per key the highest any of
        them kept. Under ``Strict`` that is the pool's; under ``BestEffort`` a claim may have
        opened with them lowered (``_min_values_cap``), and the new claims keep no less than
        the greedy claims did, so repacking never relaxes minValues further."""
        if not bins or not bins[0].min_values:
            return ()
        return tuple(
            (key, max(dict(b.min_values).get(key, 0) for b in bins))
            for key, _ in bins[0].min_values
        )

    def _keeps_min_values(
        self,
        pool: Pool,
        nodes: list[PackedNode],
        *,
        bits: int,
        shapes: list[tuple[int, ...]],
        positions: list[int],
        min_values: tuple[tuple[str, int], ...],
    ) -> bool:
        """Whether every node's claim keeps enough instance types for ``min_values``: the
        types of ``bits`` that hold its pods (with the pool's overhead) and that its closed
        claim keeps (``_kept_types``), checked as the greedy pass checks a claim
        (``_min_values_unmet``)."""
        if not min_values:
            return True
        for node in nodes:
            used = list(pool.overhead)
            for shape, count in zip(shapes, node.counts, strict=True):
                for d, amount in enumerate(shape):
                    used[d] += amount * count
            target = positions[node.option]
            kept = self._kept_types(pool, bits & self.catalog.fits(used), target)
            if self._min_values_unmet(min_values, kept) is not None:
                return False
        return True

    def _replace(
        self,
        pool: Pool,
        requirements: Requirements,
        bins: list[Bin],
        *,
        bits: int,
        positions: list[int],
        packed: list[PackedNode],
        pods_by_request: dict[tuple[int, ...], list[str]],
        min_values: tuple[tuple[str, int], ...] = (),
    ) -> None:
        """Claims of ``packed`` (its pods taken from ``pods_by_request`` by shape) in place of
        ``bins``, counted against the pool's limits as ``bins`` were."""
        self._give_back(pool, bins)
        next_id = max((b.id for b in self.bins), default=-1) + 1
        for node in packed:
            used, keys = self._take_pods(pool, node, pods_by_request)
            self._add_claim(
                Bin(
                    next_id,
                    f"nodeclaim-{len(self.claims) + 1}",
                    self.catalog.allocatable[positions[node.option]],
                    used,
                    pool=pool,
                    requirements=requirements,
                    bits=bits,
                    target=positions[node.option],
                    pods=keys,
                    min_values=min_values,
                )
            )
            next_id += 1

    @staticmethod
    def _take_pods(
        pool: Pool, node: PackedNode, pods_by_shape: dict[tuple[int, ...], list[str]]
    ) -> tuple[list[int], list[str]]:
        """What one packed node asks (with the pool's overhead) and its pods, taken from
        ``pods_by_shape`` in the program's shape order. Shapes may be longer than the
        catalog's resources (``zone_repacking``'s zone marks): those do not count."""
        used = list(pool.overhead)
        keys: list[str] = []
        for shape, count in zip(list(pods_by_shape), node.counts, strict=True):
            for d in range(len(used)):
                used[d] += shape[d] * count
            keys += pods_by_shape[shape][:count]
            del pods_by_shape[shape][:count]
        return used, keys

    def _add_claim(self, b: Bin) -> None:
        """A new claim of a repacking, counted against its pool as it closes."""
        self.bins.append(b)
        self._close_claim(b)

    def _give_back(self, pool: Pool, bins: list[Bin]) -> None:
        """Drop ``bins``, giving back what they counted against the pool (nodes, capacity,
        reservations); the claims replacing them count again as they close (`_close_claim`:
        one node each, their type's capacity)."""
        replaced = {id(b) for b in bins}
        self.bins = [b for b in self.bins if id(b) not in replaced]
        self.claims = [b for b in self.claims if id(b) not in replaced]
        pool.nodes -= len(bins)
        for b in bins:
            self.reservations.give_back(b.reservation)
            for d, reserved in enumerate(b.limit_capacity or ()):
                pool.used_capacity[d] -= reserved

    def _within_limits(self, pool: Pool, bins: list[Bin], targets: list[int]) -> bool:
        """Whether nodes of ``targets`` in place of ``bins`` keep the pool within its limits
        (nodes, and the capacity each claim counts: its type's, as ``_close_claim`` reserves)."""
        limits = pool.nodepool.limits
        if not limits.is_limited():
            return True
        if limits.nodes is not None and pool.nodes - len(bins) + len(targets) > limits.nodes:
            return False
        for d, limit in ((0, limits.cpu_millis), (1, limits.memory_bytes)):
            if limit is None:
                continue
            freed = sum((b.limit_capacity or (0, 0))[d] for b in bins)
            needed = sum(self.catalog.capacity[t][d] for t in targets)
            if pool.used_capacity[d] - freed + needed > limit:
                return False
        return True
