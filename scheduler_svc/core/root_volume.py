"""A NodeClaim's root volume sized from its pods' ephemeral-storage requests (issue 14 item 5,
aws/karpenter-provider-aws#2394; Karpenter has no such field).

An EC2NodeClass whose root block-device mapping sets ``ebs.maxVolumeSize`` lets each claim's
root volume grow from ``ebs.volumeSize`` up to that cap. The solver packs against the cap (the
catalog is fetched for it, so ephemeral-storage is one more dimension of packing); each claim
then launches with the smallest whole-GiB volume whose allocatable ephemeral-storage holds what
it was packed with (its pods and DaemonSets), never below ``volumeSize``.

Allocatable ephemeral-storage follows the kubelet on the EKS AMIs, as the actuator computes it
(``actuator_svc.core.allocatable``, which the scheduler may not import; a test holds the two
together): the volume less the ``nodefs.available`` eviction threshold (10 % unless the class's
``kubelet.evictionHard`` says otherwise) and 1 GiB of kube-reserved storage.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_svc.core.nodeclass import KubeletSpec, NodeClassSpec

GIB = 1024**3
DEFAULT_ROOT_VOLUME_BYTES = 20 * GIB  # the actuator's size when a class sets none
KUBE_RESERVED_EPHEMERAL_BYTES = GIB
DEFAULT_NODEFS_EVICTION_PERCENT = 10
NODEFS_SIGNAL = "nodefs.available"


def nodefs_eviction_percent(kubelet: KubeletSpec | None) -> int:
    """The class's ``evictionHard["nodefs.available"]`` as a percentage (10: unset)."""
    if kubelet is None:
        return DEFAULT_NODEFS_EVICTION_PERCENT
    text = dict(kubelet.eviction_hard).get(NODEFS_SIGNAL, "")
    if text.endswith("%") and text[:-1].isdigit():
        return int(text[:-1])
    return DEFAULT_NODEFS_EVICTION_PERCENT


def ephemeral_allocatable_bytes(volume_bytes: int, eviction_percent: int) -> int:
    """What pods may request of a root volume of ``volume_bytes``."""
    evicted = volume_bytes * eviction_percent // 100
    return max(0, volume_bytes - evicted - KUBE_RESERVED_EPHEMERAL_BYTES)


@dataclass(frozen=True, slots=True)
class RootVolumeGrowth:
    """How a class's root volume may grow: from ``base_bytes`` to ``max_bytes``."""

    base_bytes: int
    max_bytes: int
    eviction_percent: int = DEFAULT_NODEFS_EVICTION_PERCENT

    @classmethod
    def of(cls, node_class: NodeClassSpec, kubelet: KubeletSpec | None) -> RootVolumeGrowth | None:
        """The class's growth (None: its root volume has no ``maxVolumeSize``)."""
        cap = node_class.root_volume_max_size_bytes
        if not cap:
            return None
        base = node_class.root_volume_size_bytes or DEFAULT_ROOT_VOLUME_BYTES
        return cls(base, cap, nodefs_eviction_percent(kubelet))

    @property
    def max_allocatable_bytes(self) -> int:
        """The most ephemeral-storage a claim of this class can give its pods."""
        return ephemeral_allocatable_bytes(self.max_bytes, self.eviction_percent)

    def size_for(self, requested_bytes: int) -> int:
        """The smallest whole-GiB volume, at least the base, whose allocatable holds
        ``requested_bytes`` (the cap when even it does not: the solver never packs past it)."""
        keep = 100 - self.eviction_percent
        # volume * keep / 100 - reserved >= requested, rounded up to a GiB, then checked
        # (the eviction threshold is truncated to whole bytes).
        wanted = -(-(requested_bytes + KUBE_RESERVED_EPHEMERAL_BYTES) * 100 // keep)
        size = max(self.base_bytes, -(-wanted // GIB) * GIB)
        while ephemeral_allocatable_bytes(size, self.eviction_percent) < requested_bytes:
            size += GIB
        return min(size, max(self.max_bytes, self.base_bytes))


def beyond_cap_reason(
    reason: str, requested_bytes: int, growth: RootVolumeGrowth | None, class_name: str
) -> str:
    """``reason`` (why a pod stays pending) saying, when the pod asks for more ephemeral-storage
    than the class's largest root volume gives, that the cap is what stops it."""
    if growth is None or requested_bytes <= growth.max_allocatable_bytes:
        return reason
    return (
        f"{reason} (EC2NodeClass {class_name}'s root volume grows to at most"
        f" {growth.max_bytes // GIB}Gi, {growth.max_allocatable_bytes / GIB:g} GiB allocatable;"
        " raise its maxVolumeSize)"
    )
