"""The launcher's plan walking against the in-memory cloud: fast, and for what the emulator
cannot show (replicas racing inside one call, look-ups that yield). The error cases run over
HTTP against the emulator as well, in test_launcher_http.py."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.fake import FakeCloud, FakeImage, FakeSecurityGroup
from actuator_svc.cloud.provider import FleetError, FleetRequest, FleetResult, Instance, Subnet
from actuator_svc.core.node_class import (
    AL2023,
    CUSTOM,
    ImageTerm,
    LaunchRequest,
    NodeClassSpec,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.tags import CLUSTER_TAG, NODECLAIM_TAG
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint
from actuator_svc.errors import (
    CloudPermanentError,
    CloudUnavailableError,
    OfferingsExhaustedError,
)
from actuator_svc.fleet_requests import SkippedOffering
from actuator_svc.launch_templates import LaunchTemplateCollector
from actuator_svc.launcher import (
    MAX_STEPS_PER_LAUNCH,
    Launcher,
    OfferingFailure,
    StepMemory,
    client_token,
)
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


def make_launcher(
    cloud: FakeCloud,
    clock: Clock,
    *,
    templates: LaunchTemplateCollector | None = None,
    lookup_seconds: float = 0.0,  # the fake shows an instance at once
    metrics: ActuatorMetrics | None = None,
    cluster: str = "demo",
) -> tuple[Launcher, UnavailableOfferings]:
    unavailable = UnavailableOfferings()
    catalog = Catalog(cloud, region="us-east-1", unavailable=unavailable, clock=clock)
    launcher = Launcher(
        cloud,
        catalog=catalog,
        resolver=NodeClassResolver(cloud, clock=clock),
        unavailable=unavailable,
        cluster=ClusterEndpoint(name=cluster),
        clock=clock,
        metrics=metrics or ActuatorMetrics(),
        lookup_seconds=lookup_seconds,
        templates=templates,
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


class NetworkCloud(FakeCloud):
    """FakeCloud whose look-ups and fleet calls let other tasks run, as network calls do, and
    which counts the look-ups."""

    lookups = 0

    async def find_instances(self, *args: Any, **kwargs: Any) -> list[Instance]:
        self.lookups += 1
        await asyncio.sleep(0)
        return await super().find_instances(*args, **kwargs)

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        await asyncio.sleep(0)
        return await super().create_fleet(request)


def make_network_cloud(kind: type[NetworkCloud] = NetworkCloud) -> NetworkCloud:
    cloud = kind(instance_types=TYPES, zones=dict.fromkeys(TYPES, ZONES), on_demand_prices={})
    seeded = make_cloud()
    cloud.od_prices, cloud.spot = seeded.od_prices, seeded.spot
    cloud.subnets, cloud.security_groups = seeded.subnets, seeded.security_groups
    cloud.images = seeded.images
    return cloud


async def test_two_launchers_with_different_ice_caches_launch_one_instance() -> None:
    """Two replicas' launchers, one with the claim's first offering cached as ICE'd, launch the
    same claim at once: one instance, which both return."""
    cloud = make_network_cloud()
    clock = Clock()
    first, first_cache = make_launcher(cloud, clock)
    second, _ = make_launcher(cloud, clock)
    first_cache.mark(spot("m5.large"), "InsufficientInstanceCapacity", clock.now)
    claim = request("twin-1", spot("m5.large"), spot("m5.large", "us-east-1b"))
    results = await asyncio.gather(first.launch(claim), second.launch(claim))
    assert len(cloud.instances) == 1
    assert {r.instance.id for r in results} == set(cloud.instances)


async def replica_after_a_lost_step(cloud: FakeCloud, name: str) -> Launcher:
    """One replica's step 0 of claim `name` (spot c5.large) got ICE; the other replica, whose
    cache rules out c5.large, is returned: its own step 0 would differ."""
    clock = Clock()
    first, _ = make_launcher(cloud, clock)
    second, second_cache = make_launcher(cloud, clock)
    cloud.set_capacity(spot("c5.large"), available=False)
    with pytest.raises(OfferingsExhaustedError):
        await first.launch(request(name, spot("c5.large")))
    second_cache.mark(spot("c5.large"), "InsufficientInstanceCapacity", clock.now)
    return second


async def test_a_step_another_replica_launched_nothing_in_moves_on() -> None:
    """When the other replica's step got ICE for what it sent, this replica's different call
    goes out as the next step and launches."""
    cloud = make_cloud()
    second = await replica_after_a_lost_step(cloud, "twin-2")
    launched = await second.launch(request("twin-2", spot("c5.large"), spot("m5.large")))
    assert launched.offering == spot("m5.large")
    assert list(cloud.instances) == [launched.instance.id]


async def test_relaunching_a_terminated_claim_launches_a_new_instance() -> None:
    """A claim whose instance was terminated gets a new, live instance when launched again
    with the same request, from the same process and from a restarted one."""
    cloud = make_cloud()
    clock = Clock()
    launcher, _ = make_launcher(cloud, clock)
    claim = request("again-1", od("m5.large"))
    old = await launcher.launch(claim)
    await cloud.terminate_instances([old.instance.id])
    renewed = await launcher.launch(claim)
    await cloud.terminate_instances([renewed.instance.id])
    restarted, _ = make_launcher(cloud, clock)
    after_restart = await restarted.launch(claim)
    ids = [old.instance.id, renewed.instance.id, after_restart.instance.id]
    assert len(set(ids)) == 3
    assert cloud.instances[after_restart.instance.id].state == "running"


async def test_a_retry_after_an_exhausted_launch_gets_a_fresh_answer() -> None:
    """After every offering ICE'd, a retry of the same claim once the TTL passed and capacity
    returned launches (EC2 is asked again, not answered from the earlier call)."""
    cloud = make_cloud()
    clock = Clock()
    launcher, _ = make_launcher(cloud, clock)
    claim = request("retry-1", spot("m5.large"))
    cloud.set_capacity(spot("m5.large"), available=False)
    with pytest.raises(OfferingsExhaustedError):
        await launcher.launch(claim)
    cloud.set_capacity(spot("m5.large"), available=True)
    clock.now += 181
    launched = await launcher.launch(claim)
    assert launched.offering == spot("m5.large")
    assert len(cloud.fleet_requests) == 2


@pytest.mark.parametrize("with_uid", [True, False])
async def test_a_claim_made_again_under_its_name_is_not_answered_from_the_old_one(
    with_uid: bool,
) -> None:
    """Decision 0014's two limits, closed by the claim object's uid. A replica that never saw
    the claim (restarted, or the other one) launching a same-name claim object made after an
    exhausted launch gets a fresh answer, not the stale RESOURCE_EXHAUSTED; and once EC2 has
    forgotten the old object's terminated instance, a fresh instance, not the forgotten id.
    Without the uid (a caller that does not send it) both limits remain, as recorded."""
    cloud = make_cloud()
    clock = Clock()

    def claim(uid: str) -> LaunchRequest:
        return replace(request("same-1", spot("m5.large")), nodeclaim_uid=uid if with_uid else "")

    cloud.set_capacity(spot("m5.large"), available=False)
    with pytest.raises(OfferingsExhaustedError):
        await make_launcher(cloud, clock)[0].launch(claim("uid-1"))
    cloud.set_capacity(spot("m5.large"), available=True)
    if not with_uid:
        with pytest.raises(OfferingsExhaustedError):  # the earlier object's step, replayed
            await make_launcher(cloud, clock)[0].launch(claim("uid-2"))
        return
    fresh = await make_launcher(cloud, clock)[0].launch(claim("uid-2"))
    assert fresh.offering == spot("m5.large")

    await cloud.terminate_instances([fresh.instance.id])
    del cloud.instances[fresh.instance.id]  # EC2 forgets a terminated instance after ~1 h
    newest = await make_launcher(cloud, clock)[0].launch(claim("uid-3"))
    assert newest.instance.id != fresh.instance.id
    assert cloud.instances[newest.instance.id].state == "running"


async def test_without_the_uid_a_forgotten_instance_is_the_answer() -> None:
    """The second limit as recorded: no uid, EC2 forgot the terminated instance, no replica
    remembers the claim: the same-name relaunch is answered with the forgotten id."""
    cloud = make_cloud()
    clock = Clock()
    old = await make_launcher(cloud, clock)[0].launch(request("same-2", od("m5.large")))
    await cloud.terminate_instances([old.instance.id])
    del cloud.instances[old.instance.id]
    again = await make_launcher(cloud, clock)[0].launch(request("same-2", od("m5.large")))
    assert again.instance.id == old.instance.id


async def test_concurrent_identical_launches_share_one() -> None:
    """1,000 concurrent identical launches of one claim share one launch: one CreateFleet and
    two DescribeInstances (the look-up before, the state of what it launched), not one each."""
    cloud = make_network_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    claim = request("many-1", od("m5.large"))
    results = await asyncio.gather(*(launcher.launch(claim) for _ in range(1000)))
    assert {r.instance.id for r in results} == set(cloud.instances)
    assert len(cloud.fleet_requests) == 1
    assert cloud.lookups == 2


async def test_custom_ami_family_passes_the_user_data_as_is() -> None:
    """With ami_family Custom the launch template holds the node class's user data unchanged;
    with AL2023 (the default) daiku's NodeConfig is added."""
    cloud = make_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    base = request("custom-1", od("m5.large"))
    custom_class = replace(
        base.node_class,
        image_terms=(ImageTerm(name="amazon-eks-node-al2023-x86_64-standard-1.32"),),
        user_data="#!/bin/bash\necho mine\n",
        ami_family=CUSTOM,
    )
    await launcher.launch(replace(base, node_class=custom_class))
    await launcher.launch(
        replace(
            base, nodeclaim_name="custom-2", node_class=replace(custom_class, ami_family=AL2023)
        )
    )
    user_data = sorted(c.user_data for c in cloud.launch_templates.values())
    assert user_data[0] == "#!/bin/bash\necho mine\n"
    assert "NodeConfig" in user_data[1]
    assert "echo mine" in user_data[1]


