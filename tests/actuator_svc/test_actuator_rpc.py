"""The actuator over real gRPC on loopback, against the EC2 emulator over HTTP."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest

# grpcio-health-checking ships no type hints, and types-grpcio-health-checking's HealthStub has
# no Check method (it would need a cast at every call); the packages import it the same way.
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

# grpcio-reflection ships no type hints (actuator_svc.service imports it the same way).
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # type: ignore[import-untyped]
    ProtoReflectionDescriptorDatabase,
)
from grpc_status import rpc_status
from structlog.testing import capture_logs

from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.user_data import read_node_registration
from actuator_svc.service import RunningActuator
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator
from tests.actuator_svc.conftest import (
    TOKEN,
    ManualClock,
    launch_request,
    node_class,
    offering,
)

MIB = 1024**2
if TYPE_CHECKING:
    # ActuatorStub(channel) on a grpc.aio channel; the async stub type exists only in the stubs.
    Stub = actuator_pb2_grpc.ActuatorAsyncStub


async def test_list_instance_types_reports_m5_large_allocatable(stub: Stub) -> None:
    """ListInstanceTypes gives m5.large allocatable 1930m / 6903Mi / 29 pods with its labels."""
    response = await stub.ListInstanceTypes(pb.ListInstanceTypesRequest())
    types = {t.name: t for t in response.instance_types}
    m5 = types["m5.large"]
    assert m5.allocatable.cpu_millis == 1930
    assert m5.allocatable.memory_bytes == 6903 * MIB
    assert m5.allocatable.pods == 29
    assert m5.capacity.memory_bytes == 7577 * MIB
    assert m5.labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert m5.labels["kubernetes.io/arch"] == "amd64"
    capacity_types = {o.capacity_type for o in m5.offerings}
    assert capacity_types == {"spot", "on-demand"}
    assert all(o.price > 0 and o.available for o in m5.offerings)


async def test_on_demand_prices_come_from_the_pricing_api(actuator: RunningActuator) -> None:
    """With a Pricing endpoint configured, on-demand prices are read from GetProducts."""
    assert actuator.catalog.on_demand_price_source == "pricing-api"
    assert actuator.catalog.price(OfferingKey("m5.large", "us-east-1a", "on-demand")) == 0.096


async def test_kubelet_settings_change_allocatable(stub: Stub) -> None:
    """maxPods=110 in the request raises pods to 110 and lowers memory by the larger reserve."""
    response = await stub.ListInstanceTypes(
        pb.ListInstanceTypesRequest(kubelet=pb.KubeletConfiguration(max_pods=110))
    )
    m5 = next(t for t in response.instance_types if t.name == "m5.large")
    assert m5.allocatable.pods == 110
    assert m5.allocatable.memory_bytes == (6903 - 11 * (110 - 29)) * MIB


async def test_launch_tags_the_instance_and_registers_labels(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """A launch returns the instance, tagged for the cluster, with user data holding labels."""
    response = await stub.LaunchNodeClaim(
        launch_request("web-launch1", offering("m5.large", "us-east-1b", "on-demand"))
    )
    assert response.instance_id.startswith("i-")
    assert response.provider_id == f"aws:///us-east-1b/{response.instance_id}"
    assert (response.instance_type, response.zone, response.capacity_type) == (
        "m5.large", "us-east-1b", "on-demand",
    )  # fmt: skip
    assert response.price == pytest.approx(0.096)
    assert response.image_id == emulator.image_ids["x86_64"]
    assert len(response.attempts) == 1
    got = await stub.GetNodeClaim(pb.GetNodeClaimRequest(nodeclaim_name="web-launch1"))
    tags = dict(got.nodeclaim.tags)
    assert tags["daiku.dev/cluster"] == "daiku"
    assert tags["daiku.dev/nodepool"] == "default"
    assert tags["daiku.dev/nodeclaim"] == "web-launch1"
    assert tags["kubernetes.io/cluster/daiku"] == "owned"
    assert tags["Name"] == "web-launch1"
    assert tags["team"] == "platform"
    # The user data of the instance registers the node with the claim's labels and taints.
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.endpoint_url)
    attribute = await asyncio.to_thread(
        ec2.describe_instance_attribute, InstanceId=response.instance_id, Attribute="userData"
    )
    user_data = base64.b64decode(attribute["UserData"]["Value"]).decode()
    registration = read_node_registration(user_data)
    assert registration.labels["app"] == "web"
    assert registration.labels["daiku.dev/nodepool"] == "default"
    assert [str(t) for t in registration.taints] == ["dedicated=web:NoSchedule"]
    volumes = await asyncio.to_thread(
        ec2.describe_volumes,
        Filters=[{"Name": "attachment.instance-id", "Values": [response.instance_id]}],
    )
    for volume in volumes["Volumes"]:
        assert {"Key": "daiku.dev/nodeclaim", "Value": "web-launch1"} in volume.get("Tags", [])


async def test_launch_logs_one_nodeclaim_launched_line(stub: Stub) -> None:
    """Each launch logs one nodeclaim_launched event with claim, offering, price and latency."""
    with capture_logs() as logs:
        await stub.LaunchNodeClaim(
            launch_request("web-log1", offering("c5.large", "us-east-1a", "on-demand"))
        )
    launched = [e for e in logs if e["event"] == "nodeclaim_launched"]
    assert len(launched) == 1
    line = launched[0]
    assert line["nodeclaim"] == "web-log1"
    assert line["nodepool"] == "default"
    assert (line["instance_type"], line["zone"], line["capacity_type"]) == (
        "c5.large", "us-east-1a", "on-demand",
    )  # fmt: skip
    assert line["attempts"] == 1
    assert line["price"] > 0
    assert line["latency_ms"] > 0


async def test_launch_reports_the_subnet_and_security_groups_it_launched_into(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """LaunchNodeClaim, its idempotent repeat, GetNodeClaim and ListNodeClaims all give the
    subnet of the launched zone and the sorted ids of every selected security group, as EC2's
    DescribeInstances shows the instance."""
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.endpoint_url)
    vpc_id = (await asyncio.to_thread(ec2.describe_vpcs))["Vpcs"][0]["VpcId"]
    extra = await asyncio.to_thread(
        ec2.create_security_group,
        GroupName="web-sgs1-extra",
        Description="a second group for the launch-report test",
        VpcId=vpc_id,
        TagSpecifications=[
            {"ResourceType": "security-group", "Tags": [{"Key": "sgs-test", "Value": "1"}]}
        ],
    )
    groups = sorted([emulator.security_group_id, extra["GroupId"]])
    request = launch_request(
        "web-sgs1",
        offering("m5.large", "us-east-1c", "on-demand"),
        node_class=node_class(
            security_group_selector_terms=[
                pb.SecurityGroupSelectorTerm(tags={"karpenter.sh/discovery": "daiku"}),
                pb.SecurityGroupSelectorTerm(tags={"sgs-test": "1"}),
            ]
        ),
    )
    launched = await stub.LaunchNodeClaim(request)
    assert launched.attempts
    assert launched.subnet_id == emulator.subnet_ids["us-east-1c"]
    assert list(launched.security_group_ids) == groups
    again = await stub.LaunchNodeClaim(request)
    assert not again.attempts  # answered from DescribeInstances
    assert (again.subnet_id, list(again.security_group_ids)) == (launched.subnet_id, groups)
    got = (await stub.GetNodeClaim(pb.GetNodeClaimRequest(nodeclaim_name="web-sgs1"))).nodeclaim
    assert (got.subnet_id, list(got.security_group_ids)) == (launched.subnet_id, groups)
    listed = await stub.ListNodeClaims(pb.ListNodeClaimsRequest())
    (entry,) = [n for n in listed.nodeclaims if n.nodeclaim_name == "web-sgs1"]
    assert (entry.subnet_id, list(entry.security_group_ids)) == (launched.subnet_id, groups)
    described = await asyncio.to_thread(ec2.describe_instances, InstanceIds=[launched.instance_id])
    instance = described["Reservations"][0]["Instances"][0]
    assert instance["SubnetId"] == launched.subnet_id
    assert sorted(g["GroupId"] for g in instance["SecurityGroups"]) == groups
    await stub.TerminateNodeClaim(pb.TerminateNodeClaimRequest(nodeclaim_name="web-sgs1"))


async def test_terminate_twice_then_unknown_claim(stub: Stub) -> None:
    """Terminating twice succeeds both times; a claim that never launched is NOT_FOUND."""
    launched = await stub.LaunchNodeClaim(
        launch_request("web-term1", offering("m5.large", "us-east-1a", "spot"))
    )
    first = await stub.TerminateNodeClaim(pb.TerminateNodeClaimRequest(nodeclaim_name="web-term1"))
    second = await stub.TerminateNodeClaim(pb.TerminateNodeClaimRequest(nodeclaim_name="web-term1"))
    assert first.instance_id == second.instance_id == launched.instance_id
    assert first.state in ("shutting-down", "terminated")
    assert second.state in ("shutting-down", "terminated")
    listed = await stub.ListNodeClaims(pb.ListNodeClaimsRequest())
    assert launched.instance_id not in {n.instance_id for n in listed.nodeclaims}
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.TerminateNodeClaim(pb.TerminateNodeClaimRequest(nodeclaim_name="never-was"))
    assert info.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetNodeClaim(pb.GetNodeClaimRequest(nodeclaim_name="never-was"))
    assert info.value.code() is grpc.StatusCode.NOT_FOUND


async def test_concurrent_duplicate_launches_make_one_instance(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """Five concurrent launches of one claim share one launch (the same answer, attempts
    included); a retry finds the instance."""
    request = launch_request("web-dup1", offering("m5.large", "us-east-1c", "spot"))
    responses = await asyncio.gather(*(stub.LaunchNodeClaim(request) for _ in range(5)))
    again = await stub.LaunchNodeClaim(request)
    assert {r.instance_id for r in responses} | {again.instance_id} == {responses[0].instance_id}
    assert all(r == responses[0] for r in responses)
    assert responses[0].attempts
    assert not again.attempts
    assert len(emulator.create_fleet_calls) == 1
    listed = await stub.ListNodeClaims(pb.ListNodeClaimsRequest(nodepool_name="default"))
    assert [n.nodeclaim_name for n in listed.nodeclaims].count("web-dup1") == 1


async def test_ice_on_the_cheapest_pool_launches_in_the_next(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """With the preferred pool out of capacity the claim lands on the next one in one call."""
    emulator.set_capacity(
        instance_type="m5.large", zone="us-east-1a", capacity_type="spot", available=False
    )
    response = await stub.LaunchNodeClaim(
        launch_request(
            "web-ice1",
            offering("m5.large", "us-east-1a", "spot"),
            offering("m5.large", "us-east-1b", "spot"),
        )
    )
    assert (response.zone, response.capacity_type) == ("us-east-1b", "spot")
    errors = [(e.offering.zone, e.error_code) for a in response.attempts for e in a.errors]
    assert errors == [("us-east-1a", "InsufficientInstanceCapacity")]


async def test_all_spot_exhausted_falls_back_to_on_demand_at_once(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """When every spot pool ICEs, the next CreateFleet is on-demand and launches."""
    for zone in ("us-east-1a", "us-east-1b"):
        emulator.set_capacity(
            instance_type="c5.large", zone=zone, capacity_type="spot", available=False
        )
    response = await stub.LaunchNodeClaim(
        launch_request(
            "web-fallback1",
            offering("c5.large", "us-east-1a", "spot"),
            offering("c5.large", "us-east-1b", "spot"),
            offering("c5.large", "us-east-1a", "on-demand"),
        )
    )
    assert response.capacity_type == "on-demand"
    assert [len(a.errors) for a in response.attempts] == [2, 0]
    calls = emulator.create_fleet_calls
    assert [c.capacity_type for c in calls] == ["spot", "on-demand"]
    gap = calls[1].received_monotonic_seconds - calls[0].responded_monotonic_seconds
    assert gap < 0.5  # "at once": no batch window between the calls


async def test_every_offering_exhausted_is_resource_exhausted_with_reasons(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """When no offering has capacity the call fails RESOURCE_EXHAUSTED with per-offering errors."""
    for capacity_type in ("spot", "on-demand"):
        emulator.set_capacity(
            instance_type="r5.large", zone="us-east-1a", capacity_type=capacity_type,
            available=False,
        )  # fmt: skip
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(
            launch_request(
                "web-none1",
                offering("r5.large", "us-east-1a", "spot"),
                offering("r5.large", "us-east-1a", "on-demand"),
            )
        )
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    # rpc_status.from_call reads only code(), details() and trailing_metadata(), which
    # AioRpcError has; its stub asks for a grpc.Call, which AioRpcError does not subclass.
    status = rpc_status.from_call(cast(grpc.Call, info.value))
    assert status is not None
    failure = pb.LaunchNodeClaimFailure()
    assert status.details[0].Unpack(failure)
    assert failure.nodeclaim_name == "web-none1"
    reasons = {(e.offering.capacity_type, e.error_code) for a in failure.attempts for e in a.errors}
    assert reasons == {
        ("spot", "InsufficientInstanceCapacity"),
        ("on-demand", "InsufficientInstanceCapacity"),
    }


async def test_iced_offering_is_skipped_until_the_ttl_passes(
    stub: Stub, emulator: Ec2Emulator, clock: ManualClock
) -> None:
    """An ICE'd offering is left out of CreateFleet for 3 minutes, reported unavailable, then
    tried again."""
    emulator.set_capacity(
        instance_type="m5.xlarge", zone="us-east-1a", capacity_type="spot", available=False
    )
    offerings = [
        offering("m5.xlarge", "us-east-1a", "spot"),
        offering("m5.xlarge", "us-east-1b", "spot"),
    ]
    await stub.LaunchNodeClaim(launch_request("web-ttl1", *offerings))
    emulator.reset_capacity()
    emulator.clear_create_fleet_calls()
    catalog = await stub.ListInstanceTypes(pb.ListInstanceTypesRequest())
    m5 = next(t for t in catalog.instance_types if t.name == "m5.xlarge")
    iced = next(o for o in m5.offerings if o.zone == "us-east-1a" and o.capacity_type == "spot")
    assert not iced.available
    assert iced.unavailable_reason == "InsufficientInstanceCapacity"
    assert iced.unavailable_until.ToSeconds() == pytest.approx(clock.now + 180, abs=1)

    clock.advance(179)
    second = await stub.LaunchNodeClaim(launch_request("web-ttl2", *offerings))
    assert second.zone == "us-east-1b"
    sent = {p.zone for p in emulator.create_fleet_calls[-1].overrides}
    assert sent == {"us-east-1b"}

    clock.advance(2)
    third = await stub.LaunchNodeClaim(launch_request("web-ttl3", *offerings))
    assert third.zone == "us-east-1a"


async def test_throttling_is_retried_with_backoff(stub: Stub, emulator: Ec2Emulator) -> None:
    """Two RequestLimitExceeded answers are retried; the launch succeeds on the third call."""
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded", count=2)
    response = await stub.LaunchNodeClaim(
        launch_request("web-throttle1", offering("m5.large", "us-east-1d", "on-demand"))
    )
    assert response.instance_id
    calls = emulator.create_fleet_calls
    assert [c.request_error for c in calls] == [
        "RequestLimitExceeded",
        "RequestLimitExceeded",
        None,
    ]
    assert calls[1].received_monotonic_seconds > calls[0].responded_monotonic_seconds


async def test_persistent_throttling_is_unavailable(stub: Stub, emulator: Ec2Emulator) -> None:
    """Throttling that outlasts the bounded retries ends in UNAVAILABLE after 4 calls."""
    emulator.inject_fault(action="CreateFleet", error_code="RequestLimitExceeded", count=50)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(
            launch_request("web-throttle2", offering("m5.large", "us-east-1d", "on-demand"))
        )
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "RequestLimitExceeded" in (info.value.details() or "")
    assert len(emulator.create_fleet_calls) == 4


async def test_permanent_errors_fail_fast(stub: Stub, emulator: Ec2Emulator) -> None:
    """An authorization error is not retried: FAILED_PRECONDITION after one call."""
    emulator.inject_fault(
        action="CreateFleet", error_code="UnauthorizedOperation", http_status=403, count=1
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(
            launch_request("web-denied1", offering("m5.large", "us-east-1d", "on-demand"))
        )
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "UnauthorizedOperation" in (info.value.details() or "")
    assert len(emulator.create_fleet_calls) == 1


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.ClearField("nodeclaim_name"), "nodeclaim_name"),
        (lambda r: setattr(r, "nodepool_name", "Not_A_Name"), "nodepool_name"),
        (lambda r: r.ClearField("offerings"), "offerings"),
        (lambda r: setattr(r.offerings[0], "capacity_type", "cheap"), "offerings[0].capacity_type"),
        (lambda r: setattr(r.offerings[0], "zone", ""), "offerings[0].zone"),
        (
            lambda r: r.node_class.ClearField("subnet_selector_terms"),
            "node_class.subnet_selector_terms",
        ),
        (
            lambda r: r.node_class.tags.update({"daiku.dev/nodeclaim": "other"}),
            "node_class.tags['daiku.dev/nodeclaim']",
        ),
        (lambda r: setattr(r.taints[0], "effect", "Sometimes"), "taints[0].effect"),
        (
            lambda r: r.node_class.ami_selector_terms[0].__setattr__("alias", "windows@latest"),
            "node_class.ami_selector_terms[0].alias",
        ),
        (lambda r: r.kubelet.system_reserved.update({"cpu": "lots"}), "kubelet.system_reserved"),
        # Values EC2 would refuse (or take wrongly) are refused before any EC2 call.
        (
            lambda r: r.kubelet.system_reserved.update({"cpu": "-5"}),
            "kubelet.system_reserved['cpu']",
        ),
        (
            lambda r: r.kubelet.system_reserved.update({"cpu": "1e999990"}),
            "kubelet.system_reserved['cpu']",
        ),
        (
            lambda r: r.node_class.block_device_mappings.add(
                device_name="/dev/xvda", volume_type="fast"
            ),
            "node_class.block_device_mappings[0].volume_type",
        ),
        (
            lambda r: r.node_class.block_device_mappings.add(device_name="xvda"),
            "node_class.block_device_mappings[0].device_name",
        ),
        (
            lambda r: r.node_class.block_device_mappings.add(
                device_name="/dev/xvda", volume_size_bytes=-(2**30)
            ),
            "node_class.block_device_mappings[0].volume_size_bytes",
        ),
        (
            lambda r: r.node_class.block_device_mappings.add(
                device_name="/dev/xvda", volume_type="gp2", throughput_mibps=500
            ),
            "node_class.block_device_mappings[0].throughput_mibps",
        ),
        (
            lambda r: r.node_class.block_device_mappings.add(device_name="/dev/xvda", iops=10**12),
            "node_class.block_device_mappings[0].iops",
        ),
        (
            lambda r: r.node_class.metadata_options.MergeFrom(pb.MetadataOptions(http_tokens="no")),
            "node_class.metadata_options.http_tokens",
        ),
        (
            lambda r: r.node_class.metadata_options.MergeFrom(
                pb.MetadataOptions(http_put_response_hop_limit=-1)
            ),
            "node_class.metadata_options.http_put_response_hop_limit",
        ),
        (lambda r: setattr(r.node_class, "ami_family", "Bottlerocket"), "node_class.ami_family"),
        (
            lambda r: setattr(r.node_class, "ami_family", "Custom"),
            "node_class.ami_selector_terms[0].alias",
        ),
        # Limits on what a caller can send.
        (lambda r: setattr(r, "nodeclaim_name", "a" * 254), "nodeclaim_name"),
        (lambda r: setattr(r, "nodeclaim_name", "web..x"), "nodeclaim_name"),
        (
            lambda r: r.offerings.extend([offering("m5.large", "us-east-1a", "spot")] * 501),
            "offerings",
        ),
        (lambda r: setattr(r.offerings[0], "instance_type", "m5.large;rm"), "offerings[0]"),
        (
            lambda r: r.node_class.tags.update({f"k{i}": "v" for i in range(45)}),
            "node_class.tags",
        ),
        (lambda r: r.node_class.tags.update({"aws:owner": "me"}), "node_class.tags['aws:owner']"),
        (lambda r: r.node_class.tags.update({"k" * 129: "v"}), "node_class.tags"),
        (lambda r: r.node_class.tags.update({"team": "v" * 257}), "node_class.tags['team']"),
        (lambda r: r.node_class.tags.update({"team": "a<b>"}), "node_class.tags['team']"),
        (
            lambda r: setattr(r.node_class, "user_data", "#" * (16 * 1024 + 1)),
            "node_class.user_data",
        ),
        (lambda r: setattr(r.node_class, "name", "Default"), "node_class.name"),
        (
            lambda r: r.node_class.subnet_selector_terms.extend(
                [pb.SubnetSelectorTerm(id="subnet-1")] * 30
            ),
            "node_class.subnet_selector_terms",
        ),
        (lambda r: r.labels.update({f"l{i}": "v" for i in range(100)}), "labels"),
        (lambda r: r.labels.update({"bad key": "v"}), "labels['bad key']"),
        (lambda r: r.labels.update({"Example.com/x": "v"}), "labels['Example.com/x']"),
        (lambda r: r.labels.update({"app": "-web"}), "labels['app']"),
        (lambda r: r.labels.update({"app": "w" * 64}), "labels['app']"),
        (
            lambda r: r.taints.extend([pb.Taint(key="k", effect="NoSchedule")] * 50),
            "taints",
        ),
        (lambda r: setattr(r.taints[0], "key", "a/b/c"), "taints[0].key"),
        (lambda r: setattr(r.taints[0], "value", "x y"), "taints[0].value"),
        (lambda r: setattr(r, "nodeclaim_uid", "not a uid"), "nodeclaim_uid"),
        (lambda r: setattr(r, "nodeclaim_uid", "u" * 129), "nodeclaim_uid"),
    ],
)
async def test_invalid_requests_name_the_field(
    stub: Stub,
    emulator: Ec2Emulator,
    mutate: Callable[[pb.LaunchNodeClaimRequest], object],
    field: str,
) -> None:
    """A malformed or oversized LaunchNodeClaim is INVALID_ARGUMENT, the message names the
    field, and no instance is asked of EC2."""
    request = launch_request("web-bad1", offering("m5.large", "us-east-1a", "spot"))
    mutate(request)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(request)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (info.value.details() or "").startswith(field)
    assert emulator.create_fleet_calls == []


async def test_oversized_message_is_refused_before_parsing(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """A request over the 4 MiB receive limit is RESOURCE_EXHAUSTED and reaches no EC2 call."""
    request = launch_request(
        "web-huge",
        offering("m5.large", "us-east-1a", "spot"),
        node_class=node_class(user_data="#" * (5 * MIB)),
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(request)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert emulator.create_fleet_calls == []


async def test_node_class_matching_nothing_is_invalid(stub: Stub) -> None:
    """Subnet terms that match no subnet are INVALID_ARGUMENT naming the terms."""
    request = launch_request(
        "web-nosubnet1",
        offering("m5.large", "us-east-1a", "spot"),
        node_class=node_class(
            subnet_selector_terms=[pb.SubnetSelectorTerm(tags={"karpenter.sh/discovery": "none"})]
        ),
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.LaunchNodeClaim(request)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (info.value.details() or "").startswith("node_class.subnet_selector_terms")


async def test_wrong_token_is_unauthenticated_and_logged_without_it(
    actuator: RunningActuator,
) -> None:
    """Calls with a wrong or no bearer token, unary or streaming, are UNAUTHENTICATED; each
    refusal logs one rpc_unauthenticated event with method and peer and never the token sent."""
    sent = "Bearer wrong-token-marker-4f1c"
    async with grpc.aio.insecure_channel(actuator.address) as channel:
        stub = actuator_pb2_grpc.ActuatorStub(channel)
        with capture_logs() as logs:
            for metadata in ((("authorization", sent),), ()):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.ListNodeClaims(pb.ListNodeClaimsRequest(), metadata=metadata)
                assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as info:
                async for _ in stub.WatchCloudEvents(
                    pb.WatchCloudEventsRequest(), metadata=(("authorization", sent),), timeout=10
                ):
                    pass
            assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
    refused = [e for e in logs if e["event"] == "rpc_unauthenticated"]
    assert [e["method"].rsplit("/", 1)[1] for e in refused] == [
        "ListNodeClaims",
        "ListNodeClaims",
        "WatchCloudEvents",
    ]
    assert all(e["peer"].startswith("ipv4:127.0.0.1:") for e in refused)
    assert "wrong-token-marker" not in repr(logs)
    assert TOKEN not in repr(logs)


class _SyncBearerToken(grpc.StreamStreamClientInterceptor):
    """Adds the bearer token to the synchronous reflection client's stream."""

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        metadata = (*(details.metadata or ()), ("authorization", f"Bearer {TOKEN}"))
        return continuation(details._replace(metadata=metadata), requests)


