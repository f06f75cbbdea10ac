"""What one CreateFleet call carries: the subnet each zone launches in now, the offerings a
node class cannot launch at all, and the call itself (launch templates and overrides)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import structlog

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.provider import (
    CloudProvider,
    FleetError,
    FleetOverride,
    FleetRequest,
    FleetTemplate,
    Subnet,
)
from actuator_svc.core.launch_plan import FleetBatch
from actuator_svc.core.launch_template import LaunchTemplateConfig
from actuator_svc.core.node_class import CUSTOM, LaunchRequest
from actuator_svc.core.offerings import CAPACITY_BLOCK, OfferingKey
from actuator_svc.core.tags import CLUSTER_TAG, NODECLASS_TAG, NODEPOOL_TAG, cluster_tag_key
from actuator_svc.core.user_data import ClusterEndpoint, NodeRegistration, render_user_data
from actuator_svc.launch_templates import LaunchTemplateCollector
from actuator_svc.node_class_resolver import ResolvedNodeClass

log = structlog.get_logger("actuator_svc.launcher")
# How long a subnet that answered InsufficientFreeAddressesInSubnet is left out of launches.
FULL_SUBNET_SECONDS: Final = 180.0
INSUFFICIENT_FREE_ADDRESSES: Final = "InsufficientFreeAddressesInSubnet"


@dataclass(frozen=True)
class SkippedOffering:
    """An offering not tried: cached as unavailable, or not launchable with this node class."""

    offering: OfferingKey
    reason: str
    until_seconds: float = 0.0


class SubnetPicker:
    """The subnet each zone launches in now. A subnet that answered
    InsufficientFreeAddressesInSubnet is an ICE of the subnet, not of the offerings: it is left
    out for FULL_SUBNET_SECONDS and the zone's next subnet takes the launches meanwhile."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        # Subnets found out of addresses, until when (epoch seconds).
        self._full_until_seconds: dict[str, float] = {}

    def pick(self, resolved: ResolvedNodeClass, zone: str) -> Subnet | None:
        """The zone's subnet for a launch now: the first (most free addresses) not found out
        of addresses within FULL_SUBNET_SECONDS."""
        now = self._clock()
        listed = resolved.subnets_by_zone.get(zone)
        if listed is None:
            listed = (resolved.subnet_by_zone[zone],) if zone in resolved.subnet_by_zone else ()
        return next((s for s in listed if self._full_until_seconds.get(s.id, 0.0) <= now), None)

    def pick_id(self, resolved: ResolvedNodeClass, zone: str) -> str:
        subnet = self.pick(resolved, zone)
        return subnet.id if subnet is not None else ""

    def mark_full(self, resolved: ResolvedNodeClass, error: FleetError) -> bool:
        """InsufficientFreeAddressesInSubnet naming a zone: the subnet used there is out of
        addresses (an ICE of the subnet); the zone's next subnet takes the next call."""
        if error.code != INSUFFICIENT_FREE_ADDRESSES or not error.zone:
            return False
        subnet = self.pick(resolved, error.zone)
        if subnet is None:
            return False
        self._full_until_seconds[subnet.id] = self._clock() + FULL_SUBNET_SECONDS
        log.info("subnet_out_of_addresses", subnet_id=subnet.id, zone=error.zone)
        return True


class FleetRequestBuilder:
    """Builds each step's CreateFleet call: one launch template per architecture (and per
    capacity reservation), the overrides in the batch's priority order."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        catalog: Catalog,
        cluster: ClusterEndpoint,
        subnets: SubnetPicker,
        templates: LaunchTemplateCollector | None,
    ) -> None:
        self._cloud = cloud
        self._catalog = catalog
        self._cluster = cluster
        self._subnets = subnets
        self._templates = templates

    async def unlaunchable(
        self, request: LaunchRequest, resolved: ResolvedNodeClass
    ) -> dict[OfferingKey, SkippedOffering]:
        """Offerings this node class cannot launch at all, with the reason."""
        skipped: dict[OfferingKey, SkippedOffering] = {}
        for key in request.offerings:
            arch = await self._catalog.architecture(key.instance_type)
            if arch is None:
                skipped[key] = SkippedOffering(key, "UnknownInstanceType")
            elif not self._catalog.is_offered(key.instance_type, key.zone):
                skipped[key] = SkippedOffering(key, "NotOfferedInZone")
            elif key.zone not in resolved.subnet_by_zone:
                skipped[key] = SkippedOffering(key, "NoSubnetInZone")
            elif self._subnets.pick(resolved, key.zone) is None:
                skipped[key] = SkippedOffering(key, INSUFFICIENT_FREE_ADDRESSES)
            elif arch not in resolved.image_by_architecture:
                skipped[key] = SkippedOffering(key, "NoImageForArchitecture")
        return skipped

    async def build(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        batch: FleetBatch,
        tags: dict[str, str],
        client_token: str,
    ) -> FleetRequest:
        """The CreateFleet call for a batch: one launch template per architecture (and per
        capacity reservation: the template names the reservation its launches run in)."""
        by_arch: dict[tuple[str, str], list[FleetOverride]] = {}
        for priority, key in enumerate(batch.offerings):
            arch = await self._catalog.architecture(key.instance_type) or "x86_64"
            by_arch.setdefault((arch, key.capacity_reservation_id), []).append(
                FleetOverride(
                    instance_type=key.instance_type,
                    subnet_id=self._subnets.pick_id(resolved, key.zone),
                    zone=key.zone,
                    priority=float(priority),
                )
            )
        templates = []
        capacity_block = batch.fleet_capacity_type == CAPACITY_BLOCK
        for (arch, reservation_id), overrides in by_arch.items():
            config = self.template_config(request, resolved, resolved.image_by_architecture[arch])
            if reservation_id:
                config = dataclasses.replace(
                    config, capacity_reservation_id=reservation_id, capacity_block=capacity_block
                )
            if self._templates is not None:
                self._templates.used(config.name)
            await self._cloud.ensure_launch_template(config)
            templates.append(FleetTemplate(config.name, tuple(overrides)))
        return FleetRequest(
            client_token=client_token,
            capacity_type=batch.fleet_capacity_type,
            allocation_strategy=batch.strategy(
                request.node_class.spot_allocation_strategy,
                request.node_class.on_demand_allocation_strategy,
            ),
            templates=tuple(templates),
            tags=tags,
        )

    def template_config(
        self, request: LaunchRequest, resolved: ResolvedNodeClass, image_id: str
    ) -> LaunchTemplateConfig:
        node_class = request.node_class
        labels = {**request.labels, NODEPOOL_TAG: request.nodepool_name}
        registration = NodeRegistration(
            labels=labels,
            taints=request.taints + request.startup_taints,
            max_pods=request.kubelet.max_pods,
        )
        template_tags = {
            **node_class.tags,
            CLUSTER_TAG: self._cluster.name,
            NODEPOOL_TAG: request.nodepool_name,
            NODECLASS_TAG: node_class.name,
            cluster_tag_key(self._cluster.name): "owned",
        }
        return LaunchTemplateConfig(
            cluster_name=self._cluster.name,
            image_id=image_id,
            user_data=node_class.user_data
            if node_class.ami_family == CUSTOM
            else render_user_data(self._cluster, registration, node_class.user_data),
            security_group_ids=resolved.security_group_ids,
            instance_profile=node_class.instance_profile,
            block_devices=node_class.block_devices,
            metadata_options=node_class.metadata_options,
            associate_public_ip_address=node_class.associate_public_ip_address,
            tags=template_tags,
        )
