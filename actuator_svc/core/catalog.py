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
# Category and generation as Karpenter's AWS provider reads them ("u-6tb1.metal": u, 1).
_FAMILY = re.compile(r"^(?P<category>[a-z]+)(-[0-9]+tb)?(?P<generation>[0-9]+).*\.")


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


# GPU manufacturers -> the device plugin's resource name (Karpenter's AWS provider's mapping).
_GPU_RESOURCES: Final = {
    "nvidia": "nvidia.com/gpu",
    "amd": "amd.com/gpu",
    "habana": "habana.ai/gaudi",
}
NEURON_RESOURCE: Final = "aws.amazon.com/neuron"
NEURON_CORE_RESOURCE: Final = "aws.amazon.com/neuroncore"
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"


def devices_of(description: Mapping[str, Any]) -> dict[str, int]:
    """Device resources a node of this type advertises: GPUs by manufacturer, Neuron devices
    and cores (Inferentia, Trainium), EFA interfaces; as Karpenter's AWS provider counts them."""
    devices: dict[str, int] = {}
    for gpu in description.get("GpuInfo", {}).get("Gpus", []):
        resource = _GPU_RESOURCES.get(str(gpu.get("Manufacturer", "")).lower())
        if resource:
            devices[resource] = devices.get(resource, 0) + int(gpu.get("Count", 0))
    neuron = description.get("NeuronInfo", {}).get("NeuronDevices", [])
    if neuron:
        devices[NEURON_RESOURCE] = sum(int(d.get("Count", 0)) for d in neuron)
        # Karpenter counts cores from the first device entry (types have one).
        first = neuron[0]
        devices[NEURON_CORE_RESOURCE] = int(first.get("Count", 0)) * int(
            first.get("CoreInfo", {}).get("Count", 0)
        )
    efa = description.get("NetworkInfo", {}).get("EfaInfo", {}).get("MaximumEfaInterfaces")
    if efa:
        devices[EFA_RESOURCE] = int(efa)
    return {name: count for name, count in sorted(devices.items()) if count}


