"""EC2NodeClass status end to end: the scheduler's status controller resolves each class
through the actuator's ResolveNodeClass (EC2 emulator) and writes subnets, security groups,
AMIs and readiness; a class whose terms select nothing holds its NodePools back; a newer AMI
published under the same alias drifts the node running the old one, and so does a new security
group tagged for the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.ec2.emulator import EKS_KUBERNETES_VERSION
from scheduler_svc.lifecycle.controller import LifecycleSettings
from scheduler_svc.nodeclass import NodeClassStatusSettings
from tests.e2e.conftest import (
    FrozenClock,
    RunningScheduler,
    Stack,
    start_with_disruption_clock,
)
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ON_DEMAND_AMD64 = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
]


async def start(stack: Stack, *, interval_seconds: float = 60.0) -> RunningScheduler:
    return await start_with_disruption_clock(
        stack,
        FrozenClock(),
        lifecycle=LifecycleSettings(tick_seconds=0.5),
        nodeclass=NodeClassStatusSettings(interval_seconds=interval_seconds),
    )


async def one_pod_that_only_drift_moves(stack: Stack) -> RunningScheduler:
    """A one-pod Deployment on an amd64 on-demand pool whose disruption settings remove
    nothing within a test (WhenEmpty after 1 h), a scheduler resolving classes every 0.5 s."""
    await stack.apply_pool(requirements=ON_DEMAND_AMD64)
    await stack.store.patch(
        "nodepools",
        "default",
        {"spec": {"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h"}}},
    )
    scheduler = await start(stack, interval_seconds=0.5)
    await stack.create_deployment(1)
    return scheduler


async def disrupting_events(stack: Stack, claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The Disrupting Events about `claim`."""
    name = claim["metadata"]["name"]
    return [e for e in await events(stack, "Disrupting") if e["involvedObject"]["name"] == name]


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in obj.get("status", {}).get("conditions", [])
    }


async def node_class(stack: Stack) -> dict[str, Any]:
    obj: dict[str, Any] = await stack.store.get("ec2nodeclasses", "default")
    return obj


async def events(stack: Stack, reason: str) -> list[dict[str, Any]]:
    return [e for e in await stack.objects("events", "default") if e.get("reason") == reason]


async def test_the_status_shows_what_the_selectors_resolve_to(stack: Stack) -> None:
    """Once leading, the scheduler writes the class's subnets (with zones), its security group
    (with name) and the newest al2023 AMI per architecture, and Ready and the three
    resolution conditions True."""
    await stack.apply_pool(requirements=ON_DEMAND_AMD64)
    await start(stack)
    emulator = stack.cloud.ec2

    async def resolved() -> dict[str, Any] | None:
        obj = await node_class(stack)
        return obj if obj.get("status", {}).get("amis") else None

    obj = await until(resolved)
    status = obj["status"]
    assert {s["id"]: s["zone"] for s in status["subnets"]} == {
        subnet: zone for zone, subnet in emulator.subnet_ids.items()
    }
    assert all(s["zoneID"] for s in status["subnets"])
    assert status["securityGroups"] == [
        {"id": emulator.security_group_id, "name": f"{stack.cloud.cluster_name}-nodes"}
    ]
    assert {a["id"]: a["requirements"] for a in status["amis"]} == {
        emulator.image_ids["x86_64"]: [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
        ],
        emulator.image_ids["arm64"]: [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
        ],
    }

    async def ready() -> dict[str, tuple[str, str, str]] | None:
        shown = conditions(await node_class(stack))
        wanted = ("Ready", "SubnetsReady", "SecurityGroupsReady", "AMIsReady")
        return shown if all(shown.get(t, ("",))[0] == "True" for t in wanted) else None

    await until(ready)