class LateCloud(NetworkCloud):
    """A cloud whose look-ups by claim miss a new instance a few times, as AWS's eventually
    consistent DescribeInstances can."""

    hidden_claim_lookups = 0

    async def find_instances(self, *args: Any, **kwargs: Any) -> list[Instance]:
        found = await super().find_instances(*args, **kwargs)
        if NODECLAIM_TAG in args[0] and self.hidden_claim_lookups:
            self.hidden_claim_lookups -= 1
            return []
        return found


async def test_a_replica_that_lost_a_step_waits_for_the_instance_to_show() -> None:
    """A replica whose step was decided by another waits (up to lookup_seconds) for the
    instance that step launched rather than launching a second one."""
    cloud = make_network_cloud(LateCloud)
    assert isinstance(cloud, LateCloud)
    clock = Clock()
    first, _ = make_launcher(cloud, clock)
    second, second_cache = make_launcher(cloud, clock, lookup_seconds=5.0)
    claim = request("late-1", spot("m5.large"), spot("m5.large", "us-east-1b"))
    launched = await first.launch(claim)
    # The second replica's cache rules out what the first sent: its step 0 differs.
    second_cache.mark(spot("m5.large"), "InsufficientInstanceCapacity", clock.now)
    cloud.hidden_claim_lookups = 2  # its check before launching, then its first look-up
    found = await second.launch(claim)
    assert found.instance.id == launched.instance.id
    assert list(cloud.instances) == [launched.instance.id]
    assert cloud.hidden_claim_lookups == 0