async def test_health_answers_without_token_and_reflection_needs_it(
    actuator: RunningActuator,
) -> None:
    """Health says SERVING without a token; reflection is UNAUTHENTICATED without one and lists
    the Actuator service with it."""
    async with grpc.aio.insecure_channel(actuator.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "daiku.actuator.v1.Actuator"):
            answer = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    # The reflection client is synchronous: run it on a thread with its own channel.

    def services(with_token: bool) -> list[str]:
        with grpc.insecure_channel(actuator.address) as sync_channel:
            channel = (
                grpc.intercept_channel(sync_channel, _SyncBearerToken())
                if with_token
                else sync_channel
            )
            return list(ProtoReflectionDescriptorDatabase(channel).get_services())

    assert "daiku.actuator.v1.Actuator" in await asyncio.to_thread(services, True)
    with pytest.raises(grpc.RpcError) as info:
        await asyncio.to_thread(services, False)
    assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_spot_interruption_is_streamed_and_marks_the_offering(
    stub: Stub, emulator: Ec2Emulator
) -> None:
    """A spot interruption warning on the queue reaches the watcher with the claim and offering,
    and its offering is reported unavailable."""
    launched = await stub.LaunchNodeClaim(
        launch_request("web-interrupt1", offering("m5.2xlarge", "us-east-1c", "spot"))
    )
    stream = stub.WatchCloudEvents(pb.WatchCloudEventsRequest())
    emulator.send_spot_interruption(launched.instance_id)
    event = await asyncio.wait_for(stream.read(), timeout=20)
    stream.cancel()
    assert isinstance(event, pb.WatchCloudEventsResponse), f"stream ended without an event: {event}"
    assert event.kind == pb.CLOUD_EVENT_KIND_SPOT_INTERRUPTION_WARNING
    assert event.instance_id == launched.instance_id
    assert event.nodeclaim_name == "web-interrupt1"
    assert event.provider_id == launched.provider_id
    assert event.deadline.ToSeconds() - event.time.ToSeconds() == 120
    catalog = await stub.ListInstanceTypes(pb.ListInstanceTypesRequest())
    m5 = next(t for t in catalog.instance_types if t.name == "m5.2xlarge")
    spot_c = next(o for o in m5.offerings if o.zone == "us-east-1c" and o.capacity_type == "spot")
    assert (spot_c.available, spot_c.unavailable_reason) == (False, "SpotInterruption")


