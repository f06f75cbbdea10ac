"""Kubelets: EC2 instances of the cluster become Nodes, run their pods, and go away."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.core_v1 import Pod

from actuator_svc.core.user_data import (
    ClusterEndpoint,
    NodeRegistration,
    Taint,
    render_user_data,
)
from localcloud.ec2 import Ec2Emulator
from localcloud.kube.controllers.kubelets import Kubelets
from localcloud.kube.controllers.pod_readiness import READINESS_GATES_NOT_READY
from localcloud.kube.server import KubeApiServer
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import pod
from tests.polling import until

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client
    from types_boto3_ec2.type_defs import TagTypeDef

READINESS_GATE = "target-health.example.com/web"

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


@dataclass
class Cluster:
    """One test's cluster: its name, store, EC2 client and the kubelets it starts."""

    name: str
    emulator: Ec2Emulator
    ec2: EC2Client
    store: Store = field(default_factory=Store)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def tags(self) -> list[TagTypeDef]:
        return [
            {"Key": "daiku.dev/cluster", "Value": self.name},
            {"Key": f"kubernetes.io/cluster/{self.name}", "Value": "owned"},
            {"Key": "daiku.dev/nodepool", "Value": "default"},
            {"Key": "daiku.dev/nodeclaim", "Value": "default-abcde"},
        ]

    def user_data(self) -> str:
        return render_user_data(ClusterEndpoint(name=self.name), REGISTRATION)

    def start_kubelets(self, **settings: Any) -> None:
        kubelets = Kubelets(
            self.store,
            cluster_name=self.name,
            poll_seconds=0.05,
            **{"ec2_endpoint_url": self.emulator.endpoint_url, "boot_seconds": 0.0, **settings},
        )
        self.tasks.append(asyncio.create_task(kubelets.run()))

    async def run_instance(
        self, *, instance_type: str = "m5.large", spot: bool = False, root_volume_gib: int = 0
    ) -> str:
        request: dict[str, Any] = {
            "ImageId": self.emulator.image_ids["x86_64"],
            "InstanceType": instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "SubnetId": self.emulator.subnet_ids["us-east-1b"],
            "UserData": self.user_data(),
            "TagSpecifications": [{"ResourceType": "instance", "Tags": self.tags()}],
        }
        if spot:
            request["InstanceMarketOptions"] = {"MarketType": "spot"}
        if root_volume_gib:
            request["BlockDeviceMappings"] = [
                {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": root_volume_gib}}
            ]
        reservation = await asyncio.to_thread(lambda: self.ec2.run_instances(**request))
        instance_id: str = reservation["Instances"][0]["InstanceId"]
        return instance_id


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, emulator: Ec2Emulator) -> AsyncIterator[Cluster]:
    """A cluster named after the test, so other tests' instances belong to other clusters."""
    ec2 = boto3.client(
        "ec2",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    name = request.node.name.removeprefix("test_").replace("_", "-")[:40]
    running = Cluster(name=name, emulator=emulator, ec2=ec2)
    yield running
    for task in running.tasks:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def node_with_provider_id(store: Store, provider_suffix: str) -> dict[str, Any] | None:
    for item in (await store.list("nodes")).items:
        if item["spec"].get("providerID", "").endswith(provider_suffix):
            return item
    return None


def ready_status(node: dict[str, Any]) -> str:
    status: str = next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")
    return status


async def test_instance_registers_as_a_ready_node(cluster: Cluster) -> None:
    """A cluster instance becomes a Ready node with its type's labels, the user data's labels
    and taints, its providerID, and the EKS allocatable for maxPods 20."""
    store = cluster.store
    cluster.start_kubelets()
    instance_id = await cluster.run_instance()

    async def ready_node() -> dict[str, Any] | None:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found if found and ready_status(found) == "True" else None

    node = await until(ready_node)
    described = cluster.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0][
        "Instances"
    ][0]
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