async def test_a_launcher_given_no_metrics_keeps_its_own() -> None:
    """Metrics are optional: a Launcher built without them launches and times the fleet call
    on metrics of its own."""
    cloud = make_cloud()
    clock = Clock()
    unavailable = UnavailableOfferings()
    launcher = Launcher(
        cloud,
        catalog=Catalog(cloud, region="us-east-1", unavailable=unavailable, clock=clock),
        resolver=NodeClassResolver(cloud, clock=clock),
        unavailable=unavailable,
        cluster=ClusterEndpoint(name="demo"),
        clock=clock,
        lookup_seconds=0.0,
    )
    result = await launcher.launch(request("plain-1", od("m5.large")))
    assert result.offering == od("m5.large")


async def test_a_fresh_launch_answers_as_the_cloud_later_shows_the_instance() -> None:
    """launch() answers from CreateFleet's reply, before DescribeInstances shows the instance:
    type, zone, capacity type, tags and network are what the cloud shows later, the state is
    pending, and an arm64 type runs the arm64 image of the alias."""
    cloud = make_cloud()
    arm = {**SHAPE, "ProcessorInfo": {"SupportedArchitectures": ["arm64"]}}
    cloud.instance_types["m6g.large"] = {"InstanceType": "m6g.large", **arm}
    cloud.zones["m6g.large"] = ZONES
    cloud.od_prices["m6g.large"] = 0.077
    cloud.images.append(
        FakeImage("ami-arm", "amazon-eks-node-al2023-arm64-standard-1.32", "arm64", "2026")
    )
    launcher, _ = make_launcher(cloud, Clock())
    fresh = await launcher.launch(request("fresh-1", od("m6g.large", "us-east-1b")))
    shown = await launcher.existing("fresh-1")
    assert shown is not None
    assert fresh.instance.state == "pending"
    assert fresh.instance.image_id == "ami-arm"
    assert fresh.instance.tags[NODECLAIM_TAG] == "fresh-1"
    assert replace(fresh.instance, state="", image_id="", launch_time=None) == replace(
        shown, state="", image_id="", launch_time=None
    )
    assert (fresh.instance.instance_type, fresh.instance.zone, fresh.instance.capacity_type) == (
        "m6g.large",
        "us-east-1b",
        "on-demand",
    )


