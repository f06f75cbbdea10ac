"""DescribeInstances answered by the emulator: same answers as moto, EC2's paging, a cache that
sees every change, and moto's tag look-ups made fast without changing their answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from localcloud.ec2 import Ec2Emulator

from .test_create_fleet import create_fleet

if TYPE_CHECKING:
    from collections.abc import Mapping

    from types_boto3_ec2.client import EC2Client
    from types_boto3_ec2.type_defs import (
        DescribeInstancesRequestTypeDef,
        DescribeInstancesResultTypeDef,
        InstanceTypeDef,
        TagDescriptionTypeDef,
    )

CLUSTER_TAG = "daiku.dev/cluster"
CLAIM_TAG = "daiku.dev/nodeclaim"


def launch(
    ec2: EC2Client, emulator: Ec2Emulator, launch_template_id: str, count: int, *, first: int = 0
) -> list[str]:
    """`count` instances, one fleet each, tagged like the actuator tags a claim's instance."""
    ids = []
    for index in range(first, first + count):
        tags = {CLAIM_TAG: f"claim-{index:02d}", "Name": f"node-{index:02d}"}
        if index % 3:
            tags[CLUSTER_TAG] = "daiku"
        answer = create_fleet(
            ec2, emulator, launch_template_id, [("m5.large", "us-east-1a")], tags=tags
        )
        ids += answer["Instances"][0]["InstanceIds"]
    return ids


def described_ids(answer: DescribeInstancesResultTypeDef) -> list[str]:
    return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]


def without_metadata(answer: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}


def test_fast_path_answers_exactly_as_moto(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """For listings, tag and state filters and id lists, the emulator's DescribeInstances parses
    to the same answer as moto's own, after launches, tag changes, terminations and an
    attribute change."""
    ids = launch(ec2, emulator, launch_template_id, 9)
    ec2.create_tags(Resources=[ids[4]], Tags=[{"Key": "extra", "Value": "yes"}])
    ec2.terminate_instances(InstanceIds=ids[:2])
    ec2.modify_instance_attribute(InstanceId=ids[5], SourceDestCheck={"Value": False})
    requests: list[DescribeInstancesRequestTypeDef] = [
        {"MaxResults": 1000},
        {"Filters": [{"Name": f"tag:{CLUSTER_TAG}", "Values": ["daiku"]}], "MaxResults": 1000},
        {
            "Filters": [
                {"Name": f"tag:{CLUSTER_TAG}", "Values": ["daiku"]},
                {"Name": "instance-state-name", "Values": ["running"]},
            ]
        },
        {"Filters": [{"Name": f"tag:{CLAIM_TAG}", "Values": ["claim-04", "claim-07"]}]},
        {"Filters": [{"Name": "tag-key", "Values": ["extra"]}]},
        {"InstanceIds": [ids[1], ids[5], ids[8]]},
    ]
    for request in requests:
        emulator.fast_describe_instances = True
        fast = ec2.describe_instances(**request)
        emulator.fast_describe_instances = False
        moto = ec2.describe_instances(**request)
        assert without_metadata(fast) == without_metadata(moto), request
        assert described_ids(fast), request


def test_pages_follow_next_token_in_launch_order(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """MaxResults=5 over 12 instances gives pages of 5, 5 and 2 linked by NextToken, every
    instance once, in launch order, and no token after the last page."""
    ids = launch(ec2, emulator, launch_template_id, 12)
    pages = []
    kwargs: dict[str, Any] = {"MaxResults": 5}
    while True:
        page = ec2.describe_instances(**kwargs)
        pages.append(described_ids(page))
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [i for p in pages for i in p] == ids


def test_filtered_pages_count_matches_only(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Paging a tag filter pages over the matching instances only (8 of 12: pages of 5 and 3)."""
    ids = launch(ec2, emulator, launch_template_id, 12)
    paginator = ec2.get_paginator("describe_instances")
    pages = [
        described_ids(page)
        for page in paginator.paginate(
            Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": ["daiku"]}],
            PaginationConfig={"PageSize": 5},
        )
    ]
    assert [len(p) for p in pages] == [5, 3]
    assert [i for p in pages for i in p] == [i for n, i in enumerate(ids) if n % 3]


def test_every_match_without_max_results(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Without MaxResults all 105 instances come in one answer, and so do 105 requested ids
    (moto alone stops at 100 and returns a token even for an id list)."""
    ids = launch(ec2, emulator, launch_template_id, 105)
    everything = ec2.describe_instances()
    assert described_ids(everything) == ids
    assert "NextToken" not in everything
    by_ids = ec2.describe_instances(InstanceIds=list(reversed(ids)))
    assert sorted(described_ids(by_ids)) == sorted(ids)
    assert "NextToken" not in by_ids


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        ({"MaxResults": 4}, "InvalidParameterValue"),
        ({"MaxResults": 1001}, "InvalidParameterValue"),
        ({"MaxResults": 5, "InstanceIds": ["i-0123456789abcdef0"]}, "InvalidParameterCombination"),
        ({"MaxResults": 5, "NextToken": "r-0000000000000000"}, "InvalidParameterValue"),
        ({"InstanceIds": ["i-0123456789abcdef0"]}, "InvalidInstanceID.NotFound"),
    ],
)
def test_rejects_what_ec2_rejects(
    emulator: Ec2Emulator,
    ec2: EC2Client,
    launch_template_id: str,
    request_: dict[str, Any],
    code: str,
) -> None:
    """MaxResults outside 5-1000, MaxResults with InstanceIds, an unknown NextToken and an
    unknown instance id are rejected with EC2's error codes."""
    launch(ec2, emulator, launch_template_id, 1)
    with pytest.raises(ClientError) as raised:
        ec2.describe_instances(**request_)
    assert raised.value.response["Error"]["Code"] == code


def test_changes_are_seen_through_the_cache(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """After an instance was described once, a new tag, a termination (by the API and by the
    emulator itself) and an attribute change all show in the next DescribeInstances."""
    ids = launch(ec2, emulator, launch_template_id, 4)

    def instance(instance_id: str) -> InstanceTypeDef:
        by_id = {
            i["InstanceId"]: i
            for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"]
        }
        return by_id[instance_id]

    assert instance(ids[0])["State"]["Name"] == "running"
    ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "team", "Value": "a"}])
    assert {"Key": "team", "Value": "a"} in instance(ids[0])["Tags"]
    ec2.terminate_instances(InstanceIds=[ids[1]])
    assert instance(ids[1])["State"]["Name"] in ("shutting-down", "terminated")
    emulator.terminate_instance(ids[2])
    assert instance(ids[2])["State"]["Name"] in ("shutting-down", "terminated")
    assert instance(ids[3])["SourceDestCheck"] is True
    ec2.modify_instance_attribute(InstanceId=ids[3], SourceDestCheck={"Value": False})
    assert instance(ids[3])["SourceDestCheck"] is False


