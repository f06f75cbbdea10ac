"""Instant CreateFleet with capacity pools, as AWS runs it.

moto's own CreateFleet launches from the cheapest spec with no notion of capacity, never
reports `Errors[]` and ignores ClientToken. daiku's retry-in-milliseconds logic depends on all
three, so the emulator plans instant fleets here and launches the chosen pool's instances
through moto's EC2 backend (`run_instances`), so they are ordinary moto instances afterwards.

AWS's behaviour reproduced: the overrides are walked in the order the allocation strategy
implies (on-demand `lowest-price` by on-demand price, `prioritized` by Priority; spot by spot
price, `capacity-optimized-prioritized` by Priority), the first pool with capacity gets the
whole target capacity, and every pool tried before it is reported in `Errors[]`. When none
has capacity nothing is launched and every pool is reported.

An override whose launch template targets a capacity reservation
(`CapacityReservationSpecification.CapacityReservationTarget`) launches into that reservation
instead of the on-demand pool: it takes one of the reservation's free slots or fails with
`ReservationCapacityExceeded` (see `localcloud.ec2.reservations`). A `capacity-block` fleet
must target one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localcloud.ec2.capacity import CapacityPools, PoolKey
from localcloud.ec2.reservations import CAPACITY_BLOCK, CapacityReservations
from localcloud.ec2.spot_prices import spot_price

UNSUPPORTED = "Unsupported"
INSUFFICIENT_FREE_ADDRESSES = "InsufficientFreeAddressesInSubnet"
INVALID_PARAMETER = "InvalidParameterValue"


class FleetRequestError(Exception):
    """The whole CreateFleet request is invalid (EC2 answers with an error, not `Errors[]`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class FleetCandidate:
    """One (launch template, override, zone) the fleet may launch from."""

    position: int
    launch_template_spec: Mapping[str, str]
    overrides: Mapping[str, Any]
    instance_type: str
    zone: str
    subnet_id: str | None
    image_id: str | None
    priority: float
    price: float
    weighted_capacity: float
    problem: tuple[str, str] | None = None
    # The capacity reservation the launch template targets ("" for none).
    reservation_id: str = ""

    def pool(self, capacity_type: str) -> PoolKey:
        # A Capacity Block is on-demand capacity set aside; pools know spot and on-demand only.
        pool_type = "on-demand" if capacity_type == CAPACITY_BLOCK else capacity_type
        return PoolKey(self.instance_type, self.zone, pool_type)

    def launch_template_and_overrides(self) -> dict[str, Any]:
        return {
            "LaunchTemplateSpecification": dict(self.launch_template_spec),
            "Overrides": dict(self.overrides),
        }


@dataclass(frozen=True)
class FleetError:
    candidate: FleetCandidate
    capacity_type: str
    error_code: str
    error_message: str

    def to_response(self) -> dict[str, Any]:
        return {
            "LaunchTemplateAndOverrides": self.candidate.launch_template_and_overrides(),
            "Lifecycle": self.capacity_type,
            "ErrorCode": self.error_code,
            "ErrorMessage": self.error_message,
        }


@dataclass(frozen=True)
class FleetLaunch:
    candidate: FleetCandidate
    capacity_type: str
    instance_ids: tuple[str, ...]

    def to_response(self) -> dict[str, Any]:
        return {
            "LaunchTemplateAndOverrides": self.candidate.launch_template_and_overrides(),
            "Lifecycle": self.capacity_type,
            "InstanceIds": list(self.instance_ids),
            "InstanceType": self.candidate.instance_type,
        }


@dataclass(frozen=True)
class FleetOutcome:
    fleet_id: str
    capacity_type: str
    candidates: tuple[FleetCandidate, ...]
    errors: tuple[FleetError, ...]
    launch: FleetLaunch | None = None
    allocation_strategy: str = ""

    def to_response(self) -> dict[str, Any]:
        return {
            "FleetId": self.fleet_id,
            "Errors": [error.to_response() for error in self.errors],
            "Instances": [self.launch.to_response()] if self.launch else [],
        }


@dataclass(frozen=True)
class FleetContext:
    """What planning a fleet needs from the emulator besides the request."""

    region: str
    on_demand_prices: Mapping[str, float]
    instance_type_zones: Mapping[str, list[str]]


def fleet_capacity_type(params: Mapping[str, Any]) -> tuple[str, int]:
    """(capacity type, total target capacity) of an instant fleet request."""
    target = params.get("TargetCapacitySpecification") or {}
    total = target.get("TotalTargetCapacity")
    if total is None or int(total) < 1:
        raise FleetRequestError(
            "InvalidTargetCapacitySpecification",
            "TargetCapacitySpecification.TotalTargetCapacity must be at least 1",
        )
    capacity_type = target.get("DefaultTargetCapacityType")
    if capacity_type is None:
        capacity_type = "spot" if int(target.get("SpotTargetCapacity") or 0) > 0 else "on-demand"
    if capacity_type not in ("spot", "on-demand", CAPACITY_BLOCK):
        raise FleetRequestError(
            INVALID_PARAMETER,
            "DefaultTargetCapacityType must be spot, on-demand or capacity-block, got "
            f"{capacity_type!r}",
        )
    return str(capacity_type), int(total)


def plan_candidates(
    params: Mapping[str, Any], backend: Any, context: FleetContext, capacity_type: str
) -> list[FleetCandidate]:
    """Every (template, override, zone) of the request, in request order."""
    configs = params.get("LaunchTemplateConfigs") or []
    if not configs:
        raise FleetRequestError("MissingParameter", "LaunchTemplateConfigs must not be empty")
    candidates: list[FleetCandidate] = []
    for config_index, config in enumerate(configs):
        spec = config.get("LaunchTemplateSpecification") or {}
        template = _launch_template(backend, spec, config_index)
        version_arg = spec.get("Version") or "$Default"
        try:
            version = template.get_version(version_arg)
        except Exception as error:  # moto raises its own not-found error type
            raise FleetRequestError(
                "InvalidLaunchTemplateId.VersionNotFound",
                f"LaunchTemplateConfigs.{config_index + 1}: version {version_arg} "
                f"of {template.id} does not exist",
            ) from error
        template_data: Mapping[str, Any] = version.data
        resolved_spec = {"LaunchTemplateId": template.id, "Version": str(version.number)}
        for override in config.get("Overrides") or [{}]:
            candidates.extend(
                _candidates_for_override(
                    position=len(candidates),
                    override=override,
                    template_data=template_data,
                    resolved_spec=resolved_spec,
                    backend=backend,
                    context=context,
                    capacity_type=capacity_type,
                )
            )
    return candidates


def _launch_template(backend: Any, spec: Mapping[str, Any], config_index: int) -> Any:
    try:
        if spec.get("LaunchTemplateId"):
            return backend.get_launch_template(spec["LaunchTemplateId"])
        if spec.get("LaunchTemplateName"):
            return backend.get_launch_template_by_name(spec["LaunchTemplateName"])
    except Exception as error:  # moto's not-found errors carry the AWS code
        code = getattr(error, "code", "InvalidLaunchTemplateId.NotFound")
        message = getattr(error, "message", str(error))
        raise FleetRequestError(str(code), str(message)) from error
    raise FleetRequestError(
        "MissingParameter",
        f"LaunchTemplateConfigs.{config_index + 1}.LaunchTemplateSpecification needs "
        "LaunchTemplateId or LaunchTemplateName",
    )


def _candidates_for_override(
    *,
    position: int,
    override: Mapping[str, Any],
    template_data: Mapping[str, Any],
    resolved_spec: Mapping[str, str],
    backend: Any,
    context: FleetContext,
    capacity_type: str,
) -> list[FleetCandidate]:
    instance_type = override.get("InstanceType") or template_data.get("InstanceType")
    if not instance_type:
        raise FleetRequestError(
            "MissingParameter", "an instance type is needed in the override or launch template"
        )
    subnet_id = override.get("SubnetId") or _template_subnet(template_data)
    zones: list[tuple[str, str | None, bool]]  # (zone, subnet, zone was expanded by us)
    if subnet_id:
        try:
            subnet = backend.get_subnet(subnet_id)
        except Exception as error:
            raise FleetRequestError(
                "InvalidSubnetID.NotFound", f"The subnet ID '{subnet_id}' does not exist"
            ) from error
        zones = [(str(subnet.availability_zone), str(subnet_id), False)]
    elif override.get("AvailabilityZone"):
        zone = str(override["AvailabilityZone"])
        zones = [(zone, _default_subnet_id(backend, zone), False)]
    else:
        # No subnet and no zone: AWS picks a zone; the emulator offers each zone in turn.
        offered = context.instance_type_zones.get(str(instance_type)) or [f"{context.region}a"]
        zones = [(zone, _default_subnet_id(backend, zone), True) for zone in offered]

    on_demand = context.on_demand_prices.get(str(instance_type))
    priority = override.get("Priority")
    target = (template_data.get("CapacityReservationSpecification") or {}).get(
        "CapacityReservationTarget"
    ) or {}
    reservation_id = str(target.get("CapacityReservationId") or "")
    if capacity_type == CAPACITY_BLOCK and not reservation_id:
        raise FleetRequestError(
            INVALID_PARAMETER,
            "a capacity-block fleet needs launch templates that target a Capacity Block",
        )
    weighted_capacity = float(override.get("WeightedCapacity") or 1.0)
    candidates = []
    for offset, (zone, zone_subnet_id, expanded) in enumerate(zones):
        if on_demand is None:
            price = math.inf
        elif capacity_type == "spot":
            price = spot_price(str(instance_type), zone, on_demand)
        else:
            price = on_demand
        echoed = dict(override)
        if expanded:
            echoed["AvailabilityZone"] = zone
        candidates.append(
            FleetCandidate(
                position=position + offset,
                launch_template_spec=resolved_spec,
                overrides=echoed,
                instance_type=str(instance_type),
                zone=zone,
                subnet_id=zone_subnet_id,
                image_id=override.get("ImageId"),
                priority=float(priority) if priority is not None else math.inf,
                price=price,
                weighted_capacity=weighted_capacity,
                problem=_offering_problem(str(instance_type), zone, context),
                reservation_id=reservation_id,
            )
        )
    return candidates


def _template_subnet(template_data: Mapping[str, Any]) -> str | None:
    for interface in template_data.get("NetworkInterfaces") or []:
        if interface.get("SubnetId"):
            return str(interface["SubnetId"])
    return None


def _default_subnet_id(backend: Any, zone: str) -> str | None:
    subnet = backend.get_default_subnets().get(zone)
    return str(subnet.id) if subnet is not None else None


def _offering_problem(
    instance_type: str, zone: str, context: FleetContext
) -> tuple[str, str] | None:
    if instance_type not in context.instance_type_zones:
        return (INVALID_PARAMETER, f"The instance type '{instance_type}' does not exist")
    if zone not in context.instance_type_zones[instance_type]:
        return (
            UNSUPPORTED,
            f"Your requested instance type ({instance_type}) is not supported in your "
            f"requested Availability Zone ({zone}).",
        )
    return None


def allocation_strategy(params: Mapping[str, Any], capacity_type: str) -> str:
    """The request's allocation strategy for its capacity type (EC2's default: lowest-price)."""
    options = "SpotOptions" if capacity_type == "spot" else "OnDemandOptions"
    return str((params.get(options) or {}).get("AllocationStrategy") or "lowest-price")


def order_candidates(
    params: Mapping[str, Any], capacity_type: str, candidates: list[FleetCandidate]
) -> list[FleetCandidate]:
    """The order the fleet's allocation strategy tries its pools in."""
    strategy = allocation_strategy(params, capacity_type)
    if strategy in ("capacity-optimized-prioritized", "prioritized"):
        return sorted(candidates, key=lambda c: (c.priority, c.position))
    # Price per unit of capacity, as AWS compares weighted overrides.
    return sorted(candidates, key=lambda c: (c.price / c.weighted_capacity, c.position))


def run_instant_fleet(
    params: Mapping[str, Any],
    *,
    backend: Any,
    pools: CapacityPools,
    context: FleetContext,
    fleet_id: str,
    launch_tags: Mapping[str, Mapping[str, str]],
    reservations: CapacityReservations | None = None,
) -> FleetOutcome:
    """Plan the fleet, launch from the first pool with capacity, report the pools that failed."""
    capacity_type, total_capacity = fleet_capacity_type(params)
    ordered = order_candidates(
        params, capacity_type, plan_candidates(params, backend, context, capacity_type)
    )
    errors: list[FleetError] = []
    for candidate in ordered:
        if candidate.reservation_id:
            refused = (
                reservations.take(candidate.reservation_id, candidate.instance_type, candidate.zone)
                if reservations is not None
                else ("InvalidCapacityReservationId.NotFound", "no capacity reservations here")
            )
            if refused is not None:
                errors.append(FleetError(candidate, capacity_type, *refused))
                continue
        if candidate.subnet_id and _out_of_addresses(backend, candidate.subnet_id):
            errors.append(
                FleetError(
                    candidate,
                    capacity_type,
                    INSUFFICIENT_FREE_ADDRESSES,
                    f"There are not enough free addresses in subnet '{candidate.subnet_id}' to "
                    "satisfy the requested number of instances.",
                )
            )
            continue
        # A pool the driver marked unavailable fails with the code it chose, even where moto's
        # data says the zone does not offer the type: the explicit setup is what a test means.
        pool_error = (
            None if candidate.reservation_id else pools.error_for(candidate.pool(capacity_type))
        )
        if pool_error is not None:
            message = _pool_message(candidate, pool_error)
            errors.append(FleetError(candidate, capacity_type, pool_error, message))
            continue
        if candidate.problem is not None:
            code, message = candidate.problem
            errors.append(FleetError(candidate, capacity_type, code, message))
            continue
        count = math.ceil(total_capacity / candidate.weighted_capacity)
        instance_ids = _launch(
            backend,
            candidate,
            capacity_type=capacity_type,
            count=count,
            params=params,
            launch_tags=launch_tags,
            context=context,
        )
        if candidate.reservation_id and reservations is not None:
            reservations.assign(candidate.reservation_id, instance_ids)
        launch = FleetLaunch(candidate, capacity_type, tuple(instance_ids))
        return FleetOutcome(
            fleet_id,
            capacity_type,
            tuple(ordered),
            tuple(errors),
            launch,
            allocation_strategy(params, capacity_type),
        )
    return FleetOutcome(
        fleet_id,
        capacity_type,
        tuple(ordered),
        tuple(errors),
        None,
        allocation_strategy(params, capacity_type),
    )


def _out_of_addresses(backend: Any, subnet_id: str) -> bool:
    """Whether the subnet has no free IPv4 address (moto counts them per subnet)."""
    try:
        return int(backend.get_subnet(subnet_id).available_ip_address_count) < 1
    except Exception:  # an unknown subnet was refused when the candidate was planned
        return False


def _pool_message(candidate: FleetCandidate, error_code: str) -> str:
    if error_code == "InsufficientInstanceCapacity":
        return (
            f"We currently do not have sufficient {candidate.instance_type} capacity in the "
            f"Availability Zone you requested ({candidate.zone}). Our system will be working on "
            "provisioning additional capacity."
        )
    return f"{error_code} for {candidate.instance_type} in {candidate.zone}."


def _launch(
    backend: Any,
    candidate: FleetCandidate,
    *,
    capacity_type: str,
    count: int,
    params: Mapping[str, Any],
    launch_tags: Mapping[str, Mapping[str, str]],
    context: FleetContext,
) -> list[str]:
    template_arg = dict(candidate.launch_template_spec)
    template_data: Mapping[str, Any] = backend._get_template_from_args(template_arg).data
    if not (candidate.image_id or template_data.get("ImageId")):
        raise FleetRequestError(
            "MissingParameter", "an image id is needed in the override or launch template"
        )
    template_tags = _tags_by_resource(template_data.get("TagSpecifications") or [])
    request_tags = _tags_by_resource(params.get("TagSpecifications") or [])
    # moto applies the template's instance tags itself; volume tags it leaves to the caller.
    tags = {
        "instance": {**request_tags.get("instance", {}), **launch_tags.get("instance", {})},
        "volume": {**template_tags.get("volume", {}), **request_tags.get("volume", {})},
    }
    kwargs: dict[str, Any] = {
        "instance_type": candidate.instance_type,
        "is_instance_type_default": False,
        "launch_template": template_arg,
        "tags": tags,
        "region_name": context.region,
        "metadata_options": template_data.get("MetadataOptions") or {},
    }
    if template_data.get("BlockDeviceMappings"):
        # Passed explicitly so they replace moto's default root volume, as on EC2 where the
        # template's mapping for the root device overrides the AMI's.
        kwargs["block_device_mappings"] = template_data["BlockDeviceMappings"]
    if candidate.subnet_id:
        kwargs["subnet_id"] = candidate.subnet_id
    else:
        kwargs["placement"] = candidate.zone
    if not template_data.get("SecurityGroupIds") and not template_data.get("SecurityGroups"):
        interface_groups = [
            group
            for interface in template_data.get("NetworkInterfaces") or []
            for group in interface.get("Groups") or []
        ]
        if interface_groups:
            kwargs["security_group_ids"] = interface_groups
    if capacity_type == "spot":
        kwargs["instance_market_options"] = {"MarketType": "spot"}
    if params.get("ClientToken"):
        kwargs["client_token"] = params["ClientToken"]
    reservation = backend.run_instances(candidate.image_id or "", count, None, [], **kwargs)
    for instance in reservation.instances:
        if candidate.reservation_id:
            # What DescribeInstances shows of an instance in a reservation (moto's serializer
            # reads these attributes by name).
            instance.capacity_reservation_id = candidate.reservation_id
            if capacity_type == CAPACITY_BLOCK:
                instance.lifecycle = CAPACITY_BLOCK
    return [str(instance.id) for instance in reservation.instances]


def _tags_by_resource(tag_specifications: list[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    tags: dict[str, dict[str, str]] = {}
    for specification in tag_specifications:
        resource_type = str(specification.get("ResourceType") or "")
        for tag in specification.get("Tags") or specification.get("Tag") or []:
            tags.setdefault(resource_type, {})[str(tag["Key"])] = str(tag.get("Value", ""))
    return tags
