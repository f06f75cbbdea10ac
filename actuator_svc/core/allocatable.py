"""What a node of an EC2 instance type can offer to pods (EKS-optimized AMI defaults).

The figures follow the kubelet defaults of the EKS-optimized AMIs (see FACTS §1 of the design
brief): memory loses the hypervisor overhead, kube-reserved and the eviction threshold; cpu
loses kube-reserved on a sliding scale; pods are limited by the VPC CNI's ENI addressing.
Check: m5.large -> cpu 1930m, memory 6903Mi, pods 29, ephemeral-storage 17Gi.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

MIB = 1024**2
GIB = 1024**3
DEFAULT_ROOT_VOLUME_BYTES = 20 * GIB
VM_MEMORY_OVERHEAD_FRACTION = 0.075
DEFAULT_EVICTION_MEMORY_BYTES = 100 * MIB
DEFAULT_EVICTION_NODEFS_PERCENT = 10
KUBE_RESERVED_EPHEMERAL_BYTES = 1 * GIB


@dataclass(frozen=True)
class InstanceShape:
    """The hardware of one instance type, as DescribeInstanceTypes reports it."""

    name: str
    vcpus: int
    memory_mib: int
    max_enis: int
    ipv4_per_eni: int
    # Device resources the node advertises (nvidia.com/gpu, aws.amazon.com/neuron, ...), by name.
    devices: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KubeletSettings:
    """Kubelet settings that change allocatable; None means the EKS AMI default."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved_cpu_millis: int | None = None
    kube_reserved_memory_bytes: int | None = None
    system_reserved_cpu_millis: int = 0
    system_reserved_memory_bytes: int = 0
    eviction_memory_bytes: int = DEFAULT_EVICTION_MEMORY_BYTES
    eviction_nodefs_percent: int = DEFAULT_EVICTION_NODEFS_PERCENT


@dataclass(frozen=True)
class NodeResources:
    """Resource amounts in base units."""

    cpu_millis: int
    memory_bytes: int
    pods: int
    ephemeral_storage_bytes: int
    extended: Mapping[str, int] = field(default_factory=dict)


def eni_limited_max_pods(shape: InstanceShape) -> int:
    """The VPC CNI limit: each ENI hosts pods on all but its primary address, plus two."""
    return shape.max_enis * (shape.ipv4_per_eni - 1) + 2


def max_pods(shape: InstanceShape, kubelet: KubeletSettings) -> int:
    """maxPods from the kubelet settings, else the ENI limit; podsPerCore caps either."""
    pods = kubelet.max_pods if kubelet.max_pods is not None else eni_limited_max_pods(shape)
    if kubelet.pods_per_core:
        pods = min(pods, kubelet.pods_per_core * shape.vcpus)
    return pods


# (end of the range in millicores, reserved per 10,000 millicores of it): 6 % of the first core,
# 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest.
_CPU_RESERVED_RANGES = ((1000, 600), (2000, 100), (4000, 50), (2**63, 25))


def kube_reserved_cpu_millis_of(cpu_millis: int) -> int:
    """kube-reserved cpu for `cpu_millis` of capacity, in the EKS AMI's integer arithmetic
    (bootstrap.sh's get_cpu_millicores_to_reserve; Karpenter's kubeReservedResources): each
    range's share is truncated on its own, so 5 cores reserve 82m (60 + 10 + 10 + 2), not 83m,
    and a capacity of 2500m counts its half core (72m)."""
    reserved, start = 0, 0
    for end, per_10000 in _CPU_RESERVED_RANGES:
        if cpu_millis <= start:
            break
        reserved += (min(cpu_millis, end) - start) * per_10000 // 10_000
        start = end
    return reserved


def kube_reserved_memory_bytes(pods: int) -> int:
    """11 MiB per pod the node may run plus 255 MiB."""
    return (11 * pods + 255) * MIB


def vm_overhead_memory_bytes(shape: InstanceShape) -> int:
    """Memory the hypervisor keeps: 7.5 % of the instance's memory, rounded up to a MiB."""
    return math.ceil(shape.memory_mib * VM_MEMORY_OVERHEAD_FRACTION) * MIB


def capacity(
    shape: InstanceShape,
    kubelet: KubeletSettings | None = None,
    root_volume_bytes: int = DEFAULT_ROOT_VOLUME_BYTES,
) -> NodeResources:
    """What the node reports as capacity: the instance less what the hypervisor keeps."""
    kubelet = kubelet or KubeletSettings()
    extended = {name: count for name, count in sorted(shape.devices.items()) if count}
    return NodeResources(
        cpu_millis=shape.vcpus * 1000,
        memory_bytes=shape.memory_mib * MIB - vm_overhead_memory_bytes(shape),
        pods=max_pods(shape, kubelet),
        ephemeral_storage_bytes=root_volume_bytes,
        extended=extended,
    )


def allocatable(
    shape: InstanceShape,
    kubelet: KubeletSettings | None = None,
    root_volume_bytes: int = DEFAULT_ROOT_VOLUME_BYTES,
) -> NodeResources:
    """What pods can request on a node of this shape."""
    kubelet = kubelet or KubeletSettings()
    return allocatable_from_capacity(capacity(shape, kubelet, root_volume_bytes), kubelet)


def allocatable_from_capacity(
    total: NodeResources, kubelet: KubeletSettings | None = None
) -> NodeResources:
    """Capacity (as the node reports it, VM overhead already gone) less kube/system reserved
    and the eviction thresholds. Used where only capacity is known (user-written catalogs)."""
    kubelet = kubelet or KubeletSettings()
    reserved_cpu = (
        kubelet.kube_reserved_cpu_millis
        if kubelet.kube_reserved_cpu_millis is not None
        else kube_reserved_cpu_millis_of(total.cpu_millis)
    )
    reserved_memory = (
        kubelet.kube_reserved_memory_bytes
        if kubelet.kube_reserved_memory_bytes is not None
        else kube_reserved_memory_bytes(total.pods)
    )
    root_volume_bytes = total.ephemeral_storage_bytes
    nodefs_eviction = root_volume_bytes * kubelet.eviction_nodefs_percent // 100
    return NodeResources(
        cpu_millis=max(0, total.cpu_millis - reserved_cpu - kubelet.system_reserved_cpu_millis),
        memory_bytes=max(
            0,
            total.memory_bytes
            - reserved_memory
            - kubelet.system_reserved_memory_bytes
            - kubelet.eviction_memory_bytes,
        ),
        pods=total.pods,
        ephemeral_storage_bytes=max(
            0, root_volume_bytes - nodefs_eviction - KUBE_RESERVED_EPHEMERAL_BYTES
        ),
        extended=total.extended,
    )