@pytest.mark.parametrize("source", ["http", "in-process"])
@pytest.mark.parametrize(
    ("root_volume_gib", "capacity", "allocatable"),
    [
        (57, f"{57 * 1024**2}Ki", str(57 * 1024**3 - 57 * 1024**3 // 10 - 1024**3)),
        (0, f"{20 * 1024**2}Ki", str(17 * 1024**3)),
    ],
)
async def test_ephemeral_storage_is_the_root_volume(
    cluster: Cluster, source: str, root_volume_gib: int, capacity: str, allocatable: str
) -> None:
    """The node's ephemeral-storage is the volume launched at the AMI's root device (less the
    10 % nodefs eviction threshold and 1 GiB kube-reserved); the AMI's 20 GiB without one."""
    if source == "http":
        cluster.start_kubelets()
    else:
        cluster.start_kubelets(emulator=cluster.emulator, ec2_endpoint_url=None)
    instance_id = await cluster.run_instance(root_volume_gib=root_volume_gib)
    node = await until(lambda: node_with_provider_id(cluster.store, f"/{instance_id}"))
    assert node["status"]["capacity"]["ephemeral-storage"] == capacity
    assert node["status"]["allocatable"]["ephemeral-storage"] == allocatable


async def test_node_is_not_ready_until_it_has_booted(cluster: Cluster) -> None:
    """Before boot_seconds pass, the node is registered NotReady and tainted not-ready."""
    store = cluster.store
    cluster.start_kubelets(boot_seconds=3600)
    instance_id = await cluster.run_instance()
    node = await until(lambda: node_with_provider_id(store, f"/{instance_id}"))
    assert ready_status(node) == "False"
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]


async def test_spot_instance_from_create_fleet_is_a_spot_node(cluster: Cluster) -> None:
    """A spot instance launched by CreateFleet from a launch template with user data registers
    as a spot node carrying the user data's labels."""
    store = cluster.store
    cluster.start_kubelets()
    template = cluster.ec2.create_launch_template(
        LaunchTemplateName=f"{cluster.name}-default",
        LaunchTemplateData={
            "ImageId": cluster.emulator.image_ids["x86_64"],
            "UserData": base64.b64encode(cluster.user_data().encode()).decode(),
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    response = cluster.ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": "c5.xlarge",
                        "SubnetId": cluster.emulator.subnet_ids["us-east-1a"],
                    }
                ],
            }
        ],
        TagSpecifications=[{"ResourceType": "instance", "Tags": cluster.tags()}],
    )
    instance_id = response["Instances"][0]["InstanceIds"][0]
    node = await until(lambda: node_with_provider_id(store, f"/{instance_id}"))
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c5.xlarge"
    assert node["metadata"]["labels"]["team"] == "checkout"


async def test_other_clusters_instances_are_ignored(cluster: Cluster) -> None:
    """An instance without this cluster's tags never becomes a node."""
    store = cluster.store
    cluster.start_kubelets()
    cluster.ec2.run_instances(
        ImageId=cluster.emulator.image_ids["x86_64"],
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "daiku.dev/cluster", "Value": "other"}]}
        ],
    )
    ours = await cluster.run_instance()
    await until(lambda: node_with_provider_id(store, f"/{ours}"))
    assert len((await store.list("nodes")).items) == 1


async def test_bound_pods_run_and_graceful_deletion_completes(cluster: Cluster) -> None:
    """A pod bound to a Ready node goes Running with a pod IP and ready containers; deleting it
    gracefully removes it once its containers stop."""
    store = cluster.store
    cluster.start_kubelets()
    instance_id = await cluster.run_instance()
    node = await until(lambda: node_with_provider_id(store, f"/{instance_id}"))
    name = node["metadata"]["name"]
    await store.create("pods", pod("web", nodeName=name), "default")

    async def running() -> dict[str, Any] | None:
        found = await store.get("pods", "web", "default")
        return found if found["status"]["phase"] == "Running" else None

    started = await until(running)
    assert started["status"]["podIP"]
    assert started["status"]["hostIP"] == node["status"]["addresses"][0]["address"]
    assert [c["ready"] for c in started["status"]["containerStatuses"]] == [True]
    conditions = {c["type"]: c["status"] for c in started["status"]["conditions"]}
    assert conditions["Ready"] == "True"

    deleting = await store.delete("pods", "web", "default")
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 30

    async def gone() -> bool:
        return not (await store.list("pods", "default")).items

    await until(gone)


async def test_terminated_instance_removes_its_node(cluster: Cluster) -> None:
    """Terminating the instance deletes its Node and its Lease."""
    store = cluster.store
    cluster.start_kubelets()
    instance_id = await cluster.run_instance()
    node = await until(lambda: node_with_provider_id(store, f"/{instance_id}"))
    cluster.ec2.terminate_instances(InstanceIds=[instance_id])

    async def gone() -> bool:
        return await node_with_provider_id(store, f"/{instance_id}") is None

    await until(gone)
    assert store.get_nowait("leases", node["metadata"]["name"], "kube-node-lease") is None


async def test_deleted_node_of_a_running_instance_registers_again(cluster: Cluster) -> None:
    """Deleting the Node of a running instance makes its kubelet register it again."""
    store = cluster.store
    cluster.start_kubelets()
    instance_id = await cluster.run_instance()
    node = await until(lambda: node_with_provider_id(store, f"/{instance_id}"))
    await store.delete("nodes", node["metadata"]["name"])

    async def registered_again() -> bool:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found is not None and found["metadata"]["uid"] != node["metadata"]["uid"]

    await until(registered_again)


