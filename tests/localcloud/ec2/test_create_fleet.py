"""Instant CreateFleet against the emulator: capacity pools, Errors[], idempotency, tags."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from localcloud.ec2 import Ec2Emulator, PoolKey
from localcloud.ec2.instance_types import on_demand_prices
from localcloud.ec2.spot_prices import spot_price

from .conftest import ec2_client

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client
    from types_boto3_ec2.type_defs import CreateFleetResultTypeDef, InstanceTypeDef


def create_fleet(
    ec2: EC2Client,
    emulator: Ec2Emulator,
    launch_template_id: str,
    pools: list[tuple[str, str]],
    *,
    capacity_type: str = "on-demand",
    strategy: str | None = None,
    client_token: str | None = None,
    tags: dict[str, str] | None = None,
) -> CreateFleetResultTypeDef:
    overrides = [
        {"InstanceType": instance_type, "SubnetId": emulator.subnet_ids[zone], "Priority": float(i)}
        for i, (instance_type, zone) in enumerate(pools)
    ]
    request: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": capacity_type,
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateId": launch_template_id,
                    "Version": "$Latest",
                },
                "Overrides": overrides,
            }
        ],
    }
    if capacity_type == "spot":
        request["SpotOptions"] = {"AllocationStrategy": strategy or "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": strategy or "lowest-price"}
    if client_token:
        request["ClientToken"] = client_token
    if tags:
        request["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    return ec2.create_fleet(**request)


def launched(response: CreateFleetResultTypeDef) -> list[tuple[str, str]]:
    return [
        (i["InstanceType"], i["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"])
        for i in response["Instances"]
    ]


def error_pools(response: CreateFleetResultTypeDef) -> list[tuple[str, str, str]]:
    return [
        (
            e["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"],
            e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"],
            e["ErrorCode"],
        )
        for e in response["Errors"]
    ]


def describe(ec2: EC2Client, instance_id: str) -> InstanceTypeDef:
    reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservations[0]["Instances"][0]


def test_lowest_price_launches_the_cheapest_on_demand_override(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """With every pool available, an on-demand lowest-price fleet launches the cheapest type."""
    prices = on_demand_prices("us-east-1")
    pools = [("m5.xlarge", "us-east-1a"), ("c5.large", "us-east-1a"), ("m5.large", "us-east-1a")]
    cheapest = min(pools, key=lambda pool: prices[pool[0]])

    response = create_fleet(ec2, emulator, launch_template_id, pools)

    assert response["Errors"] == []
    assert launched(response) == [(cheapest[0], emulator.subnet_ids["us-east-1a"])]
    instance = describe(ec2, response["Instances"][0]["InstanceIds"][0])
    assert instance["InstanceType"] == cheapest[0]
    assert instance["Placement"]["AvailabilityZone"] == "us-east-1a"
    assert "InstanceLifecycle" not in instance


def test_exhausted_pools_are_reported_and_the_next_pool_launches(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Pools without capacity are reported InsufficientInstanceCapacity; the next one launches."""
    pools = [("c5.large", "us-east-1a"), ("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")]
    emulator.set_capacity(
        instance_type="c5.large", zone="us-east-1a", capacity_type="on-demand", available=False
    )
    emulator.set_capacity(
        instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", available=False
    )

    response = create_fleet(ec2, emulator, launch_template_id, pools, strategy="prioritized")

    subnets = emulator.subnet_ids
    assert error_pools(response) == [
        ("c5.large", subnets["us-east-1a"], "InsufficientInstanceCapacity"),
        ("m5.large", subnets["us-east-1a"], "InsufficientInstanceCapacity"),
    ]
    assert {e["Lifecycle"] for e in response["Errors"]} == {"on-demand"}
    assert launched(response) == [("m5.large", subnets["us-east-1b"])]


