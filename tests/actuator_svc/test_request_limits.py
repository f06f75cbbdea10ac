"""Request limits at their boundaries: the largest valid request converts, one more is refused."""

from __future__ import annotations

import pytest

from actuator_svc.errors import InvalidRequestError
from actuator_svc.rpc import convert
from daiku.actuator.v1 import actuator_pb2 as pb
from tests.actuator_svc.conftest import launch_request, node_class, offering


def _request(**overrides: object) -> pb.LaunchNodeClaimRequest:
    return launch_request("web-limits", offering("m5.large", "us-east-1a", "spot"), **overrides)


def test_a_claim_uid_reaches_the_launch_request() -> None:
    uid = "6a1f5c1e-0b7e-4c5e-9d59-1d0c3f5b2a10"
    assert convert.launch_request_from_proto(_request(nodeclaim_uid=uid)).nodeclaim_uid == uid
    assert convert.launch_request_from_proto(_request()).nodeclaim_uid == ""


def test_tags_fill_ec2s_fifty_beside_daikus_own() -> None:
    """44 tags plus Name fit (the launch template then holds 50 with daiku's six); 45 do not."""
    tags = {f"k{i}": "v" for i in range(44)} | {"Name": "web"}
    converted = convert.launch_request_from_proto(_request(node_class=node_class(tags=tags)))
    assert len(converted.node_class.tags) == 45
    tags["k44"] = "v"
    with pytest.raises(InvalidRequestError) as info:
        convert.launch_request_from_proto(_request(node_class=node_class(tags=tags)))
    assert info.value.field == "node_class.tags"


@pytest.mark.parametrize(
    ("field", "largest_valid", "too_large"),
    [
        (
            "offerings",
            {"offerings": [offering("m5.large", "us-east-1a", "spot")] * 500},
            {"offerings": [offering("m5.large", "us-east-1a", "spot")] * 501},
        ),
        (
            "node_class.user_data",
            {"node_class": node_class(user_data="#" * 16384)},
            {"node_class": node_class(user_data="#" * 16385)},
        ),
        ("nodeclaim_name", {"nodeclaim_name": "a" * 253}, {"nodeclaim_name": "a" * 254}),
        (
            "labels",
            {"labels": {f"l{i}": "v" for i in range(100)}},
            {"labels": {f"l{i}": "v" for i in range(101)}},
        ),
        (
            "labels['app']",
            {"labels": {"example.com/app": "w" * 63, "app": "a-b_c.d"}},
            {"labels": {"app": "w" * 64}},
        ),
        (
            "taints",
            {"taints": [pb.Taint(key="k", effect="NoSchedule")] * 50},
            {"taints": [pb.Taint(key="k", effect="NoSchedule")] * 51},
        ),
    ],
)
def test_limits_at_their_boundary(
    field: str, largest_valid: dict[str, object], too_large: dict[str, object]
) -> None:
    """The largest request within a limit converts; one step beyond is refused naming the field."""
    convert.launch_request_from_proto(_request(**largest_valid))
    with pytest.raises(InvalidRequestError) as info:
        convert.launch_request_from_proto(_request(**too_large))
    assert info.value.field == field