async def test_in_process_source_sees_the_same_instances(cluster: Cluster) -> None:
    """Reading the emulator in process, kubelets register the same Ready node (spot, with the
    user data's labels) and retire it when the instance terminates."""
    store = cluster.store
    cluster.start_kubelets(emulator=cluster.emulator, ec2_endpoint_url=None)
    instance_id = await cluster.run_instance(spot=True)

    async def ready_node() -> dict[str, Any] | None:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found if found and ready_status(found) == "True" else None

    node = await until(ready_node)
    described = cluster.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0][
        "Instances"
    ][0]
    assert node["metadata"]["name"] == described["PrivateDnsName"]
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert node["metadata"]["labels"]["team"] == "checkout"
    assert node["status"]["allocatable"]["pods"] == "20"
    cluster.ec2.terminate_instances(InstanceIds=[instance_id])

    async def gone() -> bool:
        return await node_with_provider_id(store, f"/{instance_id}") is None

    await until(gone)


@pytest.mark.parametrize("in_process", [False, True])
async def test_an_impaired_instance_s_kubelet_stops_posting_status(
    cluster: Cluster, in_process: bool
) -> None:
    """The emulator's impaired status checks (DescribeInstanceStatus `impaired`, read over
    HTTP or in process) silence the instance's kubelet: its Node goes Ready Unknown with a
    fresh lastTransitionTime and a bound pod does not start; unimpaired, it is Ready again."""
    store = cluster.store
    if in_process:
        cluster.start_kubelets(emulator=cluster.emulator, ec2_endpoint_url=None)
    else:
        cluster.start_kubelets()
    instance_id = await cluster.run_instance()

    async def node_status(status: str) -> dict[str, Any] | None:
        found = await node_with_provider_id(store, f"/{instance_id}")
        return found if found and ready_status(found) == status else None

    node = await until(lambda: node_status("True"))
    cluster.emulator.impair_instance(instance_id)
    [status] = cluster.ec2.describe_instance_status(InstanceIds=[instance_id])["InstanceStatuses"]
    assert status["InstanceStatus"]["Status"] == "impaired"
    assert status["SystemStatus"]["Status"] == "impaired"

    silent = await until(lambda: node_status("Unknown"))
    [ready] = [c for c in silent["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["message"] == "Kubelet stopped posting node status."
    await store.create("pods", pod("stuck", nodeName=node["metadata"]["name"]), "default")
    await asyncio.sleep(0.3)  # several polls: a silent kubelet starts nothing
    assert (await store.get("pods", "stuck", "default"))["status"].get("phase") != "Running"

    cluster.emulator.impair_instance(instance_id, impaired=False)
    await until(lambda: node_status("True"))


@pytest.fixture
async def lightkube(cluster: Cluster, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    async with KubeApiServer(tls=True, store=cluster.store) as kube:
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        client = AsyncClient(config=KubeConfig.from_file(tmp_path / "kubeconfig"))
        try:
            yield client
        finally:
            await client.close()


def conditions_of(found: Pod) -> dict[str, str]:
    assert found.status is not None
    return {c.type: c.status for c in found.status.conditions or []}


async def test_a_gated_pod_turns_ready_only_when_its_gate_condition_is_true(
    cluster: Cluster, lightkube: AsyncClient
) -> None:
    """The pod runs with ContainersReady True and Ready False; a client setting the gate's
    condition True through /status makes the kubelet report Ready, and False takes it back."""
    cluster.start_kubelets(emulator=cluster.emulator, ec2_endpoint_url=None)
    instance_id = await cluster.run_instance()
    node = await until(lambda: node_with_provider_id(cluster.store, f"/{instance_id}"))
    web = pod(
        "web", nodeName=node["metadata"]["name"], readinessGates=[{"conditionType": READINESS_GATE}]
    )
    web["metadata"]["namespace"] = "default"
    await lightkube.create(cast(Pod, Pod.from_dict({"apiVersion": "v1", "kind": "Pod", **web})))

    async def with_conditions(wanted: dict[str, str]) -> dict[str, str] | None:
        found = conditions_of(await lightkube.get(Pod, "web", namespace="default"))
        return found if wanted.items() <= found.items() else None

    await until(lambda: with_conditions({"ContainersReady": "True", "Ready": "False"}))
    stored = await lightkube.get(Pod, "web", namespace="default")
    assert stored.status is not None
    assert stored.status.phase == "Running"
    (ready,) = [c for c in stored.status.conditions or [] if c.type == "Ready"]
    assert ready.reason == READINESS_GATES_NOT_READY
    assert (
        ready.message
        == f'corresponding condition of pod readiness gate "{READINESS_GATE}" does not exist.'
    )

    def gate(status: str) -> dict[str, Any]:
        return {"status": {"conditions": [{"type": READINESS_GATE, "status": status}]}}

    await lightkube.patch(Pod.Status, "web", gate("True"), namespace="default")
    await until(lambda: with_conditions({READINESS_GATE: "True", "Ready": "True"}))

    await lightkube.patch(Pod.Status, "web", gate("False"), namespace="default")
    await until(lambda: with_conditions({READINESS_GATE: "False", "Ready": "False"}))
