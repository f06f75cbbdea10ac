"""The launcher's plan walking against the in-memory cloud (edge cases the emulator lacks)."""

from __future__ import annotations

import pytest

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.fake import FakeCloud, FakeImage, FakeSecurityGroup
from actuator_svc.cloud.provider import Subnet
from actuator_svc.core.node_class import (
    ImageTerm,
    LaunchRequest,
    NodeClassSpec,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint
from actuator_svc.errors import CloudPermanentError, OfferingsExhaustedError
from actuator_svc.launcher import Launcher
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver

SHAPE = {
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
TYPES = {name: {"InstanceType": name, **SHAPE} for name in ("m5.large", "c5.large")}
ZONES = ["us-east-1a", "us-east-1b"]


def spot(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "spot")


def od(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "on-demand")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_cloud() -> FakeCloud:
    cloud = FakeCloud(
        instance_types=TYPES,
        zones=dict.fromkeys(TYPES, ZONES),
        on_demand_prices={"m5.large": 0.096, "c5.large": 0.085},
        spot_prices={(t, z): 0.03 for t in TYPES for z in ZONES},
    )
    cloud.subnets = [(Subnet(f"subnet-{z}", z, 100), {"discovery": "demo"}) for z in ZONES]
    cloud.security_groups = [FakeSecurityGroup("sg-1", "nodes", {"discovery": "demo"})]
    cloud.images = [
        FakeImage("ami-old", "amazon-eks-node-al2023-x86_64-standard-1.31", "x86_64", "2025"),
        FakeImage("ami-new", "amazon-eks-node-al2023-x86_64-standard-1.32", "x86_64", "2026"),
    ]
    return cloud


def make_launcher(cloud: FakeCloud, clock: Clock) -> tuple[Launcher, UnavailableOfferings]:
    unavailable = UnavailableOfferings()
    catalog = Catalog(cloud, region="us-east-1", unavailable=unavailable, clock=clock)
    launcher = Launcher(
        cloud,
        catalog=catalog,
        resolver=NodeClassResolver(cloud, clock=clock),
        unavailable=unavailable,
        cluster=ClusterEndpoint(name="demo"),
        clock=clock,
        metrics=ActuatorMetrics(),
    )
    return launcher, unavailable


def request(name: str, *offerings: OfferingKey) -> LaunchRequest:
    return LaunchRequest(
        nodeclaim_name=name,
        nodepool_name="default",
        offerings=offerings,
        node_class=NodeClassSpec(
            name="default",
            subnet_terms=(SubnetTerm(tags={"discovery": "demo"}),),
            security_group_terms=(SecurityGroupTerm(tags={"discovery": "demo"}),),
            image_terms=(ImageTerm(alias="al2023@latest"),),
        ),
    )


async def test_newest_alias_image_and_one_template_per_configuration() -> None:
    """Launches use the newest al2023 image and share one launch template per configuration."""
    cloud = make_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    first = await launcher.launch(request("a-1", od("m5.large")))
    await launcher.launch(request("a-2", od("c5.large")))
    assert first.instance.image_id == "ami-new"
    assert len(cloud.launch_templates) == 1
    (config,) = cloud.launch_templates.values()
    assert config.image_id == "ami-new"
    assert config.security_group_ids == ("sg-1",)


async def test_a_launch_and_its_repeat_report_the_subnet_and_security_groups() -> None:
    """A fresh launch reports the subnet of the zone it launched in and the template's groups
    (sorted); its idempotent repeat, read back from the cloud, reports the same."""
    cloud = make_cloud()
    cloud.security_groups.append(FakeSecurityGroup("sg-0", "extra", {"discovery": "demo"}))
    launcher, _ = make_launcher(cloud, Clock())
    first = await launcher.launch(request("net-1", od("m5.large", "us-east-1b")))
    again = await launcher.launch(request("net-1", od("m5.large", "us-east-1b")))
    assert first.attempts
    assert not again.attempts
    for result in (first, again):
        assert result.instance.subnet_id == "subnet-us-east-1b"
        assert result.instance.security_group_ids == ("sg-0", "sg-1")


async def test_max_spot_count_skips_every_spot_offering_at_once() -> None:
    """MaxSpotInstanceCountExceeded rules out every spot offering of the claim, even those EC2
    did not report; the next call is on-demand."""
    cloud = make_cloud()
    cloud.set_capacity(spot("m5.large"), available=False, code="MaxSpotInstanceCountExceeded")
    clock = Clock()
    launcher, unavailable = make_launcher(cloud, clock)
    result = await launcher.launch(
        request("b-1", spot("m5.large"), spot("c5.large", "us-east-1b"), od("m5.large"))
    )
    assert result.offering == od("m5.large")
    assert [r.capacity_type for r in cloud.fleet_requests] == ["spot", "on-demand"]
    assert [(e.offering, e.code) for e in result.attempts[0].errors] == [
        (spot("m5.large"), "MaxSpotInstanceCountExceeded"),
        (spot("c5.large", "us-east-1b"), "MaxSpotInstanceCountExceeded"),
    ]
    assert unavailable.get(spot("c5.large", "us-east-1b"), clock.now) is not None


async def test_exhausted_launch_names_skipped_and_failed_offerings() -> None:
    """With nothing left, the error lists every CreateFleet error and every skipped offering."""
    cloud = make_cloud()
    cloud.set_capacity(od("m5.large"), available=False)
    launcher, _ = make_launcher(cloud, Clock())
    with pytest.raises(OfferingsExhaustedError) as info:
        await launcher.launch(
            request("c-1", od("m5.large"), od("m5.large", "us-east-1z"), od("t9.huge"))
        )
    error = info.value
    assert [(e.offering, e.code) for a in error.attempts for e in a.errors] == [
        (od("m5.large"), "InsufficientInstanceCapacity")
    ]
    assert {(s.offering, s.reason) for s in error.skipped} == {
        (od("m5.large", "us-east-1z"), "NotOfferedInZone"),
        (od("t9.huge"), "UnknownInstanceType"),
    }


async def test_only_permanent_fleet_errors_fail_as_permanent() -> None:
    """When every CreateFleet error is permanent (not capacity), the launch fails fast with it."""
    cloud = make_cloud()
    cloud.set_capacity(od("m5.large"), available=False, code="InvalidParameterValue")
    launcher, unavailable = make_launcher(cloud, Clock())
    with pytest.raises(CloudPermanentError, match="InvalidParameterValue"):
        await launcher.launch(request("d-1", od("m5.large")))
    assert unavailable.active(Clock().now) == {}


async def test_bundled_prices_when_the_pricing_api_is_unreachable() -> None:
    """When the Pricing API fails, on-demand prices come from the bundled list."""
    from actuator_svc.errors import CloudUnavailableError

    cloud = make_cloud()
    cloud.fail_next(
        "on_demand_prices", CloudUnavailableError("GetProducts", "ConnectTimeout", "no route")
    )
    unavailable = UnavailableOfferings()
    catalog = Catalog(cloud, region="us-east-1", unavailable=unavailable, clock=Clock())
    await catalog.refresh(force=True)
    assert catalog.on_demand_price_source == "bundled"
    assert catalog.price(od("m5.large")) == 0.096  # the bundled us-east-1 list price
    cloud.od_prices["m5.large"] = 0.5
    await catalog.refresh(force=True)
    assert catalog.on_demand_price_source == "pricing-api"
    assert catalog.price(od("m5.large")) == 0.5