def test_step_memory_remembers_the_highest_step_used() -> None:
    """A claim's next step follows the highest step used, whichever order they were reported
    in (another replica's later step may be learned first)."""
    steps = StepMemory()
    assert steps.next_step("a") == 0
    steps.used("a", 0)
    assert steps.next_step("a") == 1
    steps.used("a", 5)
    steps.used("a", 2)
    assert steps.next_step("a") == 6


def test_step_memory_forgets_the_least_recently_used_claim_first() -> None:
    """At its bound the memory drops the claim used longest ago, not the one just used."""
    steps = StepMemory(max_claims=2)
    steps.used("a", 0)
    steps.used("b", 0)
    assert (steps.next_step("a"), steps.next_step("b")) == (1, 1)
    steps.used("a", 1)  # a is now the most recent
    steps.used("c", 0)
    assert (steps.next_step("a"), steps.next_step("b"), steps.next_step("c")) == (2, 0, 1)


async def test_a_step_answered_for_a_terminated_instance_launches_anew() -> None:
    """A restarted launcher replays step 0 of a claim (no uid) whose instance EC2 still shows
    as terminated: that answer is the claim's past, so the next step launches a new instance."""
    cloud = make_cloud()
    clock = Clock()
    claim = request("gone-1", od("m5.large"))
    old = await make_launcher(cloud, clock)[0].launch(claim)
    cloud.instances[old.instance.id] = replace(old.instance, state="terminated")
    with capture_logs() as logs:
        new = await make_launcher(cloud, clock)[0].launch(claim)
    assert [(e["event"], e["step"]) for e in logs if "step" in e] == [
        ("launch_step_answered_for_a_gone_instance", 0)
    ]
    assert new.instance.id != old.instance.id
    assert cloud.instances[new.instance.id].state == "running"
    assert len(cloud.fleet_requests) == 3  # the first launch, the replayed step, the new one


