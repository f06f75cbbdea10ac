"""Launch templates, instant fleets, instances found and terminated."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from actuator_svc.cloud.aws_calls import AwsCalls, tag_filters, tag_list, tags_dict
from actuator_svc.cloud.provider import (
    FleetError,
    FleetRequest,
    FleetResult,
    Instance,
    LaunchTemplate,
)
from actuator_svc.core.fleet_errors import is_unavailable_offering
from actuator_svc.core.launch_template import BlockDevice, LaunchTemplateConfig
from actuator_svc.errors import CloudPermanentError

log = structlog.get_logger("actuator_svc.cloud.ec2")
_ALIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
# EC2 takes at most 200 values in one filter.
_MAX_FILTER_VALUES = 200


class Ec2LaunchCalls(AwsCalls):
    """CreateLaunchTemplate and friends, CreateFleet, DescribeInstances, TerminateInstances."""

    describe_page_size: int
    # Launch templates this process ensured, by name: re-created if deleted under it.
    _templates: dict[str, LaunchTemplateConfig]

    async def ensure_launch_template(self, config: LaunchTemplateConfig) -> None:
        """Create the launch template unless this process or EC2 already has it."""
        if config.name in self._templates:
            return
        data: dict[str, Any] = {
            "ImageId": config.image_id,
            "UserData": base64.b64encode(config.user_data.encode()).decode(),
            "MetadataOptions": {
                "HttpEndpoint": config.metadata_options.http_endpoint,
                "HttpProtocolIpv6": config.metadata_options.http_protocol_ipv6,
                "HttpPutResponseHopLimit": config.metadata_options.http_put_response_hop_limit,
                "HttpTokens": config.metadata_options.http_tokens,
            },
        }
        if config.associate_public_ip_address:
            data["NetworkInterfaces"] = [
                {
                    "DeviceIndex": 0,
                    "AssociatePublicIpAddress": True,
                    "Groups": list(config.security_group_ids),
                }
            ]
        else:
            data["SecurityGroupIds"] = list(config.security_group_ids)
        if config.instance_profile:
            data["IamInstanceProfile"] = {"Name": config.instance_profile}
        if config.block_devices:
            data["BlockDeviceMappings"] = [_block_device(b) for b in config.block_devices]
        if config.capacity_reservation_id:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {
                    "CapacityReservationId": config.capacity_reservation_id
                }
            }
            if config.capacity_block:
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        try:
            await self._call(
                "CreateLaunchTemplate",
                self._ec2.create_launch_template,
                LaunchTemplateName=config.name,
                LaunchTemplateData=data,
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": tag_list({**config.tags, "Name": config.name}),
                    }
                ],
            )
            log.info("launch_template_created", launch_template=config.name)
        except CloudPermanentError as exc:
            if "AlreadyExists" not in exc.code:
                raise
        self._templates[config.name] = config

    async def find_launch_templates(self, tags: Mapping[str, str]) -> list[LaunchTemplate]:
        """The launch templates carrying all `tags`, page by page."""
        found: list[LaunchTemplate] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": tag_filters(tags), "MaxResults": 200}
            if token:
                kwargs["NextToken"] = token
            page = await self._call(
                "DescribeLaunchTemplates", self._ec2.describe_launch_templates, **kwargs
            )
            for item in page.get("LaunchTemplates", []):
                created = item.get("CreateTime")
                found.append(
                    LaunchTemplate(
                        name=item["LaunchTemplateName"],
                        created_seconds=created.timestamp() if created else 0.0,
                    )
                )
            token = page.get("NextToken")
            if not token:
                return found

    async def delete_launch_template(self, name: str) -> None:
        """Delete a launch template; one already gone is fine."""
        self._templates.pop(name, None)
        try:
            await self._call(
                "DeleteLaunchTemplate",
                self._ec2.delete_launch_template,
                LaunchTemplateName=name,
            )
        except CloudPermanentError as exc:
            if not _is_missing_template(exc.code):
                raise
        log.info("launch_template_deleted", launch_template=name)

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        """One instant CreateFleet call; capacity errors come back in the result."""
        zone_of = {o.subnet_id: o.zone for t in request.templates for o in t.overrides}
        # An instant fleet's capacity type: spot, on-demand or capacity-block (a Capacity
        # Block's options are on-demand ones; its templates name the block).
        options_key = "SpotOptions" if request.capacity_type == "spot" else "OnDemandOptions"
        kwargs: dict[str, Any] = {
            "Type": "instant",
            "ClientToken": request.client_token,
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": request.capacity_type,
            },
            options_key: {"AllocationStrategy": request.allocation_strategy},
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": t.launch_template_name,
                        "Version": "$Latest",
                    },
                    "Overrides": [
                        {
                            "InstanceType": o.instance_type,
                            "SubnetId": o.subnet_id,
                            "AvailabilityZone": o.zone,
                            "Priority": o.priority,
                        }
                        for o in t.overrides
                    ],
                }
                for t in request.templates
            ],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list(request.tags)}
                for kind in ("instance", "volume")
            ],
        }
        try:
            response = await self._create_fleet(request, kwargs)
        except CloudPermanentError as exc:
            if is_unavailable_offering(exc.code):
                return FleetResult(None, "", "", (FleetError("", "", exc.code, str(exc)),))
            raise
        errors = []
        for e in response.get("Errors", []):
            override = (e.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            errors.append(
                FleetError(
                    instance_type=override.get("InstanceType", ""),
                    zone=override.get("AvailabilityZone")
                    or zone_of.get(override.get("SubnetId", ""), ""),
                    code=e.get("ErrorCode", "Unknown"),
                    message=e.get("ErrorMessage", ""),
                )
            )
        for launched in response.get("Instances", []):
            ids = launched.get("InstanceIds") or []
            if ids:
                override = (launched.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
                return FleetResult(
                    instance_id=ids[0],
                    instance_type=launched.get("InstanceType") or override.get("InstanceType", ""),
                    zone=override.get("AvailabilityZone")
                    or zone_of.get(override.get("SubnetId", ""), ""),
                    errors=tuple(errors),
                )
        return FleetResult(None, "", "", tuple(errors))

    async def _create_fleet(self, request: FleetRequest, kwargs: dict[str, Any]) -> Any:
        """CreateFleet; when a launch template it names was deleted (garbage collection on
        another replica), re-create the templates this process knows and send it once more
        (a refused call used no ClientToken)."""
        try:
            return await self._call("CreateFleet", self._ec2.create_fleet, **kwargs)
        except CloudPermanentError as exc:
            names = [t.launch_template_name for t in request.templates]
            if not _is_missing_template(exc.code) or not all(n in self._templates for n in names):
                raise
            configs = [self._templates.pop(n) for n in names]
            for config in configs:
                await self.ensure_launch_template(config)
            return await self._call("CreateFleet", self._ec2.create_fleet, **kwargs)

    async def find_instances(
        self,
        tags: Mapping[str, str],
        *,
        include_terminated: bool = False,
        instance_ids: Sequence[str] | None = None,
    ) -> list[Instance]:
        """Instances carrying all `tags`, filtered by EC2 and read page by page (NextToken);
        only those of `instance_ids` when given, asked for in groups of EC2's 200 filter values
        (an `instance-id` filter, not InstanceIds: an unknown id is not an error)."""
        if instance_ids is not None:
            ids = list(dict.fromkeys(instance_ids))
            found: list[Instance] = []
            for start in range(0, len(ids), _MAX_FILTER_VALUES):
                group = ids[start : start + _MAX_FILTER_VALUES]
                found += await self._describe(
                    tags, include_terminated, [{"Name": "instance-id", "Values": group}]
                )
            return found
        return await self._describe(tags, include_terminated, [])

    async def _describe(
        self, tags: Mapping[str, str], include_terminated: bool, extra: list[dict[str, Any]]
    ) -> list[Instance]:
        filters = tag_filters(tags) + extra
        if not include_terminated:
            filters.append({"Name": "instance-state-name", "Values": _ALIVE_STATES})
        instances: list[Instance] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": filters, "MaxResults": self.describe_page_size}
            if token:
                kwargs["NextToken"] = token
            page = await self._call("DescribeInstances", self._ec2.describe_instances, **kwargs)
            for reservation in page.get("Reservations", []):
                instances += [_instance(i) for i in reservation.get("Instances", [])]
            token = page.get("NextToken")
            if not token:
                return instances

    async def terminate_instances(self, instance_ids: Sequence[str]) -> dict[str, str]:
        """Terminate; each instance's state after the call."""
        response = await self._call(
            "TerminateInstances",
            self._ec2.terminate_instances,
            InstanceIds=list(instance_ids),
        )
        return {
            i["InstanceId"]: i.get("CurrentState", {}).get("Name", "")
            for i in response.get("TerminatingInstances", [])
        }


