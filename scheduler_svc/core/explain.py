"""Why a pod can or cannot go where: per NodePool, which constraint ruled out how many types."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_svc.core.catalog_index import BASE_DIMENSIONS, CatalogIndex, resource_vector
from scheduler_svc.core.model import SchedulingInput
from scheduler_svc.core.requirements import (
    LABEL_ZONE,
    Operator,
    Requirement,
    Requirements,
)
from scheduler_svc.core.solver import format_amount
from scheduler_svc.core.taints import first_untolerated
from scheduler_svc.core.zone_ids import with_zone_ids_as_zones


@dataclass(frozen=True)
class PodExplanation:
    """For one pod: one line per NodePool (and a summary of how many were ruled out)."""

    pod: str
    nodepools_ruled_out: int
    nodepools_total: int
    lines: tuple[str, ...]


def explain_pod(problem: SchedulingInput, pod_key: str) -> PodExplanation:
    """Explain, for the pending pod ``namespace/name``, what each NodePool and its instance
    types allow. Raises KeyError when the pod is not among ``problem.pods``."""
    problem = with_zone_ids_as_zones(problem)
    pod = next((p for p in problem.pods if p.key == pod_key), None)
    if pod is None:
        raise KeyError(pod_key)
    extended = sorted(
        {n for p in (*problem.pods, *problem.daemonsets) for n, _ in p.requests().extended}
    )
    dimensions = (*BASE_DIMENSIONS, *extended)
    catalog = CatalogIndex(problem.instance_types, dimensions, problem.unavailable_offerings)
    total_types = len(catalog.types)
    request = resource_vector(pod.requests(), dimensions)
    base = Requirements.from_labels(pod.node_selector)
    if pod.volume_zones:
        base = base.intersect(
            Requirements.of([Requirement(LABEL_ZONE, Operator.IN, pod.volume_zones)])
        )
    terms = (
        [base.intersect(Requirements.of(t)) for t in pod.required_node_affinity]
        if pod.required_node_affinity
        else [base]
    )
    shown = ", ".join(format_amount(k, v) for k, v in pod.requests().as_mapping().items())
    lines: list[str] = [f"requests: {shown}"]
    ruled_out = 0
    for nodepool in sorted(problem.nodepools, key=lambda p: (-p.weight, p.name)):
        name = nodepool.name
        pool_reqs = Requirements.of(nodepool.requirements).intersect(
            Requirements.from_labels(nodepool.node_labels())
        )
        taint = first_untolerated(pod.tolerations, nodepool.taints)
        if taint is not None:
            ruled_out += 1
            lines.append(f"NodePool {name}: ruled out: does not tolerate taint {taint.describe()}")
            continue
        conflicts = [t.conflict(pool_reqs) for t in terms]
        if all(c is not None for c in conflicts):
            ruled_out += 1
            lines.append(f"NodePool {name}: ruled out: pod {conflicts[0]}")
            continue
        pool_bits = catalog.compatible(pool_reqs)
        term = next(t for t, c in zip(terms, conflicts, strict=True) if c is None)
        pod_bits = pool_bits & catalog.compatible(pool_reqs.intersect(term))
        fit_bits = pod_bits & catalog.fits(request)
        by_pool = total_types - pool_bits.bit_count()
        by_pod = pool_bits.bit_count() - pod_bits.bit_count()
        by_resources = pod_bits.bit_count() - fit_bits.bit_count()
        if not fit_bits:
            ruled_out += 1
        verdict = "possible" if fit_bits else "ruled out"
        lines.append(
            f"NodePool {name}: {verdict}: {fit_bits.bit_count()} of {total_types} instance types "
            f"remain ({by_pool} ruled out by the NodePool's requirements or no available "
            f"offering, {by_pod} by the pod's node selector/affinity, {by_resources} by "
            f"resources)"
        )
    if pod.topology_spread or pod.pod_affinity or pod.pod_anti_affinity:
        lines.append(
            f"topology: {len(pod.topology_spread)} spread constraint(s), "
            f"{len(pod.pod_affinity)} pod affinity and {len(pod.pod_anti_affinity)} "
            "anti-affinity term(s) apply when placing"
        )
    return PodExplanation(pod_key, ruled_out, len(problem.nodepools), tuple(lines))
