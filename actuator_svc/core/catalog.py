"""The instance-type catalog: EC2's descriptions + zones + prices -> what a scheduler needs.

Input is DescribeInstanceTypes-shaped dicts (as EC2, moto and the bundled data return them), the
zones each type is offered in, on-demand prices per type and spot prices per type and zone.
Output is one `CatalogInstanceType` per type that has a price: its shape, the labels NodePools
select on, capacity and allocatable (FACTS §1) and its offerings with availability.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from actuator_svc.core.allocatable import (
    DEFAULT_ROOT_VOLUME_BYTES,
    InstanceShape,
    KubeletSettings,
    NodeResources,
    allocatable,
    capacity,
)
from actuator_svc.core.offerings import ON_DEMAND, SPOT, OfferingKey, PricedOffering
from actuator_svc.core.unavailable_offerings import Unavailability

ARCH_LABEL: Final = "kubernetes.io/arch"
OS_LABEL: Final = "kubernetes.io/os"
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
_AWS: Final = "karpenter.k8s.aws/"
# EC2 architecture names -> Kubernetes (GOARCH) names.
_KUBE_ARCH: Final = {"x86_64": "amd64", "arm64": "arm64"}
# Families AWS lists as previous generation. moto's CurrentGeneration flag wrongly says False
# for current families such as m5, c5 and r5, so the catalog uses this list instead.
PREVIOUS_GENERATION_FAMILIES: Final = frozenset(
    {"a1", "c1", "c3", "c4", "cc2", "cg1", "cr1", "d2", "g2", "g3", "g3s", "hi1", "hs1", "i2",
     "m1", "m2", "m3", "m4", "p2", "p3", "r3", "r4", "t1", "t2", "x1", "x1e"}
)  # fmt: skip
_FAMILY = re.compile(r"^(?P<category>[a-z]+?)(?P<generation>\d+)(?P<options>[a-z\-]*)$")


class InstanceTypeDataError(ValueError):
    """A DescribeInstanceTypes entry lacks a field the catalog needs."""


@dataclass(frozen=True)
class CatalogInstanceType:
    """One instance type as the scheduler sees it."""

    name: str
    architecture: str  # EC2 name: x86_64 or arm64
    shape: InstanceShape
    labels: Mapping[str, str]
    capacity: NodeResources
    allocatable: NodeResources
    offerings: tuple[PricedOffering, ...]


def architecture_of(description: Mapping[str, Any]) -> str:
    """The EC2 architecture of a type (x86_64 or arm64; the first one it supports)."""
    archs = description.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    for arch in archs:
        if arch in _KUBE_ARCH:
            return str(arch)
    raise InstanceTypeDataError(
        f"{description.get('InstanceType')}: no supported architecture in {archs}"
    )


def is_current_generation(instance_type: str) -> bool:
    """False for the families AWS lists as previous generation."""
    return instance_type.split(".", 1)[0] not in PREVIOUS_GENERATION_FAMILIES


def shape_of(description: Mapping[str, Any]) -> InstanceShape:
    """The hardware figures allocatable needs, from a DescribeInstanceTypes entry."""
    name = str(description.get("InstanceType", ""))
    try:
        network = description["NetworkInfo"]
        gpus = description.get("GpuInfo", {}).get("Gpus", [])
        manufacturer = str(gpus[0].get("Manufacturer", "")).lower() if gpus else ""
        return InstanceShape(
            name=name,
            vcpus=int(description["VCpuInfo"]["DefaultVCpus"]),
            memory_mib=int(description["MemoryInfo"]["SizeInMiB"]),
            max_enis=int(network["MaximumNetworkInterfaces"]),
            ipv4_per_eni=int(network["Ipv4AddressesPerInterface"]),
            gpus=sum(int(g.get("Count", 0)) for g in gpus),
            gpu_resource="amd.com/gpu" if manufacturer == "amd" else "nvidia.com/gpu",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InstanceTypeDataError(f"{name}: missing or malformed field {exc}") from exc


def labels_of(description: Mapping[str, Any]) -> dict[str, str]:
    """Well-known and Karpenter instance labels for a DescribeInstanceTypes entry."""
    name = str(description["InstanceType"])
    family, _, size = name.partition(".")
    shape = shape_of(description)
    labels = {
        ARCH_LABEL: _KUBE_ARCH[architecture_of(description)],
        OS_LABEL: "linux",
        INSTANCE_TYPE_LABEL: name,
        _AWS + "instance-family": family,
        _AWS + "instance-size": size,
        _AWS + "instance-cpu": str(shape.vcpus),
        _AWS + "instance-memory": str(shape.memory_mib),
        _AWS + "instance-hypervisor": str(description.get("Hypervisor", "")),
    }
    match = _FAMILY.match(family)
    if match:
        labels[_AWS + "instance-category"] = match["category"]
        labels[_AWS + "instance-generation"] = match["generation"]
    manufacturer = description.get("ProcessorInfo", {}).get("Manufacturer")
    if manufacturer:
        labels[_AWS + "instance-cpu-manufacturer"] = str(manufacturer).lower()
    gpus = description.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        labels[_AWS + "instance-gpu-count"] = str(shape.gpus)
        labels[_AWS + "instance-gpu-name"] = str(gpus[0].get("Name", "")).lower()
        labels[_AWS + "instance-gpu-manufacturer"] = str(gpus[0].get("Manufacturer", "")).lower()
        labels[_AWS + "instance-gpu-memory"] = str(
            gpus[0].get("MemoryInfo", {}).get("SizeInMiB", 0)
        )
    storage = description.get("InstanceStorageInfo", {}).get("TotalSizeInGB")
    if storage:
        labels[_AWS + "instance-local-nvme"] = str(storage)
    bandwidth = description.get("NetworkInfo", {}).get("NetworkCards", [{}])[0]
    if bandwidth.get("BaselineBandwidthInGbps"):
        labels[_AWS + "instance-network-bandwidth"] = str(
            int(float(bandwidth["BaselineBandwidthInGbps"]) * 1000)
        )
    return {k: v for k, v in labels.items() if v != ""}


def build_catalog(
    *,
    descriptions: Mapping[str, Mapping[str, Any]],
    zones: Mapping[str, Sequence[str]],
    on_demand_prices: Mapping[str, float],
    spot_prices: Mapping[tuple[str, str], float],
    unavailable: Mapping[OfferingKey, Unavailability],
    kubelet: KubeletSettings | None = None,
    root_volume_bytes: int = DEFAULT_ROOT_VOLUME_BYTES,
    current_generation_only: bool = False,
) -> tuple[list[CatalogInstanceType], list[str]]:
    """The catalog, sorted by name, and the problems met (one line per type skipped).

    A type is listed when it has at least one priced offering in a zone; an offering that is in
    `unavailable` is listed with available=False and its reason.
    """
    kubelet = kubelet or KubeletSettings()
    result: list[CatalogInstanceType] = []
    problems: list[str] = []
    for name in sorted(descriptions):
        if current_generation_only and not is_current_generation(name):
            continue
        description = descriptions[name]
        try:
            shape = shape_of(description)
            labels = labels_of(description)
            arch = architecture_of(description)
        except (InstanceTypeDataError, KeyError) as exc:
            problems.append(str(exc))
            continue
        usage = set(description.get("SupportedUsageClasses", [SPOT, ON_DEMAND]))
        offerings: list[PricedOffering] = []
        for zone in sorted(zones.get(name, ())):
            for capacity_type in (SPOT, ON_DEMAND):
                if capacity_type not in usage:
                    continue
                price = (
                    spot_prices.get((name, zone))
                    if capacity_type == SPOT
                    else on_demand_prices.get(name)
                )
                if price is None:
                    continue
                key = OfferingKey(name, zone, capacity_type)
                gone = unavailable.get(key)
                offerings.append(
                    PricedOffering(
                        key=key,
                        price_per_hour=price,
                        available=gone is None,
                        unavailable_reason=gone.reason if gone else "",
                        unavailable_until_seconds=gone.until_seconds if gone else 0.0,
                    )
                )
        if not offerings:
            continue
        result.append(
            CatalogInstanceType(
                name=name,
                architecture=arch,
                shape=shape,
                labels=labels,
                capacity=capacity(shape, kubelet, root_volume_bytes),
                allocatable=allocatable(shape, kubelet, root_volume_bytes),
                offerings=tuple(offerings),
            )
        )
    return result, problems