async def test_full_subnets_and_capacity_errors_in_the_call_that_launched() -> None:
    """One CreateFleet answer: two subnets out of addresses, one pool out of capacity, and an
    instance in the last pool. Every error is on the attempt with EC2's message, each naming
    only its own offering; the pool is cached and counted with its labels; and the instance
    reports the subnet it was launched in, though the same answer found that subnet full."""
    cloud = make_cloud()
    full = (od("c5.large"), od("c5.large", "us-east-1b"))
    for key in full:
        cloud.set_capacity(key, available=False, code="InsufficientFreeAddressesInSubnet")
    cloud.set_capacity(od("m5.large"), available=False)
    clock = Clock()
    metrics = ActuatorMetrics()
    launcher, unavailable = make_launcher(cloud, clock, metrics=metrics)
    # In this order the first override of the launched type is in the other zone.
    offerings = (full[0], od("m5.large"), full[1], od("m5.large", "us-east-1b"))
    result = await launcher.launch(request("mixed-1", *offerings))
    assert result.offering == od("m5.large", "us-east-1b")
    assert len(cloud.fleet_requests) == 1
    codes = [
        "InsufficientFreeAddressesInSubnet",
        "InsufficientInstanceCapacity",
        "InsufficientFreeAddressesInSubnet",
    ]
    assert list(result.attempts[0].errors) == [
        OfferingFailure(key, code, f"no capacity: {key}")
        for key, code in zip(offerings[:3], codes, strict=True)
    ]
    entry = unavailable.get(od("m5.large"), clock.now)
    assert entry is not None
    assert entry.reason == "InsufficientInstanceCapacity"
    labels = {
        "instance_type": "m5.large",
        "zone": "us-east-1a",
        "capacity_type": "on-demand",
        "error_code": "InsufficientInstanceCapacity",
    }
    counted = metrics.registry.get_sample_value(
        "daiku_actuator_unavailable_offering_errors_total", labels
    )
    assert counted == 1.0
    assert result.instance.subnet_id == "subnet-us-east-1b"
    assert cloud.instances[result.instance.id].subnet_id == "subnet-us-east-1b"
    # Both zones' only subnets are full for a while: their offerings are not sent meanwhile.
    with pytest.raises(OfferingsExhaustedError) as info:
        await launcher.launch(request("mixed-2", od("c5.large"), od("m5.large", "us-east-1b")))
    assert list(info.value.skipped) == [
        SkippedOffering(od("c5.large"), "InsufficientFreeAddressesInSubnet"),
        SkippedOffering(od("m5.large", "us-east-1b"), "InsufficientFreeAddressesInSubnet"),
    ]
    assert len(cloud.fleet_requests) == 1


class ForeignErrorCloud(NetworkCloud):
    """A cloud whose first CreateFleet answer is an error naming a type the call did not send
    (an answer pools cannot produce), then answers as the fake does."""

    answered_foreign = False

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        if self.answered_foreign:
            return await super().create_fleet(request)
        self.answered_foreign = True
        self.fleet_requests.append(request)
        error = FleetError("x9.huge", "us-east-1a", "InvalidParameterValue", "x9.huge: unknown")
        return FleetResult(None, "", "", (error,))


async def test_an_error_naming_an_offering_not_sent_is_kept_on_the_attempt() -> None:
    """An error naming no offering of the call stays on the attempt (with no offering, its code
    and message), fails none of the call's offerings, and the next step launches them."""
    cloud = make_network_cloud(ForeignErrorCloud)
    launcher, unavailable = make_launcher(cloud, Clock())
    result = await launcher.launch(request("foreign-1", od("m5.large")))
    assert result.offering == od("m5.large")
    assert [a.errors for a in result.attempts] == [
        (OfferingFailure(None, "InvalidParameterValue", "x9.huge: unknown"),),
        (),
    ]
    assert unavailable.active(Clock().now) == {}


def test_a_client_token_is_stable_across_versions() -> None:
    """Replicas of two daiku versions (a rolling upgrade) must send one claim's step with one
    token, so these values may never change: "daiku-" and the first 48 hex digits of the
    SHA-256 of cluster/claim/step, or cluster/claim/uid/step with the claim object's uid
    (values from `printf 'demo/web-1/0' | sha256sum`). A token fits EC2's 64 characters."""
    assert client_token("demo", "web-1", 0) == (
        "daiku-62327f9c0e27e0b4698c91f4b55413cefb95e0e9a2521c2c"
    )
    assert client_token("demo", "web-1", 0, "uid-1") == (
        "daiku-ced6717c4a12bf30905576f2c3059eb292cefae4692b5d82"
    )
    assert len(client_token("c" * 100, "n" * 253, 99, "u" * 36)) <= 64


