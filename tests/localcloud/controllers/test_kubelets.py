"""Kubelets: EC2 instances of the cluster become Nodes, run their pods, and go away."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import boto3
import pytest

from actuator_svc.core.user_data import (
    ClusterEndpoint,
    NodeRegistration,
    Taint,
    render_user_data,
)
from localcloud.ec2 import Ec2Emulator
from localcloud.kube.controllers.kubelets import Kubelets
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import eventually, pod

REGISTRATION = NodeRegistration(
    labels={"daiku.dev/nodepool": "default", "team": "checkout"},
    taints=(
        Taint("daiku.dev/unregistered", "", "NoExecute"),
        Taint("dedicated", "checkout", "NoSchedule"),
    ),
    max_pods=20,
)


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    """One emulator for the module (starting one takes a while); each test is its own cluster."""
    with Ec2Emulator() as running:
        yield running


@pytest.fixture(autouse=True)
def cluster(request: pytest.FixtureRequest) -> str:
    """A cluster name per test, so instances of other tests are other clusters' instances."""
    global CLUSTER  # noqa: PLW0603 - the helpers below read the test's cluster name
    CLUSTER = request.node.name.removeprefix("test_").replace("_", "-")[:40]
    return CLUSTER


CLUSTER = "daiku"


def cluster_tags() -> list[dict[str, str]]:
    return [
        {"Key": "daiku.dev/cluster", "Value": CLUSTER},
        {"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"},
        {"Key": "daiku.dev/nodepool", "Value": "default"},
        {"Key": "daiku.dev/nodeclaim", "Value": "default-abcde"},
    ]


@pytest.fixture
def ec2(emulator: Ec2Emulator) -> Any:
    return boto3.client(
        "ec2",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


async def start_kubelets(
    store: Store, emulator: Ec2Emulator, **settings: Any
) -> asyncio.Task[None]:
    kubelets = Kubelets(
        store,
        ec2_endpoint_url=emulator.endpoint_url,
        cluster_name=CLUSTER,
        poll_seconds=0.05,
        **{"boot_seconds": 0.0, **settings},
    )
    return asyncio.create_task(kubelets.run())


@pytest.fixture
async def kubelet_runner() -> AsyncIterator[Callable[[asyncio.Task[None]], None]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks.append
    for task in tasks:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def user_data(registration: NodeRegistration = REGISTRATION) -> str:
    return render_user_data(ClusterEndpoint(name=CLUSTER), registration)


def run_instance(
    ec2: Any, emulator: Ec2Emulator, *, instance_type: str = "m5.large", spot: bool = False
) -> str:
    request: dict[str, Any] = {
        "ImageId": emulator.image_ids["x86_64"],
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "SubnetId": emulator.subnet_ids["us-east-1b"],
        "UserData": user_data(),
        "TagSpecifications": [{"ResourceType": "instance", "Tags": cluster_tags()}],
    }
    if spot:
        request["InstanceMarketOptions"] = {"MarketType": "spot"}
    instance_id: str = ec2.run_instances(**request)["Instances"][0]["InstanceId"]
    return instance_id


async def node_with_provider_id(store: Store, provider_suffix: str) -> dict[str, Any] | None:
    for item in (await store.list("nodes")).items:
        if item["spec"].get("providerID", "").endswith(provider_suffix):
            return item
    return None


def ready_status(node: dict[str, Any]) -> str:
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


async def test_instance_registers_as_a_ready_node(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """A cluster instance becomes a Ready node with its type's labels, the user data's labels
    and taints, its providerID, and the EKS allocatable for maxPods 20."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator)

    async def ready_node() -> dict[str, Any] | None:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found if found and ready_status(found) == "True" else None

    node = await eventually(ready_node)
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert node["metadata"]["name"] == described["PrivateDnsName"]
    assert node["spec"]["providerID"] == f"aws:///us-east-1b/{instance_id}"
    labels = node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["karpenter.sh/capacity-type"] == "on-demand"
    assert labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
    assert labels["daiku.dev/nodepool"] == "default"
    assert labels["team"] == "checkout"
    assert node["spec"]["taints"] == [
        {"key": "daiku.dev/unregistered", "effect": "NoExecute"},
        {"key": "dedicated", "value": "checkout", "effect": "NoSchedule"},
    ]
    # m5.large with maxPods 20: 2 vCPU -> 1930m, 8 GiB less overhead and reserved memory
    assert node["status"]["allocatable"]["cpu"] == "1930m"
    assert node["status"]["allocatable"]["pods"] == "20"
    assert node["status"]["capacity"]["cpu"] == "2"
    lease = await store.get("leases", node["metadata"]["name"], "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == node["metadata"]["name"]


async def test_node_is_not_ready_until_it_has_booted(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """Before boot_seconds pass, the node is registered NotReady and tainted not-ready."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator, boot_seconds=3600))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator)
    node = await eventually(lambda: node_with_provider_id(store, f"/{instance_id}"))
    assert ready_status(node) == "False"
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]


async def test_spot_instance_from_create_fleet_is_a_spot_node(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """A spot instance launched by CreateFleet from a launch template with user data registers
    as a spot node carrying the user data's labels."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{CLUSTER}-default",
        LaunchTemplateData={
            "ImageId": emulator.image_ids["x86_64"],
            "UserData": base64.b64encode(user_data().encode()).decode(),
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    response = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": "c5.xlarge", "SubnetId": emulator.subnet_ids["us-east-1a"]}
                ],
            }
        ],
        TagSpecifications=[{"ResourceType": "instance", "Tags": cluster_tags()}],
    )
    instance_id = response["Instances"][0]["InstanceIds"][0]
    node = await eventually(lambda: node_with_provider_id(store, f"/{instance_id}"))
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c5.xlarge"
    assert node["metadata"]["labels"]["team"] == "checkout"


async def test_other_clusters_instances_are_ignored(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """An instance without this cluster's tags never becomes a node."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    ec2.run_instances(
        ImageId=emulator.image_ids["x86_64"],
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "daiku.dev/cluster", "Value": "other"}]}
        ],
    )
    ours = await asyncio.to_thread(run_instance, ec2, emulator)
    await eventually(lambda: node_with_provider_id(store, f"/{ours}"))
    assert len((await store.list("nodes")).items) == 1