def test_all_pools_exhausted_launches_nothing_and_reports_every_pool(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """When no pool has capacity the fleet launches no instance and reports all pools."""
    pools = [("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")]
    for instance_type, zone in pools:
        emulator.set_capacity(
            instance_type=instance_type, zone=zone, capacity_type="spot", available=False
        )

    response = create_fleet(ec2, emulator, launch_template_id, pools, capacity_type="spot")

    assert response["Instances"] == []
    assert sorted(error_pools(response)) == sorted(
        (t, emulator.subnet_ids[z], "InsufficientInstanceCapacity") for t, z in pools
    )
    running = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
    )["Reservations"]
    assert running == []


def test_spot_fleet_launches_the_cheapest_spot_pool_with_spot_lifecycle(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """A spot fleet launches the pool with the lowest spot price, as a spot instance."""
    prices = on_demand_prices("us-east-1")
    pools = [(t, z) for t in ("m5.large", "c5.large") for z in ("us-east-1a", "us-east-1b")]
    cheapest = min(pools, key=lambda pool: spot_price(pool[0], pool[1], prices[pool[0]]))

    response = create_fleet(ec2, emulator, launch_template_id, pools, capacity_type="spot")

    assert launched(response) == [(cheapest[0], emulator.subnet_ids[cheapest[1]])]
    assert response["Instances"][0]["Lifecycle"] == "spot"
    instance = describe(ec2, response["Instances"][0]["InstanceIds"][0])
    assert instance["InstanceLifecycle"] == "spot"
    assert instance["Placement"]["AvailabilityZone"] == cheapest[1]


def test_instance_carries_tags_image_user_data_and_volume_tags(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """The instance has the request's tags and the template's AMI, user data, group, volume tags."""
    response = create_fleet(
        ec2,
        emulator,
        launch_template_id,
        [("m5.large", "us-east-1c")],
        tags={"daiku.dev/nodeclaim": "claim-1", "Name": "daiku/claim-1"},
    )

    instance_id = response["Instances"][0]["InstanceIds"][0]
    instance = describe(ec2, instance_id)
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["daiku.dev/nodeclaim"] == "claim-1"
    assert tags["Name"] == "daiku/claim-1"
    assert tags["aws:ec2:fleet-id"] == response["FleetId"]
    assert instance["ImageId"] == emulator.image_ids["x86_64"]
    assert instance["SubnetId"] == emulator.subnet_ids["us-east-1c"]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == [emulator.security_group_id]
    user_data = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    assert user_data["UserData"]["Value"] == "IyEvYmluL2Jhc2gKZWNobyBub2Rl"
    volumes = ec2.describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
    )["Volumes"]
    assert volumes
    assert all({"Key": "daiku.dev/nodepool", "Value": "p"} in v["Tags"] for v in volumes)


def test_client_token_makes_create_fleet_idempotent(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """A CreateFleet repeated with its ClientToken returns the same instance, launches no other."""
    pools = [("m5.large", "us-east-1a")]
    first = create_fleet(ec2, emulator, launch_template_id, pools, client_token="claim-1")
    second = create_fleet(ec2, emulator, launch_template_id, pools, client_token="claim-1")

    assert second["FleetId"] == first["FleetId"]
    assert second["Instances"] == first["Instances"]
    reservations = ec2.describe_instances()["Reservations"]
    assert sum(len(r["Instances"]) for r in reservations) == 1
    assert [c.idempotent_replay for c in emulator.create_fleet_calls] == [False, True]


def test_client_token_reused_with_other_parameters_is_rejected(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """A ClientToken reused with different parameters fails with IdempotentParameterMismatch."""
    create_fleet(ec2, emulator, launch_template_id, [("m5.large", "us-east-1a")], client_token="t")

    with pytest.raises(ClientError) as raised:
        create_fleet(
            ec2, emulator, launch_template_id, [("c5.large", "us-east-1a")], client_token="t"
        )

    assert raised.value.response["Error"]["Code"] == "IdempotentParameterMismatch"


def test_zone_that_does_not_offer_the_type_is_reported_unsupported(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """An override in a zone that does not offer the instance type is reported as Unsupported."""
    # moto's us-east-1 data has a subnet in us-east-1e but offers no m5.large there.
    response = create_fleet(
        ec2,
        emulator,
        launch_template_id,
        [("m5.large", "us-east-1e"), ("m5.large", "us-east-1f")],
        strategy="prioritized",
    )

    assert error_pools(response) == [("m5.large", emulator.subnet_ids["us-east-1e"], "Unsupported")]
    assert launched(response) == [("m5.large", emulator.subnet_ids["us-east-1f"])]


def test_unknown_launch_template_fails_the_whole_request(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """A CreateFleet naming a launch template that does not exist is a client error."""
    with pytest.raises(ClientError) as raised:
        create_fleet(ec2, emulator, "lt-0123456789abcdef0", [("m5.large", "us-east-1a")])

    assert raised.value.response["Error"]["Code"].startswith("InvalidLaunchTemplate")


def test_create_fleet_calls_record_timing_overrides_and_errors(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Each CreateFleet is recorded with receive/response times, pools sent, errors and launch."""
    emulator.set_capacity(
        instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", available=False
    )
    response = create_fleet(
        ec2,
        emulator,
        launch_template_id,
        [("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")],
        strategy="prioritized",
    )

    (call,) = emulator.create_fleet_calls
    assert call.received_monotonic_seconds <= call.responded_monotonic_seconds
    assert call.overrides == (
        PoolKey("m5.large", "us-east-1a", "on-demand"),
        PoolKey("m5.large", "us-east-1b", "on-demand"),
    )
    assert call.errors == (
        (PoolKey("m5.large", "us-east-1a", "on-demand"), "InsufficientInstanceCapacity"),
    )
    assert call.launched_pool == PoolKey("m5.large", "us-east-1b", "on-demand")
    assert call.instance_ids == tuple(response["Instances"][0]["InstanceIds"])


def test_template_block_devices_interface_groups_and_metadata_reach_the_instance(
    emulator: Ec2Emulator, ec2: EC2Client
) -> None:
    """A template's root volume, interface groups and metadata options shape the instance."""
    template = ec2.create_launch_template(
        LaunchTemplateName="daiku-public",
        LaunchTemplateData={
            "ImageId": emulator.image_ids["arm64"],
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
            "NetworkInterfaces": [
                {
                    "DeviceIndex": 0,
                    "AssociatePublicIpAddress": True,
                    "Groups": [emulator.security_group_id],
                }
            ],
            "BlockDeviceMappings": [
                {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3"}}
            ],
        },
    )["LaunchTemplate"]

    response = create_fleet(
        ec2, emulator, template["LaunchTemplateId"], [("m6g.large", "us-east-1b")]
    )

    instance_id = response["Instances"][0]["InstanceIds"][0]
    instance = describe(ec2, instance_id)
    assert instance["Architecture"] == "arm64"
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == [emulator.security_group_id]
    assert instance["MetadataOptions"]["HttpTokens"] == "required"
    volumes = ec2.describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
    )["Volumes"]
    assert [(v["Size"], v["VolumeType"]) for v in volumes] == [(20, "gp3")]


def test_concurrent_requests_with_one_client_token_launch_one_instance(
    emulator: Ec2Emulator, launch_template_id: str
) -> None:
    """Eight concurrent CreateFleets sharing a ClientToken all return the one instance launched."""
    clients = [ec2_client(emulator) for _ in range(8)]

    def launch(ec2: EC2Client) -> list[str]:
        response = create_fleet(
            ec2, emulator, launch_template_id, [("m5.large", "us-east-1a")], client_token="same"
        )
        ids: list[str] = response["Instances"][0]["InstanceIds"]
        return ids

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(launch, clients))

    assert len({tuple(ids) for ids in results}) == 1
    reservations = clients[0].describe_instances()["Reservations"]
    assert sum(len(r["Instances"]) for r in reservations) == 1
