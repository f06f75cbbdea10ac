"""``topology.k8s.aws/zone-id`` as the solver sees it: another spelling of the zone.

Karpenter's AWS provider puts the zone id (``use1-az1``, the same physical zone in every
account) on each offering beside its zone and on every node it launches (aws/karpenter-provider-
aws ``LabelTopologyZoneID``). A zone has exactly one id, so a requirement on the id is a
requirement on the zones carrying the ids it admits, and a topology domain of ids is a domain
of zones. ``with_zone_ids_as_zones`` rewrites a problem that way before solving, so the solver's
offering, topology and pricing steps, which know zones, need no second offering label:

* a pod's, DaemonSet's or NodePool's requirement on the id becomes one on the zone (``In`` the
  zones whose id it admits; ``NotIn`` the others when a missing label satisfies it);
* a spread or pod (anti-)affinity term over the id is one over the zone (only when some ids
  are known: otherwise nothing carries the label, and the term stays as written).

The zone ids come from the catalog's offerings (``Offering.zone_id``) and from the nodes that
carry both labels; a zone without one matches no ``In`` on the id, as a node without the label
would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from scheduler_svc.core.model import (
    InstanceType,
    Node,
    NodePool,
    Pod,
    PodAffinityTerm,
    SchedulingInput,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from scheduler_svc.core.requirements import (
    LABEL_ZONE,
    LABEL_ZONE_ID,
    Operator,
    Requirement,
)


def with_offering_zone_ids(
    instance_types: Iterable[InstanceType], ids: Mapping[str, str]
) -> tuple[InstanceType, ...]:
    """The catalog with each offering's ``zone_id`` set from ``ids`` (zone -> id; an offering
    whose zone is not in it keeps its own)."""
    return tuple(
        replace(
            t,
            offerings=tuple(
                replace(o, zone_id=ids[o.zone]) if o.zone in ids else o for o in t.offerings
            ),
        )
        for t in instance_types
    )


def zone_ids(problem: SchedulingInput) -> dict[str, str]:
    """Zone -> zone id, from the labels of the nodes that carry both and from the catalog's
    offerings (the catalog wins). The nodes matter when there is no catalog: a consolidation's
    delete simulation may only move pods onto existing nodes, and a pod selecting a zone id
    must still find the nodes of that zone."""
    ids = {
        zone: zone_id
        for node in problem.nodes
        if (zone := node.labels.get(LABEL_ZONE)) and (zone_id := node.labels.get(LABEL_ZONE_ID))
    }
    ids.update(
        {o.zone: o.zone_id for t in problem.instance_types for o in t.offerings if o.zone_id}
    )
    return ids


def as_zone_requirement(
    requirement: Requirement, ids: Mapping[str, str], zones: Iterable[str]
) -> Requirement | None:
    """``requirement`` on the zone id as one on ``zones`` (None: it admits every zone and a
    missing label, so it constrains nothing)."""
    value_set = requirement.value_set()
    every = sorted(set(zones))
    allowed = [z for z in every if value_set.allows(ids.get(z))]
    excluded = tuple(z for z in every if z not in allowed)
    if value_set.allows_absent:
        return Requirement(LABEL_ZONE, Operator.NOT_IN, excluded) if excluded else None
    if not allowed:
        # No zone has an id it admits: nothing can satisfy it (every node has a zone).
        return Requirement(LABEL_ZONE, Operator.DOES_NOT_EXIST)
    return Requirement(LABEL_ZONE, Operator.IN, tuple(allowed))


class _Rewriter:
    def __init__(self, ids: Mapping[str, str], zones: Iterable[str]) -> None:
        self.ids = ids
        self.zones = tuple(zones)

    def requirements(self, terms: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
        out: list[Requirement] = []
        for r in terms:
            if r.key != LABEL_ZONE_ID:
                out.append(r)
                continue
            translated = as_zone_requirement(r, self.ids, self.zones)
            if translated is not None:
                out.append(translated)
        return tuple(out)

    def key(self, key: str) -> str:
        return LABEL_ZONE if key == LABEL_ZONE_ID and self.ids else key

    def term(self, term: PodAffinityTerm) -> PodAffinityTerm:
        key = self.key(term.topology_key)
        return term if key == term.topology_key else replace(term, topology_key=key)

    def spread(self, spread: TopologySpreadConstraint) -> TopologySpreadConstraint:
        key = self.key(spread.topology_key)
        return spread if key == spread.topology_key else replace(spread, topology_key=key)

    def weighted(self, weighted: WeightedPodAffinityTerm) -> WeightedPodAffinityTerm:
        term = self.term(weighted.term)
        return weighted if term is weighted.term else replace(weighted, term=term)

    def pod(self, pod: Pod) -> Pod:
        if not pod.names_zone_id:
            return pod
        terms = pod.required_node_affinity
        selector = dict(pod.node_selector)
        wanted = selector.pop(LABEL_ZONE_ID, None)
        if wanted is not None:
            pinned = Requirement(LABEL_ZONE_ID, Operator.IN, (wanted,))
            terms = tuple((*t, pinned) for t in terms) if terms else ((pinned,),)
        return replace(
            pod,
            node_selector=selector,
            required_node_affinity=tuple(self.requirements(t) for t in terms),
            preferred_node_affinity=tuple(
                replace(p, requirements=self.requirements(p.requirements))
                for p in pod.preferred_node_affinity
            ),
            topology_spread=tuple(self.spread(s) for s in pod.topology_spread),
            pod_affinity=tuple(self.term(t) for t in pod.pod_affinity),
            pod_anti_affinity=tuple(self.term(t) for t in pod.pod_anti_affinity),
            preferred_pod_affinity=tuple(self.weighted(w) for w in pod.preferred_pod_affinity),
            preferred_pod_anti_affinity=tuple(
                self.weighted(w) for w in pod.preferred_pod_anti_affinity
            ),
        )

    def nodepool(self, pool: NodePool) -> NodePool:
        if all(r.key != LABEL_ZONE_ID for r in pool.requirements):
            return pool
        return replace(pool, requirements=self.requirements(pool.requirements))


def with_zone_ids_as_zones(problem: SchedulingInput) -> SchedulingInput:
    """``problem`` with every mention of the zone id rewritten on the zone (module docstring);
    the same object when nothing mentions it."""
    if not (
        any(p.names_zone_id for p in problem.pods)
        or any(p.names_zone_id for p in problem.daemonsets)
        or any(r.key == LABEL_ZONE_ID for pool in problem.nodepools for r in pool.requirements)
        or any(_running_names_zone_id(n) for n in problem.nodes)
    ):
        return problem
    ids = zone_ids(problem)
    zones = {o.zone for t in problem.instance_types for o in t.offerings} | set(ids)
    zones |= {z for n in problem.nodes if (z := n.labels.get(LABEL_ZONE))}
    rewrite = _Rewriter(ids, sorted(zones))
    return replace(
        problem,
        pods=tuple(rewrite.pod(p) for p in problem.pods),
        nodepools=tuple(rewrite.nodepool(p) for p in problem.nodepools),
        daemonsets=tuple(rewrite.pod(p) for p in problem.daemonsets),
        nodes=tuple(
            replace(n, pods=tuple(rewrite.pod(p) for p in n.pods))
            if _running_names_zone_id(n)
            else n
            for n in problem.nodes
        ),
    )


def _running_names_zone_id(node: Node) -> bool:
    """Whether a running pod's anti-affinity is over the zone id (of running pods the solver
    reads only labels and anti-affinity terms)."""
    return any(t.topology_key == LABEL_ZONE_ID for p in node.pods for t in p.pod_anti_affinity)