def _is_missing_template(code: str) -> bool:
    """InvalidLaunchTemplateName.NotFoundException, InvalidLaunchTemplateId.NotFound, ..."""
    return code.startswith(
        ("InvalidLaunchTemplateName.NotFound", "InvalidLaunchTemplateId.NotFound")
    )


def _block_device(device: BlockDevice) -> dict[str, Any]:
    ebs: dict[str, Any] = {
        "VolumeType": device.volume_type or "gp3",
        "Encrypted": device.encrypted,
        "DeleteOnTermination": device.delete_on_termination,
    }
    if device.volume_size_bytes:
        ebs["VolumeSize"] = max(1, device.volume_size_bytes // 1024**3)
    if device.iops:
        ebs["Iops"] = device.iops
    if device.throughput_mibps:
        ebs["Throughput"] = device.throughput_mibps
    if device.kms_key_id:
        ebs["KmsKeyId"] = device.kms_key_id
    if device.snapshot_id:
        ebs["SnapshotId"] = device.snapshot_id
    return {"DeviceName": device.device_name, "Ebs": ebs}


def _instance(data: Mapping[str, Any]) -> Instance:
    lifecycle = data.get("InstanceLifecycle")
    reservation = str(data.get("CapacityReservationId") or "")
    capacity_type = "spot" if lifecycle == "spot" else "on-demand"
    if reservation:
        capacity_type = "reserved"
    return Instance(
        id=data["InstanceId"],
        instance_type=data.get("InstanceType", ""),
        zone=data.get("Placement", {}).get("AvailabilityZone", ""),
        capacity_type=capacity_type,
        capacity_reservation_id=reservation,
        capacity_reservation_type=(
            ("capacity-block" if lifecycle == "capacity-block" else "default")
            if reservation
            else ""
        ),
        state=data.get("State", {}).get("Name", ""),
        image_id=data.get("ImageId", ""),
        launch_time=data.get("LaunchTime"),
        tags=tags_dict(data.get("Tags")),
        subnet_id=str(data.get("SubnetId") or ""),
        security_group_ids=_security_group_ids(data),
    )


def _security_group_ids(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The instance's security groups (its SecurityGroups[], else its interfaces' Groups[])."""
    groups = list(data.get("SecurityGroups") or [])
    if not groups:
        groups = [g for i in data.get("NetworkInterfaces") or [] for g in i.get("Groups") or []]
    return tuple(sorted({str(g["GroupId"]) for g in groups if g.get("GroupId")}))