def launches_counted(metrics: ActuatorMetrics, capacity_type: str, outcome: str) -> float | None:
    return metrics.registry.get_sample_value(
        "daiku_actuator_launches_total", {"capacity_type": capacity_type, "outcome": outcome}
    )


async def test_a_launch_logs_and_counts_its_outcome() -> None:
    """A launch that tried twice logs the failed call's errors and one nodeclaim_launched line
    with the claim, offering, price, attempts and latency (docs/actuator-api.md), and counts
    one launch of its capacity type; an exhausted launch counts as exhausted."""
    cloud = make_cloud()
    cloud.set_capacity(spot("m5.large"), available=False)
    metrics = ActuatorMetrics()
    launcher, _ = make_launcher(cloud, Clock(), metrics=metrics)
    with capture_logs() as logs:
        await launcher.launch(request("logged-1", spot("m5.large"), od("c5.large")))
    failed = [e for e in logs if e["event"] == "create_fleet_offerings_failed"]
    assert [(e["nodeclaim"], e["errors"]) for e in failed] == [
        ("logged-1", ["spot/m5.large/us-east-1a: InsufficientInstanceCapacity"])
    ]
    (line,) = [e for e in logs if e["event"] == "nodeclaim_launched"]
    assert {k: v for k, v in line.items() if k != "latency_ms"} == {
        "event": "nodeclaim_launched",
        "log_level": "info",
        "nodeclaim": "logged-1",
        "nodepool": "default",
        "instance_id": next(iter(cloud.instances)),
        "instance_type": "c5.large",
        "zone": "us-east-1a",
        "capacity_type": "on-demand",
        "price": 0.085,
        "attempts": 2,
    }
    assert isinstance(line["latency_ms"], float)  # milliseconds, to the microsecond
    assert 0 < line["latency_ms"] < 60_000
    assert launches_counted(metrics, "on-demand", "launched") == 1.0
    for capacity_type in ("spot", "on-demand"):  # each CreateFleet call timed once
        labels = {"capacity_type": capacity_type}
        timed = "daiku_actuator_create_fleet_duration_seconds"
        assert metrics.registry.get_sample_value(f"{timed}_count", labels) == 1.0
        assert 0 < (metrics.registry.get_sample_value(f"{timed}_sum", labels) or 0) < 60
    with pytest.raises(OfferingsExhaustedError):
        await launcher.launch(request("logged-2", spot("m5.large")))
    assert launches_counted(metrics, "", "exhausted") == 1.0
    assert launcher.launching == frozenset()


async def test_a_repeat_launch_logs_that_the_claim_was_launched() -> None:
    """A launch of a claim that has its instance makes no call and says so in the log."""
    cloud = make_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    first = await launcher.launch(request("repeat-1", od("m5.large")))
    with capture_logs() as logs:
        await launcher.launch(request("repeat-1", od("m5.large")))
    assert [(e["event"], e["nodeclaim"], e["nodepool"], e["instance_id"]) for e in logs] == [
        ("nodeclaim_already_launched", "repeat-1", "default", first.instance.id)
    ]