async def test_bound_pods_run_and_graceful_deletion_completes(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """A pod bound to a Ready node goes Running with a pod IP and ready containers; deleting it
    gracefully removes it once its containers stop."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator)
    node = await eventually(lambda: node_with_provider_id(store, f"/{instance_id}"))
    name = node["metadata"]["name"]
    await store.create("pods", pod("web", nodeName=name), "default")

    async def running() -> dict[str, Any] | None:
        found = await store.get("pods", "web", "default")
        return found if found["status"]["phase"] == "Running" else None

    started = await eventually(running)
    assert started["status"]["podIP"]
    assert started["status"]["hostIP"] == node["status"]["addresses"][0]["address"]
    assert [c["ready"] for c in started["status"]["containerStatuses"]] == [True]
    conditions = {c["type"]: c["status"] for c in started["status"]["conditions"]}
    assert conditions["Ready"] == "True"

    deleting = await store.delete("pods", "web", "default")
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 30

    async def gone() -> bool:
        return not (await store.list("pods", "default")).items

    await eventually(gone)


async def test_terminated_instance_removes_its_node(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """Terminating the instance deletes its Node and its Lease."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator)
    node = await eventually(lambda: node_with_provider_id(store, f"/{instance_id}"))
    ec2.terminate_instances(InstanceIds=[instance_id])

    async def gone() -> bool:
        return await node_with_provider_id(store, f"/{instance_id}") is None

    await eventually(gone)
    assert store.get_nowait("leases", node["metadata"]["name"], "kube-node-lease") is None


async def test_deleted_node_of_a_running_instance_registers_again(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """Deleting the Node of a running instance makes its kubelet register it again."""
    store = Store()
    kubelet_runner(await start_kubelets(store, emulator))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator)
    node = await eventually(lambda: node_with_provider_id(store, f"/{instance_id}"))
    await store.delete("nodes", node["metadata"]["name"])

    async def registered_again() -> bool:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found is not None and found["metadata"]["uid"] != node["metadata"]["uid"]

    await eventually(registered_again)


async def test_in_process_source_sees_the_same_instances(
    emulator: Ec2Emulator, ec2: Any, kubelet_runner: Callable[[asyncio.Task[None]], None]
) -> None:
    """Reading the emulator in process, kubelets register the same Ready node (spot, with the
    user data's labels) and retire it when the instance terminates."""
    store = Store()
    kubelets = Kubelets(
        store, emulator=emulator, cluster_name=CLUSTER, poll_seconds=0.05, boot_seconds=0
    )
    kubelet_runner(asyncio.create_task(kubelets.run()))
    instance_id = await asyncio.to_thread(run_instance, ec2, emulator, spot=True)

    async def ready_node() -> dict[str, Any] | None:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found if found and ready_status(found) == "True" else None

    node = await eventually(ready_node)
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert node["metadata"]["name"] == described["PrivateDnsName"]
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert node["metadata"]["labels"]["team"] == "checkout"
    assert node["status"]["allocatable"]["pods"] == "20"
    ec2.terminate_instances(InstanceIds=[instance_id])

    async def gone() -> bool:
        return await node_with_provider_id(store, f"/{instance_id}") is None

    await eventually(gone)