def shape_of(description: Mapping[str, Any]) -> InstanceShape:
    """The hardware figures allocatable needs, from a DescribeInstanceTypes entry."""
    name = str(description.get("InstanceType", ""))
    try:
        network = description["NetworkInfo"]
        return InstanceShape(
            name=name,
            vcpus=int(description["VCpuInfo"]["DefaultVCpus"]),
            memory_mib=int(description["MemoryInfo"]["SizeInMiB"]),
            max_enis=int(network["MaximumNetworkInterfaces"]),
            ipv4_per_eni=int(network["Ipv4AddressesPerInterface"]),
            devices=devices_of(description),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InstanceTypeDataError(f"{name}: missing or malformed field {exc}") from exc


def _kebab(text: object) -> str:
    """Karpenter's label spelling of an EC2 name: lower case, spaces as dashes (a label value
    cannot hold a space: "RTX PRO 4500" -> "rtx-pro-4500")."""
    return str(text).lower().replace(" ", "-")


def _flag(value: object) -> str:
    """A boolean as Karpenter writes it in a label ("true" / "false")."""
    return "true" if value is True else "false"


def labels_of(description: Mapping[str, Any]) -> dict[str, str]:
    """Every instance label Karpenter's AWS provider puts on a node of this type.

    A label is left out when the type has no such feature (no GPU, no accelerator, no local
    NVMe, ...): a pod requiring it then cannot land on the type, as with Karpenter, where the
    type's requirement on that label is DoesNotExist.
    """
    name = str(description["InstanceType"])
    family, _, size = name.partition(".")
    shape = shape_of(description)
    processor = description.get("ProcessorInfo", {})
    network = description.get("NetworkInfo", {})
    labels = {
        ARCH_LABEL: _KUBE_ARCH[architecture_of(description)],
        OS_LABEL: "linux",
        INSTANCE_TYPE_LABEL: name,
        _AWS + "instance-family": family,
        _AWS + "instance-size": size,
        _AWS + "instance-cpu": str(shape.vcpus),
        _AWS + "instance-memory": str(shape.memory_mib),
        _AWS + "instance-hypervisor": str(description.get("Hypervisor", "")),
        _AWS + "instance-encryption-in-transit-supported": _flag(
            network.get("EncryptionInTransitSupported")
        ),
        _AWS + "instance-nitro-enclaves-supported": _flag(
            description.get("NitroEnclavesSupport") == "supported"
        ),
        _AWS + "instance-capability-flex": _flag("-flex" in family),
        # daiku launches default tenancy only.
        _AWS + "instance-tenancy": "default",
    }
    match = _FAMILY.match(name)
    if match:
        labels[_AWS + "instance-category"] = match["category"]
        labels[_AWS + "instance-generation"] = match["generation"]
    if processor.get("Manufacturer"):
        labels[_AWS + "instance-cpu-manufacturer"] = _kebab(processor["Manufacturer"])
    if processor.get("SustainedClockSpeedInGhz"):
        labels[_AWS + "instance-cpu-sustained-clock-speed-mhz"] = str(
            round(float(processor["SustainedClockSpeedInGhz"]) * 1000)
        )
    labels.update(_gpu_labels(description))
    labels.update(_accelerator_labels(description))
    storage = description.get("InstanceStorageInfo", {})
    if storage.get("TotalSizeInGB") and storage.get("NvmeSupport") != "unsupported":
        labels[_AWS + "instance-local-nvme"] = str(storage["TotalSizeInGB"])
    bandwidth = network.get("NetworkCards", [{}])[0]
    if bandwidth.get("BaselineBandwidthInGbps"):
        labels[_AWS + "instance-network-bandwidth"] = str(
            round(float(bandwidth["BaselineBandwidthInGbps"]) * 1000)
        )
    ebs = description.get("EbsInfo", {})
    if ebs.get("EbsOptimizedSupport") == "default" and ebs.get("EbsOptimizedInfo"):
        labels[_AWS + "instance-ebs-bandwidth"] = str(
            ebs["EbsOptimizedInfo"]["MaximumBandwidthInMbps"]
        )
    return {k: v for k, v in labels.items() if v != ""}


def _gpu_labels(description: Mapping[str, Any]) -> dict[str, str]:
    """instance-gpu-*: set when the type has exactly one kind of GPU (as Karpenter does)."""
    gpus = description.get("GpuInfo", {}).get("Gpus", [])
    if len(gpus) != 1:
        return {}
    gpu = gpus[0]
    return {
        _AWS + "instance-gpu-name": _kebab(gpu.get("Name", "")),
        _AWS + "instance-gpu-manufacturer": _kebab(gpu.get("Manufacturer", "")),
        _AWS + "instance-gpu-count": str(gpu.get("Count", 0)),
        _AWS + "instance-gpu-memory": str(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)),
    }


def _accelerator_labels(description: Mapping[str, Any]) -> dict[str, str]:
    """instance-accelerator-*: a Neuron device (Inferentia, Trainium: manufacturer aws), else
    the one inference accelerator DescribeInstanceTypes lists."""
    neuron = description.get("NeuronInfo", {}).get("NeuronDevices", [])
    if len(neuron) == 1:
        name, manufacturer, count = neuron[0].get("Name", ""), "aws", neuron[0].get("Count", 0)
    else:
        accelerators = description.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
        if neuron or len(accelerators) != 1:
            return {}
        accelerator = accelerators[0]
        name, manufacturer = accelerator.get("Name", ""), accelerator.get("Manufacturer", "")
        count = accelerator.get("Count", 0)
    return {
        _AWS + "instance-accelerator-name": _kebab(name),
        _AWS + "instance-accelerator-manufacturer": _kebab(manufacturer),
        _AWS + "instance-accelerator-count": str(count),
    }


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