class GatedCloud(NetworkCloud):
    """A cloud whose CreateFleet for a claim with a gate waits until the gate opens; `entered`
    is set once that call is waiting."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gates: dict[str, asyncio.Event] = {}
        self.entered: dict[str, asyncio.Event] = {}

    def gate(self, nodeclaim_name: str) -> asyncio.Event:
        self.entered[nodeclaim_name] = asyncio.Event()
        return self.gates.setdefault(nodeclaim_name, asyncio.Event())

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        name = request.tags[NODECLAIM_TAG]
        if name in self.gates:
            self.entered[name].set()
            await self.gates[name].wait()
        return await super().create_fleet(request)


async def test_launches_of_different_claims_do_not_wait_for_each_other() -> None:
    """While one claim's CreateFleet hangs, another claim launches; the launcher keeps state
    only for the claim still launching, and none once it is done."""
    cloud = make_network_cloud(GatedCloud)
    assert isinstance(cloud, GatedCloud)
    gate = cloud.gate("slow-1")
    launcher, _ = make_launcher(cloud, Clock())
    slow = asyncio.create_task(launcher.launch(request("slow-1", od("m5.large"))))
    await asyncio.wait_for(cloud.entered["slow-1"].wait(), 5)
    fast = await asyncio.wait_for(launcher.launch(request("fast-1", od("c5.large"))), 5)
    assert fast.offering == od("c5.large")
    assert launcher.launching == {"slow-1"}
    gate.set()
    assert (await slow).offering == od("m5.large")
    assert launcher.launching == frozenset()


async def test_different_requests_for_one_claim_run_one_after_the_other() -> None:
    """Two different requests for one claim at once are not shared: the second waits for the
    first, then finds its instance (no call of its own, no attempts)."""
    cloud = make_network_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    first, second = await asyncio.gather(
        launcher.launch(request("pair-1", od("m5.large"))),
        launcher.launch(request("pair-1", od("c5.large"))),
    )
    assert len(cloud.fleet_requests) == 1
    assert second.instance.id == first.instance.id
    assert len(first.attempts) == 1
    assert second.attempts == ()
    assert launcher.launching == frozenset()


async def test_two_clusters_launch_claims_of_one_name_apart() -> None:
    """Claims of one name in two clusters of one account are two instances: the cluster is in
    the ClientToken and in the look-up."""
    cloud = make_cloud()
    clock = Clock()
    here, _ = make_launcher(cloud, clock)
    there, _ = make_launcher(cloud, clock, cluster="other")
    mine = await here.launch(request("shared-1", od("m5.large")))
    theirs = await there.launch(request("shared-1", od("m5.large")))
    assert mine.instance.id != theirs.instance.id
    assert len(cloud.fleet_requests) == 2  # one call each: no token of the other cluster's
    assert [cloud.instances[r.instance.id].tags[CLUSTER_TAG] for r in (mine, theirs)] == [
        "demo",
        "other",
    ]


async def test_a_claim_with_two_instances_is_answered_with_the_oldest_shown() -> None:
    """Should a claim have more than one instance, the oldest one EC2 shows is its instance;
    one not shown with a launch time yet comes last."""
    cloud = make_cloud()
    launcher, _ = make_launcher(cloud, Clock())
    launched = await launcher.launch(request("many-2", od("m5.large")))
    base = cloud.instances.pop(launched.instance.id)
    day = 86_400
    times = {"i-newer": 3 * day, "i-unshown": None, "i-oldest": day}
    for instance_id, seconds in times.items():
        when = None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)
        cloud.instances[instance_id] = replace(base, id=instance_id, launch_time=when)
    found = await launcher.existing("many-2")
    assert found is not None
    assert found.id == "i-oldest"


class MismatchThenThrottleCloud(NetworkCloud):
    """A cloud that throttles the call after one refused for a reused ClientToken."""

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        try:
            return await super().create_fleet(request)
        except CloudPermanentError:
            throttled = CloudUnavailableError("CreateFleet", "RequestLimitExceeded", "slow down")
            self.fail_next("create_fleet", throttled)
            raise


async def test_a_step_lost_to_another_replica_is_not_sent_again() -> None:
    """A replica whose step 0 another replica decided (launching nothing) logs it, and when its
    next step fails (throttled), its next launch of the claim starts after the lost step."""
    cloud = make_network_cloud(MismatchThenThrottleCloud)
    second = await replica_after_a_lost_step(cloud, "lost-1")
    claim = request("lost-1", spot("c5.large"), spot("m5.large"))
    with capture_logs() as logs, pytest.raises(CloudUnavailableError):
        await second.launch(claim)
    assert [(e["event"], e["step"]) for e in logs if "step" in e] == [
        ("launch_step_taken_by_another_replica", 0)
    ]
    launched = await second.launch(claim)
    assert launched.offering == spot("m5.large")
    assert len(cloud.fleet_requests) == 3  # step 0 twice (the second refused), then step 1


class GoneAnswerCloud(NetworkCloud):
    """A cloud that answers every CreateFleet with an instance already terminated."""

    async def create_fleet(self, request: FleetRequest) -> FleetResult:
        self.fleet_requests.append(request)
        return FleetResult("i-gone", "m5.large", "us-east-1a", ())


async def test_a_launch_that_never_gets_a_live_answer_gives_up_after_its_steps() -> None:
    """Answers only for a gone instance (no instance, no error for this life of the claim)
    end, retryably, after MAX_STEPS_PER_LAUNCH calls, also for a claim whose steps began
    later: the bound counts this launch's steps."""
    cloud = make_network_cloud(GoneAnswerCloud)
    tags = {CLUSTER_TAG: "demo", NODECLAIM_TAG: "loop-1"}
    cloud.instances["i-gone"] = Instance(
        "i-gone", "m5.large", "us-east-1a", "on-demand", "terminated", "", None, tags
    )
    launcher, _ = make_launcher(cloud, Clock())
    for expected_calls in (MAX_STEPS_PER_LAUNCH, 2 * MAX_STEPS_PER_LAUNCH):
        with pytest.raises(CloudUnavailableError) as info:
            await launcher.launch(request("loop-1", od("m5.large")))
        assert (info.value.operation, info.value.code) == ("CreateFleet", "TooManySteps")
        assert str(info.value) == (
            f"CreateFleet: TooManySteps: no launch after {MAX_STEPS_PER_LAUNCH} calls"
        )
        assert len(cloud.fleet_requests) == expected_calls


