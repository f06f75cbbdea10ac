"""A second opinion for claims whose pods spread across zones: the integer program packs them
together with the pods that only need room, each spread pod kept in its zone.

A Deployment spread over zones (``topologySpreadConstraints`` on ``topology.kubernetes.io/zone``)
is common, and the greedy pass handles it one pod at a time: each spread pod pins the claim it
joins to a zone, so the claims of a batch end up one per zone, each sized for what reached it
first. With six zones, 30 web pods spread over them and 19 other pods, that was 14 nodes for
$0.74/h where about $0.58/h holds them all. ``Repacking`` cannot help: it repacks only claims
whose every pod needs room alone.

What keeps every zone-level rule true is where each pod's zone is, not which node in the zone
holds it: a spread over zones, a pod (anti-)affinity over zones and the terms that count a pod
all read per-zone counts. So a pod whose every term is on the zone key (``PodClass.keys`` is
exactly the zone) may move to any node **of the same zone**. Such pods are *pinned*; pods that
only need room are *free* and may go to any zone their claims allowed.

The program of ``integer_packing`` has no notion of zones, so zones become resources: each zone
holding pinned pods is one more dimension, a pinned pod asks one unit of its zone's, and a
node option priced in that zone offers as much of it as it has room for pods, and none of the
others (so the zone dimension says where a pinned pod may go, never how many: the pods row
already does, and the program's rows stay as well scaled as before). Options
are every type under each claim requirement of the group (the same NodePool and requirements
but for the zone), priced in its zones; a pinned pod then fits only the options of its zone,
and a free pod every option. The new claims take their option's requirements. As in
``Repacking``, they replace the greedy claims only when they cost less (and keep the pool's
limits), so the plan never gets dearer.

Left to the greedy pass: classes with preferences, host ports or more than one node-affinity
term, pods whose own node affinity names zones, classes with a term on another key (hostname
spread or anti-affinity), NodePools with minValues, and spread pods a NodePool's limit left
waiting (``Repacking``'s limit repack places only pods that need room alone).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from scheduler_svc.core.integer_packing import (
    NodeOption,
    PackedNode,
    cheapest_packing,
    cost_lower_bound,
    packing_cost,
    useful_options,
)
from scheduler_svc.core.repacking import Repacking
from scheduler_svc.core.requirements import LABEL_ZONE, Requirements
from scheduler_svc.core.solver_state import Bin, PodClass, Pool

_SAVING_EPSILON = 1e-9
_OPTIONS_PER_VARIANT = 8
_SMALLEST_PER_VARIANT = 3


@dataclass(frozen=True)
class _Variant:
    """One claim requirement of a group: the types it admits (``bits``), its priced positions
    and the zone dimension its options offer (-1: none, its pods are free only)."""

    requirements: Requirements
    bits: int
    positions: list[int]
    options: list[NodeOption]
    zone_dimension: int


def _likely_options(
    requests: list[tuple[int, ...]], demand: list[int], options: list[NodeOption]
) -> list[int]:
    """The options of one variant worth giving the program: those no other dominates, at most
    ``_OPTIONS_PER_VARIANT`` of them, cheapest per share of the group's demand they hold first,
    and the ``_SMALLEST_PER_VARIANT`` cheapest outright (for what is left over). The variants
    multiply the options: over a few thousand the program's LP alone took most of a second
    for 70 pods, and all of those kept reach the program (``_repack_zones``)."""
    useful = useful_options(requests, options)

    def per_share(index: int) -> float:
        room = options[index].allocatable
        share = min((room[d] / need for d, need in enumerate(demand) if need > 0), default=0.0)
        return options[index].price_per_hour / share if share > 0 else float("inf")

    by_share = sorted(useful, key=per_share)[:_OPTIONS_PER_VARIANT]
    cheapest = sorted(useful, key=lambda i: options[i].price_per_hour)[:_SMALLEST_PER_VARIANT]
    return sorted({*by_share, *cheapest})


def without_zone(requirements: Requirements) -> Requirements:
    """``requirements`` less the zone: the part claims of one group share."""
    return Requirements(tuple((k, v) for k, v in requirements.items if k != LABEL_ZONE))


class ZoneRepacking(Repacking):
    """Repacks groups of claims holding zone-pinned pods (module docstring)."""

    def _improve_claims(self) -> None:
        super()._improve_claims()
        if not self.packing_settings.enabled:
            return
        owner, pinned = self._zone_movable()
        if not pinned:
            return
        for (pool_index, _), bins in self._zone_groups(owner, pinned).items():
            pods = sum(len(b.pods) for b in bins)
            if len(bins) > 1 and pods <= self.packing_settings.max_pods:
                self._repack_zones(self.pools[pool_index], bins, owner, pinned)

    def _zone_movable(self) -> tuple[dict[str, PodClass], frozenset[str]]:
        """Pod key -> class for the pods this pass may move, and the pinned ones among them."""
        owner: dict[str, PodClass] = {}
        pinned: set[str] = set()
        for cls in self.classes:
            if cls.host_ports or cls.softs or len(cls.node_terms) != 1:
                continue
            if cls.node_terms[0].get(LABEL_ZONE) is not None:
                continue
            if cls.keys and cls.keys != [LABEL_ZONE]:
                continue
            for pod in cls.pods:
                owner[pod.key] = cls
                if cls.keys:
                    pinned.add(pod.key)
        return owner, frozenset(pinned)

    def _zone_groups(
        self, owner: dict[str, PodClass], pinned: frozenset[str]
    ) -> dict[tuple[int, Requirements], list[Bin]]:
        """New claims of NodePools without minValues whose pods may all move, grouped by pool
        and requirements less the zone; only groups holding a pinned pod (the others were
        ``Repacking``'s)."""
        groups: dict[tuple[int, Requirements], list[Bin]] = {}
        with_pinned: set[tuple[int, Requirements]] = set()
        for b in self.claims:
            pool = b.pool
            if pool is None or pool.min_values or not b.pods:
                continue
            if not all(key in owner for key in b.pods):
                continue
            key = (pool.index, without_zone(b.requirements))
            if any(pod in pinned for pod in b.pods):
                zones = b.requirements.get(LABEL_ZONE)
                if zones is None or zones.single_value() is None:
                    continue  # not expected: a zone-keyed pod pins its claim's zone
                with_pinned.add(key)
            groups.setdefault(key, []).append(b)
        return {key: bins for key, bins in groups.items() if key in with_pinned}

    def _variants(
        self, pool: Pool, bins: list[Bin], pinned: frozenset[str]
    ) -> tuple[list[_Variant], dict[str, int]]:
        """One variant per distinct claim requirement of ``bins``, and each pinned zone's
        dimension (after the catalog's)."""
        zone_dimension: dict[str, int] = {}
        for b in bins:
            if any(pod in pinned for pod in b.pods):
                zone = self._single_zone(b.requirements)
                zone_dimension.setdefault(zone, len(self.dimensions) + len(zone_dimension))
        variants = []
        for requirements in dict.fromkeys(b.requirements for b in bins):
            bits, _, positions, options = self._node_options(pool, requirements)
            zones = requirements.get(LABEL_ZONE)
            single = zones.single_value() if zones is not None else None
            dimension = zone_dimension.get(single, -1) if single is not None else -1
            variants.append(_Variant(requirements, bits, positions, options, dimension))
        return variants, zone_dimension

    @staticmethod
    def _single_zone(requirements: Requirements) -> str:
        zones = requirements.get(LABEL_ZONE)
        zone = zones.single_value() if zones is not None else None
        assert zone is not None  # _zone_groups keeps only claims pinned to one zone
        return zone

    def _repack_zones(
        self,
        pool: Pool,
        bins: list[Bin],
        owner: dict[str, PodClass],
        pinned: frozenset[str],
    ) -> None:
        variants, zone_dimension = self._variants(pool, bins, pinned)
        extra, width = len(zone_dimension), len(self.dimensions)
        pods_by_shape: dict[tuple[int, ...], list[str]] = {}
        for b in bins:
            zone = self._single_zone(b.requirements) if b.requirements.get(LABEL_ZONE) else None
            for key in b.pods:
                marks = [0] * extra
                if key in pinned and zone is not None:
                    marks[zone_dimension[zone] - width] = 1
                pods_by_shape.setdefault((*owner[key].request, *marks), []).append(key)
        shapes = list(pods_by_shape)
        counts = [len(pods_by_shape[shape]) for shape in shapes]
        options: list[NodeOption] = []
        placements: list[tuple[_Variant, int]] = []
        requests = list({owner[key].request for b in bins for key in b.pods})
        demand = [sum(owner[key].request[d] for b in bins for key in b.pods) for d in range(width)]
        for variant in variants:
            for kept in _likely_options(requests, demand, variant.options):
                position, option = variant.positions[kept], variant.options[kept]
                room = [0] * extra
                if variant.zone_dimension >= 0:
                    pods_room = option.allocatable[self.dimensions.index("pods")]
                    room[variant.zone_dimension - width] = pods_room
                options.append(NodeOption((*option.allocatable, *room), option.price_per_hour))
                placements.append((variant, position))
        greedy = sum(self._offerings(b)[0].price_per_hour for b in bins)
        if not options or cost_lower_bound(shapes, counts, options) >= greedy - _SAVING_EPSILON:
            return
        # Every option goes to the program: the LP's ranking (``max_types``) would keep the types
        # cheapest per unit and drop the smaller ones a zone's few pods need (a p5.48xlarge
        # kept for nine pods, the p5.4xlarge that holds them dropped: $58/h where $9.4 does).
        settings = dataclasses.replace(
            self.packing_settings, max_types=max(self.packing_settings.max_types, len(options))
        )
        packed = cheapest_packing(shapes, counts, options, settings)
        if not packed or packing_cost(packed, options) >= greedy - _SAVING_EPSILON:
            return
        if not self._within_limits(pool, bins, [placements[n.option][1] for n in packed]):
            return
        self._replace_zoned(
            pool, bins, packed=packed, placements=placements, pods_by_shape=pods_by_shape
        )

    def _replace_zoned(
        self,
        pool: Pool,
        bins: list[Bin],
        *,
        packed: list[PackedNode],
        placements: list[tuple[_Variant, int]],
        pods_by_shape: dict[tuple[int, ...], list[str]],
    ) -> None:
        """Claims of ``packed`` in place of ``bins`` (its pods taken from ``pods_by_shape``, in
        the program's shape order), each under its option's requirements."""
        self._give_back(pool, bins)
        next_id = max((b.id for b in self.bins), default=-1) + 1
        for node in packed:
            variant, target = placements[node.option]
            used, keys = self._take_pods(pool, node, pods_by_shape)
            self._add_claim(
                Bin(
                    next_id,
                    f"nodeclaim-{len(self.claims) + 1}",
                    self.catalog.allocatable[target],
                    used,
                    pool=pool,
                    requirements=variant.requirements,
                    bits=variant.bits,
                    target=target,
                    pods=keys,
                )
            )
            next_id += 1
