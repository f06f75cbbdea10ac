"""One launch template per distinct node-class configuration, named by a hash of it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class BlockDevice:
    """One EBS block device mapping."""

    device_name: str
    volume_size_bytes: int = 0
    volume_type: str = "gp3"
    iops: int = 0
    throughput_mibps: int = 0
    encrypted: bool = True
    kms_key_id: str = ""
    delete_on_termination: bool = True
    snapshot_id: str = ""


@dataclass(frozen=True)
class MetadataOptions:
    """Instance metadata service settings (Karpenter's defaults: IMDSv2 only, hop limit 1)."""

    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"


@dataclass(frozen=True)
class LaunchTemplateConfig:
    """Everything a launch template holds; equal configurations share one template."""

    cluster_name: str
    image_id: str
    user_data: str  # plain text; base64-encoded on the way to EC2
    security_group_ids: tuple[str, ...]
    instance_profile: str = ""
    block_devices: tuple[BlockDevice, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    associate_public_ip_address: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)
    # Launches from this template run in this capacity reservation (a Capacity Block when
    # capacity_block): EC2 takes the target from the template, not from CreateFleet.
    capacity_reservation_id: str = ""
    capacity_block: bool = False

    @property
    def digest(self) -> str:
        """A stable hash of the configuration."""
        data: dict[str, Any] = asdict(self)
        data["tags"] = sorted(self.tags.items())
        if not self.capacity_reservation_id:
            # Unchanged names for the templates that existed before reservations did.
            del data["capacity_reservation_id"], data["capacity_block"]
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def name(self) -> str:
        """The launch template name: cluster plus 20 hex digits of the digest (<= 128 chars)."""
        return f"daiku-{self.cluster_name[:80]}-{self.digest[:20]}"
