"""`daiku plan` with EC2NodeClasses whose root volume grows (`ebs.maxVolumeSize`,
scheduler_svc.core.root_volume): the catalog's ephemeral-storage is the cap's, as the live
scheduler fetches it; each claim is shown with the volume it would launch with; a pod beyond
the cap is reported with it.

Plan solves one catalog for every NodePool: when several classes grow to different caps, the
largest is used (the live scheduler solves each class's catalog apart).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler_svc.core import InstanceType, SchedulingInput, SchedulingResult
from scheduler_svc.core.model import NodeClaimPlan, UnschedulablePod
from scheduler_svc.core.root_volume import (
    GIB,
    RootVolumeGrowth,
    beyond_cap_reason,
    ephemeral_allocatable_bytes,
)
from scheduler_svc.kube.convert import kubelet_from_k8s, node_class_from_k8s


@dataclass(frozen=True)
class RootVolumes:
    """Each growing class by name, and the class each NodePool launches with."""

    growth: Mapping[str, RootVolumeGrowth] = field(default_factory=dict)
    class_of_pool: Mapping[str, str] = field(default_factory=dict)

    def largest(self) -> tuple[str, RootVolumeGrowth] | None:
        """The class with the largest cap that a NodePool uses (None: none grows)."""
        used = [(n, g) for n, g in self.growth.items() if n in self.class_of_pool.values()]
        return max(used, key=lambda item: (item[1].max_bytes, item[0]), default=None)

    def of_claim(self, claim: NodeClaimPlan) -> RootVolumeGrowth | None:
        return self.growth.get(self.class_of_pool.get(claim.nodepool, ""))


def _grows(node_class: Mapping[str, Any]) -> bool:
    mappings = (node_class.get("spec") or {}).get("blockDeviceMappings") or []
    return any(isinstance(m, dict) and "maxVolumeSize" in (m.get("ebs") or {}) for m in mappings)


def read_root_volumes(
    node_classes: Mapping[str, dict[str, Any]], nodepools: Sequence[dict[str, Any]]
) -> RootVolumes:
    """The growing classes among ``node_classes`` (raises InvalidObjectError for a bad one)."""
    growth: dict[str, RootVolumeGrowth] = {}
    for name, obj in node_classes.items():
        if _grows(obj):
            found = RootVolumeGrowth.of(node_class_from_k8s(obj), kubelet_from_k8s(obj))
            if found is not None:
                growth[name] = found
    class_of_pool = {
        str(p["metadata"]["name"]): str(
            (
                (((p.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                    "nodeClassRef"
                )
                or {}
            ).get("name", "")
        )
        for p in nodepools
    }
    return RootVolumes(growth, class_of_pool)


def with_cap_ephemeral_storage(
    types: Sequence[InstanceType], volumes: RootVolumes
) -> tuple[InstanceType, ...]:
    """The catalog with every type's ephemeral-storage that of the largest cap."""
    largest = volumes.largest()
    if largest is None:
        return tuple(types)
    growth = largest[1]
    allocatable = ephemeral_allocatable_bytes(growth.max_bytes, growth.eviction_percent)
    return tuple(
        dataclasses.replace(
            t,
            capacity=dataclasses.replace(t.capacity, ephemeral_storage_bytes=growth.max_bytes),
            allocatable=dataclasses.replace(t.allocatable, ephemeral_storage_bytes=allocatable),
        )
        for t in types
    )


def with_cap_reasons(
    result: SchedulingResult, problem: SchedulingInput, volumes: RootVolumes
) -> SchedulingResult:
    """``result`` whose pending pods beyond the largest cap say so."""
    largest = volumes.largest()
    if largest is None or not result.unschedulable:
        return result
    name, growth = largest
    pods = {p.key: p for p in problem.pods}
    refused = tuple(
        UnschedulablePod(
            u.pod,
            beyond_cap_reason(
                u.reason, pods[u.pod].requests().ephemeral_storage_bytes, growth, name
            ),
        )
        if u.pod in pods
        else u
        for u in result.unschedulable
    )
    return dataclasses.replace(result, unschedulable=refused)


def root_volume_entry(claim: NodeClaimPlan, volumes: RootVolumes) -> dict[str, str]:
    """`rootVolumeSize` for a claim whose class grows its root volume (empty otherwise)."""
    growth = volumes.of_claim(claim)
    if growth is None:
        return {}
    return {"rootVolumeSize": f"{growth.size_for(claim.requests.ephemeral_storage_bytes) // GIB}Gi"}


def explain_root_volume(claim: NodeClaimPlan | None, volumes: RootVolumes) -> list[str]:
    """The `--explain` line for a placed pod's claim whose class grows its root volume."""
    growth = volumes.of_claim(claim) if claim is not None else None
    if claim is None or growth is None:
        return []
    size = growth.size_for(claim.requests.ephemeral_storage_bytes)
    requested = claim.requests.ephemeral_storage_bytes / GIB
    return [
        f"Root volume of its NodeClaim: {size // GIB}Gi for {requested:g} GiB of"
        f" ephemeral-storage (grows from {growth.base_bytes // GIB}Gi, at most"
        f" {growth.max_bytes // GIB}Gi)"
    ]


__all__ = [
    "RootVolumes",
    "explain_root_volume",
    "read_root_volumes",
    "root_volume_entry",
    "with_cap_ephemeral_storage",
    "with_cap_reasons",
]
