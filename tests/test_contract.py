"""The generated gRPC contract exposes the public Actuator API unchanged."""

from daiku.actuator.v1 import actuator_pb2


def test_actuator_service_has_the_public_methods() -> None:
    """The Actuator service offers exactly the documented RPCs, WatchCloudEvents streaming."""
    service = actuator_pb2.DESCRIPTOR.services_by_name["Actuator"]
    methods = {m.name: m for m in service.methods}
    assert set(methods) == {
        "ListInstanceTypes",
        "LaunchNodeClaim",
        "TerminateNodeClaim",
        "GetNodeClaim",
        "ListNodeClaims",
        "WatchCloudEvents",
        "ResolveNodeClass",
        "AcknowledgeCloudEvents",
    }
    assert methods["WatchCloudEvents"].server_streaming
    assert not methods["LaunchNodeClaim"].server_streaming


def test_launch_request_keeps_the_field_names_other_tools_rely_on() -> None:
    """LaunchNodeClaimRequest keeps the snake_case names named in the contract."""
    request = actuator_pb2.LaunchNodeClaimRequest(
        nodeclaim_name="default-abcde",
        nodepool_name="default",
        offerings=[
            actuator_pb2.Offering(instance_type="m5.large", zone="us-east-1a", capacity_type="spot")
        ],
        node_class=actuator_pb2.NodeClass(
            subnet_selector_terms=[
                actuator_pb2.SubnetSelectorTerm(tags={"karpenter.sh/discovery": "demo"})
            ],
            user_data="#!/bin/bash",
        ),
    )
    decoded = actuator_pb2.LaunchNodeClaimRequest.FromString(request.SerializeToString())
    assert decoded.offerings[0].capacity_type == "spot"
    assert decoded.node_class.subnet_selector_terms[0].tags["karpenter.sh/discovery"] == "demo"
