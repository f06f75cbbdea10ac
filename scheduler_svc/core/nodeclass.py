"""An EC2NodeClass's launch settings as typed values (Karpenter v1 field meanings).

`scheduler_svc.kube.convert` builds them from the object once; the actuator client turns them
into the contract's messages; everything between (the catalog per kubelet settings, launches
pinned to the resolved AMIs, subnets and security groups, the status controller) works on these
values and never on protobuf. Maps are sorted `(key, value)` tuples so every value is hashable
(the catalog is cached per `KubeletSpec`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

Pairs = tuple[tuple[str, str], ...]


def pairs(mapping: Mapping[str, str]) -> Pairs:
    """A map as sorted pairs (hashable, compared by content)."""
    return tuple(sorted(mapping.items()))


@dataclass(frozen=True, slots=True)
class SubnetTerm:
    tags: Pairs = ()
    id: str = ""


@dataclass(frozen=True, slots=True)
class SecurityGroupTerm:
    tags: Pairs = ()
    id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class AmiTerm:
    id: str = ""
    name: str = ""
    alias: str = ""
    tags: Pairs = ()
    owner: str = ""


@dataclass(frozen=True, slots=True)
class CapacityReservationTerm:
    """Karpenter's capacityReservationSelectorTerms entry: an id, or tags with an owner."""

    id: str = ""
    tags: Pairs = ()
    owner_id: str = ""


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    device_name: str = ""
    root_volume: bool = False
    volume_size_bytes: int = 0
    volume_type: str = ""
    iops: int = 0
    throughput_mibps: int = 0
    encrypted: bool = False
    kms_key_id: str = ""
    delete_on_termination: bool = True
    snapshot_id: str = ""
    # ebs.maxVolumeSize (daiku's; Karpenter has none): the root volume may grow to this to
    # hold its pods' ephemeral-storage (core.root_volume). 0: it stays volume_size_bytes.
    max_volume_size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    http_endpoint: str = ""
    http_protocol_ipv6: str = ""
    http_put_response_hop_limit: int = 0
    http_tokens: str = ""


@dataclass(frozen=True, slots=True)
class NodeClassSpec:
    """What a launch (and ResolveNodeClass) needs of an EC2NodeClass."""

    name: str
    subnet_terms: tuple[SubnetTerm, ...] = ()
    security_group_terms: tuple[SecurityGroupTerm, ...] = ()
    ami_terms: tuple[AmiTerm, ...] = ()
    tags: Pairs = ()
    user_data: str = ""
    role: str = ""
    instance_profile: str = ""
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    metadata_options: MetadataOptions = MetadataOptions()
    ami_family: str = ""
    associate_public_ip_address: bool = False
    capacity_reservation_terms: tuple[CapacityReservationTerm, ...] = ()
    # spec.fleetAllocationStrategy: CreateFleet's strategies ("": the actuator's defaults).
    spot_allocation_strategy: str = ""
    on_demand_allocation_strategy: str = ""

    @property
    def root_volume_size_bytes(self) -> int:
        """The root volume's size (the mapping marked root, else the first; 0: unset, the
        actuator then assumes its default). Bounds the nodes' ephemeral-storage."""
        mappings = self.block_device_mappings
        root = next((m for m in mappings if m.root_volume), mappings[0] if mappings else None)
        return root.volume_size_bytes if root is not None else 0

    @property
    def root_volume_max_size_bytes(self) -> int:
        """How far the root volume may grow for its pods (0: it does not grow). Only a mapping
        marked ``rootVolume`` grows (the CRD refuses the cap elsewhere)."""
        root = next((m for m in self.block_device_mappings if m.root_volume), None)
        return root.max_volume_size_bytes if root is not None else 0

    def with_root_volume_size(self, size_bytes: int) -> NodeClassSpec:
        """These settings with the growing root volume at ``size_bytes``."""
        mappings = tuple(
            dataclasses.replace(m, volume_size_bytes=size_bytes)
            if m.root_volume and m.max_volume_size_bytes
            else m
            for m in self.block_device_mappings
        )
        return dataclasses.replace(self, block_device_mappings=mappings)

    def pinned(
        self,
        *,
        ami_ids: tuple[str, ...] = (),
        subnet_ids: tuple[str, ...] = (),
        security_group_ids: tuple[str, ...] = (),
    ) -> NodeClassSpec:
        """These settings with each selector term list replaced by the given ids (a list with
        no ids given stays as written)."""
        changes: dict[str, object] = {}
        if ami_ids:
            changes["ami_terms"] = tuple(AmiTerm(id=i) for i in ami_ids)
        if subnet_ids:
            changes["subnet_terms"] = tuple(SubnetTerm(id=i) for i in subnet_ids)
        if security_group_ids:
            changes["security_group_terms"] = tuple(
                SecurityGroupTerm(id=i) for i in security_group_ids
            )
        return dataclasses.replace(self, **changes) if changes else self  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class KubeletSpec:
    """An EC2NodeClass's spec.kubelet (what allocatable and the node's kubelet depend on)."""

    system_reserved: Pairs = ()
    kube_reserved: Pairs = ()
    eviction_hard: Pairs = ()
    cluster_dns: tuple[str, ...] = ()
    max_pods: int | None = None
    pods_per_core: int | None = None