async def test_a_class_selecting_no_ami_holds_its_pools_until_fixed(stack: Stack) -> None:
    """With AMI terms that match nothing, the class shows AMIsReady and Ready False with the
    actuator's message (Event NodeClassNotReady), its NodePool NodeClassReady False, and a
    pending pod gets no NodeClaim; fixing the terms makes it Ready and the pod runs."""
    await stack.apply_pool(requirements=ON_DEMAND_AMD64)
    # A whole replace: the alias term goes and amiFamily (required without one) comes.
    current = await node_class(stack)
    current["spec"]["amiSelectorTerms"] = [{"name": "no-such-image-*"}]
    current["spec"]["amiFamily"] = "AL2023"
    await stack.store.update("ec2nodeclasses", current)
    await start(stack)

    async def not_ready() -> dict[str, tuple[str, str, str]] | None:
        shown = conditions(await node_class(stack))
        return shown if shown.get("AMIsReady", ("",))[0] == "False" else None

    shown = await until(not_ready)
    assert shown["AMIsReady"][1] == "AMIsNotFound"
    assert shown["AMIsReady"][2].startswith("node_class.ami_selector_terms: match no")
    assert shown["Ready"][:2] == ("False", "NotReady")

    async def reported() -> list[str]:
        return [e["involvedObject"]["name"] for e in await events(stack, "NodeClassNotReady")]

    assert await until(reported) == ["default"]
    names = await stack.create_pods(1, cpu="500m", memory="512Mi", prefix="held")

    async def pool_held() -> bool:
        pool = await stack.store.get("nodepools", "default")
        return conditions(pool).get("NodeClassReady", ("",))[0] == "False"

    await until(pool_held)
    pool = await stack.store.get("nodepools", "default")
    assert conditions(pool)["Ready"][0] == "False"
    assert "EC2NodeClass default is not ready" in conditions(pool)["NodeClassReady"][2]
    assert await stack.objects("nodeclaims") == []

    current = await node_class(stack)
    current["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    await stack.store.update("ec2nodeclasses", current)

    async def pod_running() -> bool:
        pods = {p["metadata"]["name"]: p for p in await stack.objects("pods", "default")}
        return bool(pods[names[0]].get("status", {}).get("phase") == "Running")

    await until(pod_running, timeout_seconds=30)
    assert conditions(await node_class(stack))["Ready"][0] == "True"
    pool = await stack.store.get("nodepools", "default")
    assert conditions(pool)["NodeClassReady"][0] == "True"


@pytest.mark.parametrize(
    ("terms", "condition", "reason"),
    [
        ({"subnetSelectorTerms": [{"tags": {"nope": "x"}}]}, "SubnetsReady", "SubnetsNotFound"),
        (
            {"securityGroupSelectorTerms": [{"name": "nope"}]},
            "SecurityGroupsReady",
            "SecurityGroupsNotFound",
        ),
    ],
)
async def test_subnet_and_security_group_terms_selecting_nothing_are_reported(
    stack: Stack, terms: dict[str, Any], condition: str, reason: str
) -> None:
    """Subnet or security-group terms that select nothing set their condition and Ready False
    with the actuator's message naming the field."""
    await stack.apply_pool(requirements=ON_DEMAND_AMD64)
    current = await node_class(stack)
    current["spec"].update(terms)
    await stack.store.update("ec2nodeclasses", current)
    await start(stack)

    async def reported() -> dict[str, tuple[str, str, str]] | None:
        shown = conditions(await node_class(stack))
        return shown if shown.get(condition, ("",))[0] == "False" else None

    shown = await until(reported)
    assert shown[condition][1] == reason
    assert shown["Ready"][0] == "False"
    assert shown["Ready"][2] == shown[condition][2]
    assert shown[condition][2].startswith("node_class.")


async def test_a_newer_ami_under_the_same_alias_drifts_the_node(stack: Stack) -> None:
    """A node launched with the seeded AMI (claim status.imageID) is marked Drifted once a
    newer al2023 x86_64 image is registered and the status controller's next resolution lists
    it, and its replacement runs the new image."""
    emulator = stack.cloud.ec2
    ec2 = stack.ec2_client()
    scheduler = await one_pod_that_only_drift_moves(stack)

    async def launched() -> list[dict[str, Any]]:
        claims = await stack.objects("nodeclaims")
        return [c for c in claims if c.get("status", {}).get("imageID")]

    (old,) = await until(launched, timeout_seconds=30)
    assert old["status"]["imageID"] == emulator.image_ids["x86_64"]
    status = scheduler.service.nodeclass_status
    assert status is not None
    resolved = status.resolutions
    # Three status resolutions later the node has not drifted.
    await until(lambda: status.resolutions >= resolved + 3)
    assert [c["metadata"]["name"] for c in await stack.objects("nodeclaims")] == [
        old["metadata"]["name"]
    ]
    newer = ec2.register_image(
        Name=f"amazon-eks-node-al2023-x86_64-standard-{EKS_KUBERNETES_VERSION}-v20991231",
        Architecture="x86_64",
        RootDeviceName="/dev/xvda",
    )["ImageId"]
    try:

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return [c for c in claims if c.get("status", {}).get("imageID")]

        (new,) = await until(replaced, timeout_seconds=45)
        assert new["status"]["imageID"] == newer
        disrupting = await disrupting_events(stack, old)
        assert disrupting
        assert disrupting[0]["message"].startswith(
            f"Drifted: AMI {emulator.image_ids['x86_64']} is no longer selected"
        )
    finally:
        await stack.delete_workloads()
        ec2.deregister_image(ImageId=newer)


async def test_a_new_security_group_for_the_cluster_drifts_the_node(stack: Stack) -> None:
    """A node launched in the cluster's security group (recorded on its claim with its subnet)
    is marked Drifted once a second group tagged for the cluster appears in the class's
    status, and its replacement's instance is in both groups."""
    emulator = stack.cloud.ec2
    ec2 = stack.ec2_client()
    seeded = emulator.security_group_id
    await one_pod_that_only_drift_moves(stack)

    async def recorded() -> list[dict[str, Any]]:
        claims = await stack.objects("nodeclaims")
        return [
            c
            for c in claims
            if "daiku.dev/security-group-ids" in c["metadata"].get("annotations", {})
        ]

    (old,) = await until(recorded, timeout_seconds=30)
    annotations = old["metadata"]["annotations"]
    zone = old["metadata"]["labels"]["topology.kubernetes.io/zone"]
    assert annotations["daiku.dev/subnet-id"] == emulator.subnet_ids[zone]
    assert annotations["daiku.dev/security-group-ids"] == seeded
    status_groups = [g["id"] for g in (await node_class(stack))["status"]["securityGroups"]]
    assert status_groups == [seeded]  # what the claim records: nothing to drift
    vpc_id = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    added = ec2.create_security_group(
        GroupName=f"{stack.cloud.cluster_name}-nodes-extra",
        Description="a second group for the cluster's nodes",
        VpcId=vpc_id,
        TagSpecifications=[
            {
                "ResourceType": "security-group",
                "Tags": [{"Key": "karpenter.sh/discovery", "Value": stack.cloud.cluster_name}],
            }
        ],
    )["GroupId"]
    both = sorted([seeded, added])
    try:

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return await recorded()

        (new,) = await until(replaced, timeout_seconds=45)
        assert new["metadata"]["annotations"]["daiku.dev/security-group-ids"] == ",".join(both)
        instance_id = new["status"]["providerID"].rsplit("/", 1)[-1]
        described = ec2.describe_instances(InstanceIds=[instance_id])
        instance = described["Reservations"][0]["Instances"][0]
        assert sorted(g["GroupId"] for g in instance["SecurityGroups"]) == both
        disrupting = await disrupting_events(stack, old)
        assert disrupting
        assert disrupting[0]["message"].startswith(
            f"Drifted: security groups [{seeded}] differ from EC2NodeClass default's "
            f"[{', '.join(both)}]"
        )
    finally:
        await stack.delete_workloads()
        # Untagged, the group is selected no more (its instance still uses it until reset).
        ec2.delete_tags(Resources=[added], Tags=[{"Key": "karpenter.sh/discovery"}])


async def test_a_node_whose_subnet_is_no_longer_selected_drifts(stack: Stack) -> None:
    """A node launched into a subnet (recorded on its claim) is marked Drifted once that subnet
    loses the cluster's discovery tag and leaves the class's status, and its replacement runs
    in a subnet still selected."""
    emulator = stack.cloud.ec2
    ec2 = stack.ec2_client()
    await one_pod_that_only_drift_moves(stack)

    async def recorded() -> list[dict[str, Any]]:
        claims = await stack.objects("nodeclaims")
        return [c for c in claims if "daiku.dev/subnet-id" in c["metadata"].get("annotations", {})]

    (old,) = await until(recorded, timeout_seconds=30)
    subnet = old["metadata"]["annotations"]["daiku.dev/subnet-id"]
    zone = old["metadata"]["labels"]["topology.kubernetes.io/zone"]
    assert subnet == emulator.subnet_ids[zone]
    discovery = {"Key": "karpenter.sh/discovery", "Value": stack.cloud.cluster_name}
    ec2.delete_tags(Resources=[subnet], Tags=[{"Key": "karpenter.sh/discovery"}])
    try:

        async def replaced() -> list[dict[str, Any]]:
            claims = await stack.objects("nodeclaims")
            if any(c["metadata"]["name"] == old["metadata"]["name"] for c in claims):
                return []
            return await recorded()

        (new,) = await until(replaced, timeout_seconds=45)
        new_subnet = new["metadata"]["annotations"]["daiku.dev/subnet-id"]
        assert new_subnet != subnet
        assert new_subnet in set(emulator.subnet_ids.values())
        disrupting = await disrupting_events(stack, old)
        assert disrupting
        assert disrupting[0]["message"].startswith(
            f"Drifted: subnet {subnet} is no longer selected by EC2NodeClass default"
        )
    finally:
        await stack.delete_workloads()
        ec2.create_tags(Resources=[subnet], Tags=[discovery])