def test_unchanged_reservations_are_rendered_once(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Describing 10 unchanged instances twice serializes each reservation once; a tag change
    re-serializes only that instance's reservation."""
    ids = launch(ec2, emulator, launch_template_id, 10)
    before = emulator.describe_instances_rendered
    ec2.describe_instances()
    ec2.describe_instances()
    assert emulator.describe_instances_rendered - before == 10
    ec2.create_tags(Resources=[ids[3]], Tags=[{"Key": "team", "Value": "a"}])
    assert len(described_ids(ec2.describe_instances())) == 10
    assert emulator.describe_instances_rendered - before == 11


def test_literal_tag_look_ups_answer_as_patterns_do(
    emulator: Ec2Emulator, ec2: EC2Client, launch_template_id: str
) -> None:
    """Literal `tag:KEY` and `tag-key` filters (the fast path) select the same instances as
    equivalent patterns (moto's own path), and DescribeTags of one id (fast) lists the same
    tags as a two-value id filter (moto's own path)."""
    ids = launch(ec2, emulator, launch_template_id, 12)
    for literal, pattern in [
        (["claim-04"], ["claim-04*"]),
        (["claim-10", "claim-11"], ["claim-1?"]),
    ]:
        found = [
            described_ids(
                ec2.describe_instances(
                    Filters=[
                        {"Name": f"tag:{CLUSTER_TAG}", "Values": ["daiku"]},
                        {"Name": f"tag:{CLAIM_TAG}", "Values": values},
                    ]
                )
            )
            for values in (literal, pattern)
        ]
        assert found[0] == found[1] == [ids[int(v[-2:])] for v in literal]
    assert described_ids(
        ec2.describe_instances(Filters=[{"Name": f"tag:{CLAIM_TAG}", "Values": ["claim-03"]}])
    ) == [ids[3]]
    by_key = [
        described_ids(ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": values}]))
        for values in ([CLUSTER_TAG, "absent"], ["daiku.dev/cluste?"])
    ]
    assert by_key[0] == by_key[1] == [i for n, i in enumerate(ids) if n % 3]

    def tags(values: list[str]) -> list[TagDescriptionTypeDef]:
        answer = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": values}])
        return sorted(answer["Tags"], key=lambda t: t["Key"])

    one = tags([ids[5]])
    assert one == tags([ids[5], "i-00000000000000000"])
    assert {CLAIM_TAG, CLUSTER_TAG, "Name"} <= {t["Key"] for t in one}
