"""The launcher's error cases against the EC2 emulator over HTTP (botocore parsing real EC2
answers), as test_launcher.py runs them against the in-memory cloud: partial fleets, ICE codes
that rule out one pool or a whole capacity type, permanent errors, throttling, and the answers
capacity pools cannot produce (empty, an error naming no override), injected."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from actuator_svc.catalog import Catalog
from actuator_svc.cloud.ec2 import AwsEndpoints, Ec2Cloud, RetryPolicy
from actuator_svc.core.node_class import (
    CapacityReservationTerm,
    ImageTerm,
    LaunchRequest,
    NodeClassSpec,
    SecurityGroupTerm,
    SubnetTerm,
)
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.core.user_data import ClusterEndpoint
from actuator_svc.errors import CloudPermanentError, CloudUnavailableError, OfferingsExhaustedError
from actuator_svc.launcher import Launcher
from actuator_svc.metrics import ActuatorMetrics
from actuator_svc.node_class_resolver import NodeClassResolver
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import CLUSTER, ManualClock

pytestmark = pytest.mark.asyncio(loop_scope="module")

DISCOVERY = {"karpenter.sh/discovery": CLUSTER}


def spot(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "spot")


def od(t: str, z: str = "us-east-1a") -> OfferingKey:
    return OfferingKey(t, z, "on-demand")


@dataclass
class Rig:
    launcher: Launcher
    unavailable: UnavailableOfferings
    clock: ManualClock
    catalog: Catalog


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(emulator: Ec2Emulator) -> AsyncIterator[Rig]:
    """One launcher over HTTP for the module (its catalog is fetched once through moto)."""
    clock = ManualClock()
    endpoints = AwsEndpoints(ec2=emulator.endpoint_url, pricing=emulator.endpoint_url)
    retry = RetryPolicy(max_attempts=3, base_seconds=0.01, max_seconds=0.05)
    async with Ec2Cloud(region="us-east-1", endpoints=endpoints, retry=retry) as cloud:
        unavailable = UnavailableOfferings()
        catalog = Catalog(cloud, region="us-east-1", unavailable=unavailable, clock=clock)
        await catalog.refresh(force=True)
        launcher = Launcher(
            cloud,
            catalog=catalog,
            resolver=NodeClassResolver(cloud, clock=clock),
            unavailable=unavailable,
            cluster=ClusterEndpoint(name=CLUSTER),
            clock=clock,
            metrics=ActuatorMetrics(),
        )
        yield Rig(launcher, unavailable, clock, catalog)


@pytest.fixture(autouse=True)
def _no_cached_ice(rig: Rig) -> None:
    rig.unavailable.clear()


def request(name: str, *offerings: OfferingKey) -> LaunchRequest:
    return LaunchRequest(
        nodeclaim_name=name,
        nodepool_name="default",
        offerings=offerings,
        node_class=NodeClassSpec(
            name="default",
            subnet_terms=(SubnetTerm(tags=DISCOVERY),),
            security_group_terms=(SecurityGroupTerm(tags=DISCOVERY),),
            image_terms=(ImageTerm(alias="al2023@latest"),),
        ),
    )


def no_capacity(emulator: Ec2Emulator, key: OfferingKey, code: str) -> None:
    emulator.set_capacity(
        instance_type=key.instance_type,
        zone=key.zone,
        capacity_type=key.capacity_type,
        available=False,
        error_code=code,
    )


async def test_a_partial_fleet_launches_and_caches_the_pool_it_reported(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """One answer with an error for the first pool and an instance in the next: launched there
    in one call, the error recorded on the attempt and the failed pool cached."""
    no_capacity(emulator, spot("m5.large"), "InsufficientInstanceCapacity")
    result = await rig.launcher.launch(
        request("partial-1", spot("m5.large"), spot("m5.large", "us-east-1b"))
    )
    assert result.offering == spot("m5.large", "us-east-1b")
    assert len(emulator.create_fleet_calls) == 1
    assert [(e.offering, e.code) for a in result.attempts for e in a.errors] == [
        (spot("m5.large"), "InsufficientInstanceCapacity")
    ]
    assert rig.unavailable.get(spot("m5.large"), rig.clock.now) is not None
    assert rig.unavailable.get(spot("m5.large", "us-east-1b"), rig.clock.now) is None


async def test_max_spot_count_rules_out_every_spot_offering_at_once(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """MaxSpotInstanceCountExceeded with no spot instance launched rules out every spot
    offering of the claim; the next call is on-demand."""
    spots = (spot("m5.large"), spot("c5.large", "us-east-1b"))
    for key in spots:
        no_capacity(emulator, key, "MaxSpotInstanceCountExceeded")
    result = await rig.launcher.launch(request("maxspot-1", *spots, od("m5.large")))
    assert result.offering == od("m5.large")
    assert [c.capacity_type for c in emulator.create_fleet_calls] == ["spot", "on-demand"]
    for key in spots:
        assert rig.unavailable.get(key, rig.clock.now) is not None


async def test_a_capacity_type_wide_error_in_a_call_that_launched_rules_out_only_its_pool(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """The same code next to a spot instance launched in the same call is that pool's only:
    the claim is spot, and the other spot offering is not cached. (EC2 tries the cheaper spot
    pool first, so that one fails.)"""
    cheaper, dearer = sorted(
        (spot("m5.large"), spot("c5.large", "us-east-1b")), key=rig.catalog.price
    )
    no_capacity(emulator, cheaper, "MaxSpotInstanceCountExceeded")
    result = await rig.launcher.launch(request("maxspot-2", cheaper, dearer, od("m5.large")))
    assert result.offering == dearer
    assert len(emulator.create_fleet_calls) == 1
    assert [(e.offering, e.code) for e in result.attempts[0].errors] == [
        (cheaper, "MaxSpotInstanceCountExceeded")
    ]
    assert rig.unavailable.get(dearer, rig.clock.now) is None


async def test_an_exhausted_launch_names_the_failed_and_the_skipped_offerings(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    no_capacity(emulator, od("m5.large"), "InsufficientInstanceCapacity")
    with pytest.raises(OfferingsExhaustedError) as info:
        await rig.launcher.launch(
            request("exhausted-1", od("m5.large"), od("m5.large", "us-east-1z"), od("t9.huge"))
        )
    error = info.value
    assert [(e.offering, e.code) for a in error.attempts for e in a.errors] == [
        (od("m5.large"), "InsufficientInstanceCapacity")
    ]
    assert {(s.offering, s.reason) for s in error.skipped} == {
        (od("m5.large", "us-east-1z"), "NotOfferedInZone"),
        (od("t9.huge"), "UnknownInstanceType"),
    }


async def test_only_permanent_fleet_errors_fail_as_permanent(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    no_capacity(emulator, od("m5.large"), "InvalidParameterValue")
    with pytest.raises(CloudPermanentError, match="InvalidParameterValue"):
        await rig.launcher.launch(request("permanent-1", od("m5.large")))
    assert rig.unavailable.active(rig.clock.now) == {}


async def test_an_empty_answer_moves_on_to_the_next_offerings(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """No instance and no error: the batch counts as failed and the next one is tried."""
    emulator.inject_fleet_answer(kind="empty")
    result = await rig.launcher.launch(request("empty-1", spot("m5.large"), od("m5.large")))
    assert result.offering == od("m5.large")
    calls = emulator.create_fleet_calls
    assert [(c.injected_answer, c.capacity_type) for c in calls] == [
        ("empty", None),
        (None, "on-demand"),
    ]


async def test_only_empty_answers_end_exhausted_not_in_a_loop(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    emulator.inject_fleet_answer(kind="empty", count=10)
    with pytest.raises(OfferingsExhaustedError):
        await rig.launcher.launch(request("empty-2", spot("m5.large"), od("m5.large")))
    assert len(emulator.create_fleet_calls) == 2


async def test_an_error_naming_no_override_fails_the_whole_batch(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """An ICE code without LaunchTemplateAndOverrides applies to every offering of the call."""
    emulator.inject_fleet_answer(kind="unattributed-error", error_code="UnfulfillableCapacity")
    spots = (spot("m5.large"), spot("m5.large", "us-east-1b"))
    result = await rig.launcher.launch(request("unattributed-1", *spots, od("m5.large")))
    assert result.offering == od("m5.large")
    assert {(e.offering, e.code) for e in result.attempts[0].errors} == {
        (key, "UnfulfillableCapacity") for key in spots
    }
    for key in spots:
        assert rig.unavailable.get(key, rig.clock.now) is not None


async def test_an_empty_answer_among_permanent_errors_ends_exhausted_not_permanent(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """A call that launched nothing and named no error may launch later: with it, a permanent
    error of the other call does not fail the claim for good."""
    emulator.inject_fleet_answer(kind="empty")
    no_capacity(emulator, spot("m5.large"), "InvalidParameterValue")
    with pytest.raises(OfferingsExhaustedError) as info:
        await rig.launcher.launch(request("empty-3", od("m5.large"), spot("m5.large")))
    assert [(e.offering, e.code) for a in info.value.attempts for e in a.errors] == [
        (spot("m5.large"), "InvalidParameterValue")
    ]
    assert [c.injected_answer for c in emulator.create_fleet_calls] == ["empty", None]


async def test_a_throttled_create_fleet_is_retried_and_launches(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded", count=2)
    result = await rig.launcher.launch(request("throttled-1", od("m5.large")))
    assert result.offering == od("m5.large")
    assert [c.request_error for c in emulator.create_fleet_calls] == [
        "RequestLimitExceeded",
        "RequestLimitExceeded",
        None,
    ]


async def test_persistent_throttling_is_unavailable_not_exhausted(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded", count=10)
    with pytest.raises(CloudUnavailableError, match="RequestLimitExceeded"):
        await rig.launcher.launch(request("throttled-2", od("m5.large")))
    assert rig.unavailable.active(rig.clock.now) == {}


async def test_a_capacity_error_among_permanent_ones_ends_exhausted_not_permanent(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """When one call failed for lack of capacity and the next for a permanent reason, the
    launch is exhausted (retryable later), not a permanent failure of the claim."""
    no_capacity(emulator, spot("m5.large"), "InsufficientInstanceCapacity")
    no_capacity(emulator, od("m5.large"), "InvalidParameterValue")
    with pytest.raises(OfferingsExhaustedError) as info:
        await rig.launcher.launch(request("mixed-1", spot("m5.large"), od("m5.large")))
    assert info.value.nodeclaim_name == "mixed-1"
    assert [(e.offering, e.code) for a in info.value.attempts for e in a.errors] == [
        (spot("m5.large"), "InsufficientInstanceCapacity"),
        (od("m5.large"), "InvalidParameterValue"),
    ]


async def test_a_permanent_failure_names_the_create_fleet_call_and_its_code(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    no_capacity(emulator, od("m5.large"), "InvalidParameterValue")
    with pytest.raises(CloudPermanentError) as info:
        await rig.launcher.launch(request("permanent-2", od("m5.large")))
    assert (info.value.operation, info.value.code) == ("CreateFleet", "InvalidParameterValue")
    # EC2's own explanation follows the code.
    explanation = str(info.value).removeprefix("CreateFleet: InvalidParameterValue: ")
    assert explanation not in {"", "None", str(info.value)}


async def test_launching_a_launched_claim_again_reports_its_offering_and_price(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """A repeat (the scheduler retrying, or a restarted actuator) finds the claim's instance
    and reports the offering and price it runs at, with no CreateFleet call of its own."""
    first = await rig.launcher.launch(request("repeat-1", spot("c5.large", "us-east-1b")))
    calls = len(emulator.create_fleet_calls)
    again = await rig.launcher.launch(request("repeat-1", spot("c5.large", "us-east-1b")))
    assert len(emulator.create_fleet_calls) == calls
    assert again.instance.id == first.instance.id
    assert again.offering == first.offering == spot("c5.large", "us-east-1b")
    assert again.price_per_hour == first.price_per_hour > 0
    assert again.attempts == ()


async def test_a_repeat_of_a_reserved_launch_reports_its_reservation(
    rig: Rig, emulator: Ec2Emulator
) -> None:
    """The offering a repeat reports, read back from the instance, keeps the reservation's id
    and type, and so the reserved price."""
    reservation = emulator.create_capacity_reservation(
        instance_type="c5.large", zone="us-east-1a", count=1
    )
    reserved = OfferingKey("c5.large", "us-east-1a", "reserved", reservation.id, "default")
    ask = dataclasses.replace(
        request("repeat-reserved-1", reserved),
        node_class=dataclasses.replace(
            request("", reserved).node_class,
            capacity_reservation_terms=(CapacityReservationTerm(id=reservation.id),),
        ),
    )
    first = await rig.launcher.launch(ask)
    again = await rig.launcher.launch(ask)
    assert again.instance.id == first.instance.id
    assert again.offering == first.offering == reserved
    assert again.price_per_hour == first.price_per_hour
    for result in (first, again):
        assert result.instance.capacity_reservation_id == reservation.id
        assert result.instance.capacity_reservation_type == "default"