async def test_metrics_count_launches_and_ice(
    stub: Stub, emulator: Ec2Emulator, actuator: RunningActuator
) -> None:
    """Launch and ICE counters and the CreateFleet histogram move with a launch."""
    registry = actuator.metrics.registry

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    before = value("daiku_actuator_launches_total", capacity_type="on-demand", outcome="launched")
    emulator.set_capacity(
        instance_type="m5.large", zone="us-east-1f", capacity_type="spot", available=False
    )
    await stub.LaunchNodeClaim(
        launch_request(
            "web-metrics1",
            offering("m5.large", "us-east-1f", "spot"),
            offering("m5.large", "us-east-1f", "on-demand"),
        )
    )
    after = value("daiku_actuator_launches_total", capacity_type="on-demand", outcome="launched")
    assert after == before + 1
    ice = value(
        "daiku_actuator_unavailable_offering_errors_total",
        instance_type="m5.large", zone="us-east-1f", capacity_type="spot",
        error_code="InsufficientInstanceCapacity",
    )  # fmt: skip
    assert ice == 1
    assert value("daiku_actuator_unavailable_offerings") >= 1
    assert value("daiku_actuator_create_fleet_duration_seconds_count", capacity_type="spot") >= 1


async def test_offerings_ec2_does_not_have_are_not_sent(stub: Stub, emulator: Ec2Emulator) -> None:
    """An offering in a zone that lacks the type is skipped without a CreateFleet call."""
    response = await stub.LaunchNodeClaim(
        launch_request(
            "web-zone1",
            offering("m5.large", "us-east-1e", "spot"),  # m5.large is not offered in 1e
            offering("m5.large", "us-east-1a", "on-demand"),
        )
    )
    assert (response.zone, response.capacity_type) == ("us-east-1a", "on-demand")
    assert [c.capacity_type for c in emulator.create_fleet_calls] == ["on-demand"]


@pytest.mark.parametrize(
    ("pool", "code"),
    [
        ("*", grpc.StatusCode.INVALID_ARGUMENT),
        ("web*", grpc.StatusCode.INVALID_ARGUMENT),
        ("p" * 3000, grpc.StatusCode.INVALID_ARGUMENT),
        ("p" * 1_000_000, grpc.StatusCode.RESOURCE_EXHAUSTED),  # refused before parsing
    ],
)
async def test_list_nodeclaims_refuses_wildcards_and_huge_filters(
    stub: Stub, pool: str, code: grpc.StatusCode
) -> None:
    """ListNodeClaims' NodePool filter must be a NodePool name: a wildcard or a long name is
    INVALID_ARGUMENT naming the field, a megabyte is over the method's 4 KiB body limit; no
    message echoes a long value."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.ListNodeClaims(pb.ListNodeClaimsRequest(nodepool_name=pool))
    assert info.value.code() is code
    details = info.value.details() or ""
    assert details.startswith("nodepool_name" if code is grpc.StatusCode.INVALID_ARGUMENT else "")
    assert len(details) < 400
