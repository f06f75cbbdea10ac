"""What a launch asks for: the claim, its offerings and its node class (EC2NodeClass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from actuator_svc.core.allocatable import KubeletSettings
from actuator_svc.core.launch_template import BlockDevice, MetadataOptions
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.user_data import Taint

# User-data formats: AL2023 renders nodeadm's NodeConfig with the claim's labels and taints;
# Custom passes the node class's user data as is (Karpenter's meaning of the two).
AL2023: Final = "AL2023"
CUSTOM: Final = "Custom"
AMI_FAMILIES: Final = frozenset({AL2023, CUSTOM})


@dataclass(frozen=True)
class SubnetTerm:
    """Matches the subnet with this id, or every subnet carrying all these tags."""

    id: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SecurityGroupTerm:
    """Matches by id, by group name, or by all of its tags."""

    id: str = ""
    name: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ImageTerm:
    """Matches by id, by name (wildcards allowed), by alias (al2023@latest) or by tags."""

    id: str = ""
    name: str = ""
    alias: str = ""
    owner: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CapacityReservationTerm:
    """Matches the reservation with this id, or every one carrying all these tags (and owned by
    owner_id when given)."""

    id: str = ""
    owner_id: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeClassSpec:
    """The launch-relevant part of an EC2NodeClass."""

    name: str
    subnet_terms: tuple[SubnetTerm, ...]
    security_group_terms: tuple[SecurityGroupTerm, ...]
    image_terms: tuple[ImageTerm, ...]
    tags: Mapping[str, str] = field(default_factory=dict)
    user_data: str = ""
    instance_profile: str = ""
    block_devices: tuple[BlockDevice, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    associate_public_ip_address: bool = False
    ami_family: str = AL2023
    capacity_reservation_terms: tuple[CapacityReservationTerm, ...] = ()
    # CreateFleet allocation strategies ("": the launch plan's defaults).
    spot_allocation_strategy: str = ""
    on_demand_allocation_strategy: str = ""


@dataclass(frozen=True)
class LaunchRequest:
    """One NodeClaim to launch, validated."""

    nodeclaim_name: str
    nodepool_name: str
    offerings: tuple[OfferingKey, ...]
    node_class: NodeClassSpec
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    kubelet: KubeletSettings = field(default_factory=KubeletSettings)
    # The claim object's metadata.uid, when the caller sends it: launch steps are then the
    # object's, not the name's (decision 0014).
    nodeclaim_uid: str = ""


@dataclass(frozen=True)
class ImageChoice:
    """An image candidate: id, architecture and creation date (ISO 8601)."""

    id: str
    architecture: str
    creation_date: str


def newest_image_per_architecture(images: Sequence[ImageChoice]) -> dict[str, str]:
    """The newest image id for each architecture (ties broken by id, for stability)."""
    best: dict[str, ImageChoice] = {}
    for image in images:
        current = best.get(image.architecture)
        if current is None or (image.creation_date, image.id) > (
            current.creation_date,
            current.id,
        ):
            best[image.architecture] = image
    return {arch: image.id for arch, image in best.items()}
