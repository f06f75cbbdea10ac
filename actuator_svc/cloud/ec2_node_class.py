"""An EC2NodeClass's selector terms resolved: subnets, security groups, images, reservations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actuator_svc.cloud.aws_calls import AwsCalls, tag_filters
from actuator_svc.cloud.provider import CapacityReservation, Image, SecurityGroup, Subnet
from actuator_svc.core.node_class import (
    CapacityReservationTerm,
    ImageTerm,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.errors import CloudPermanentError

_ALIAS_FAMILIES = {"al2023": "amazon-eks-node-al2023-{arch}-standard-{version}"}


class Ec2NodeClassCalls(AwsCalls):
    """DescribeSubnets, DescribeSecurityGroups, DescribeImages, DescribeCapacityReservations."""

    async def find_subnets(self, terms: Sequence[SubnetTerm]) -> list[Subnet]:
        """Subnets matching any term."""
        found: dict[str, Subnet] = {}
        for term in terms:
            kwargs: dict[str, Any] = (
                {"SubnetIds": [term.id]} if term.id else {"Filters": tag_filters(term.tags)}
            )
            page = await self._call("DescribeSubnets", self._ec2.describe_subnets, **kwargs)
            for s in page.get("Subnets", []):
                found[s["SubnetId"]] = Subnet(
                    id=s["SubnetId"],
                    zone=s["AvailabilityZone"],
                    available_ip_count=int(s.get("AvailableIpAddressCount", 0)),
                    zone_id=str(s.get("AvailabilityZoneId", "")),
                )
        return sorted(found.values(), key=lambda s: s.id)

    async def find_security_groups(self, terms: Sequence[SecurityGroupTerm]) -> list[SecurityGroup]:
        """Security groups matching any term, by id."""
        found: dict[str, SecurityGroup] = {}
        for term in terms:
            kwargs: dict[str, Any]
            if term.id:
                kwargs = {"GroupIds": [term.id]}
            elif term.name:
                kwargs = {"Filters": [{"Name": "group-name", "Values": [term.name]}]}
            else:
                kwargs = {"Filters": tag_filters(term.tags)}
            page = await self._call(
                "DescribeSecurityGroups",
                self._ec2.describe_security_groups,
                **kwargs,
            )
            for g in page.get("SecurityGroups", []):
                found[g["GroupId"]] = SecurityGroup(g["GroupId"], str(g.get("GroupName", "")))
        return [found[i] for i in sorted(found)]

    async def find_images(self, terms: Sequence[ImageTerm]) -> list[Image]:
        """Available images matching any term."""
        found: dict[str, Image] = {}
        for term in terms:
            kwargs: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
            if term.id:
                kwargs["ImageIds"] = [term.id]
            if term.name:
                kwargs["Filters"].append({"Name": "name", "Values": [term.name]})
            if term.alias:
                family, _, version = term.alias.partition("@")
                pattern = _ALIAS_FAMILIES[family]
                version = "*" if version in ("", "latest") else f"*{version}"
                names = [pattern.format(arch=a, version=version) for a in ("x86_64", "arm64")]
                kwargs["Filters"].append({"Name": "name", "Values": names})
            if term.tags:
                kwargs["Filters"] += tag_filters(term.tags)
            if term.owner:
                kwargs["Owners"] = [term.owner]
            page = await self._call("DescribeImages", self._ec2.describe_images, **kwargs)
            for i in page.get("Images", []):
                found[i["ImageId"]] = Image(
                    id=i["ImageId"],
                    name=i.get("Name", ""),
                    architecture=i.get("Architecture", "x86_64"),
                    creation_date=i.get("CreationDate", ""),
                )
        return list(found.values())

    async def find_capacity_reservations(
        self, terms: Sequence[CapacityReservationTerm]
    ) -> list[CapacityReservation]:
        """Active reservations matching any term: by id, or by tags (and owner)."""
        found: dict[str, CapacityReservation] = {}
        for term in terms:
            kwargs: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["active"]}]}
            if term.id:
                kwargs["CapacityReservationIds"] = [term.id]
            kwargs["Filters"] += tag_filters(term.tags)
            if term.owner_id:
                kwargs["Filters"].append({"Name": "owner-id", "Values": [term.owner_id]})
            try:
                page = await self._call(
                    "DescribeCapacityReservations",
                    self._ec2.describe_capacity_reservations,
                    **kwargs,
                )
            except CloudPermanentError as exc:
                if exc.code.startswith("InvalidCapacityReservationId"):
                    continue  # an id that does not exist (any more) selects nothing
                raise
            for item in page.get("CapacityReservations", []):
                found[item["CapacityReservationId"]] = CapacityReservation(
                    id=item["CapacityReservationId"],
                    instance_type=item.get("InstanceType", ""),
                    zone=item.get("AvailabilityZone", ""),
                    owner_id=item.get("OwnerId", ""),
                    reservation_type=item.get("ReservationType") or "default",
                    instance_match_criteria=item.get("InstanceMatchCriteria", "open"),
                    available_instance_count=int(item.get("AvailableInstanceCount", 0)),
                    total_instance_count=int(item.get("TotalInstanceCount", 0)),
                    end_time=item.get("EndDate"),
                )
        return sorted(found.values(), key=lambda r: r.id)