async def test_offerings_cached_as_unavailable_are_skipped_until_their_entry_ends() -> None:
    """An offering cached as unavailable is not sent; when the rest fail the error lists it
    with the cached reason and until when; once the entry ends it is sent again."""
    cloud = make_cloud()
    clock = Clock()
    launcher, unavailable = make_launcher(cloud, clock)
    entry = unavailable.mark(spot("c5.large"), "InsufficientInstanceCapacity", clock.now)
    cloud.set_capacity(spot("m5.large"), available=False)
    with pytest.raises(OfferingsExhaustedError) as info:
        await launcher.launch(request("cached-1", spot("c5.large"), spot("m5.large")))
    assert list(info.value.skipped) == [
        SkippedOffering(spot("c5.large"), "InsufficientInstanceCapacity", entry.until_seconds)
    ]
    sent = [o.instance_type for r in cloud.fleet_requests for t in r.templates for o in t.overrides]
    assert sent == ["m5.large"]
    clock.now = entry.until_seconds
    launched = await launcher.launch(request("cached-2", spot("c5.large"), spot("m5.large")))
    assert launched.offering == spot("c5.large")


async def test_a_zone_whose_subnet_filled_up_during_the_launch_is_not_sent_again() -> None:
    """The first call finds the zone's only subnet out of addresses: the later calls of the
    same launch leave out every offering of that zone, which the error lists as skipped."""
    cloud = make_cloud()
    cloud.set_capacity(spot("c5.large"), available=False, code="InsufficientFreeAddressesInSubnet")
    cloud.set_capacity(od("m5.large", "us-east-1b"), available=False)
    launcher, _ = make_launcher(cloud, Clock())
    with pytest.raises(OfferingsExhaustedError) as info:
        await launcher.launch(
            request("filling-1", spot("c5.large"), od("m5.large"), od("m5.large", "us-east-1b"))
        )
    assert list(info.value.skipped) == [
        SkippedOffering(spot("c5.large"), "InsufficientFreeAddressesInSubnet"),
        SkippedOffering(od("m5.large"), "InsufficientFreeAddressesInSubnet"),
    ]
    sent = [[o.zone for t in r.templates for o in t.overrides] for r in cloud.fleet_requests]
    assert sent == [["us-east-1a"], ["us-east-1b"]]
