"""LocalCloud end to end: real clients (boto3 over HTTP, kubernetes_asyncio, kubectl)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from kubernetes_asyncio import client, config

from actuator_svc.core.user_data import ClusterEndpoint, NodeRegistration, Taint, render_user_data
from localcloud.cluster import LocalCloud
from tests.polling import until

if TYPE_CHECKING:
    from types_boto3_ec2.client import EC2Client

# kubernetes_asyncio's generated APIs take `_content_type` at run time (and reject unknown
# keywords), but their stubs omit it; spread from a dict so the other arguments stay checked.
MERGE_PATCH: dict[str, Any] = {"_content_type": "application/merge-patch+json"}

pytestmark = pytest.mark.e2e


@pytest.fixture
async def cloud(tmp_path: Path) -> AsyncIterator[LocalCloud]:
    async with LocalCloud(
        boot_seconds=0, ec2_poll_seconds=0.05, kubeconfig_path=tmp_path / "kubeconfig"
    ) as running:
        yield running


@pytest.fixture
async def core(cloud: LocalCloud) -> AsyncIterator[client.CoreV1Api]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(cloud.kubeconfig_path), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api_client:
        yield client.CoreV1Api(api_client)


def ec2_client(cloud: LocalCloud) -> EC2Client:
    return boto3.client(
        "ec2",
        endpoint_url=cloud.ec2.endpoint_url,
        region_name=cloud.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def launch(cloud: LocalCloud, registration: NodeRegistration) -> str:
    """What the actuator does, reduced: a cluster-tagged instance with nodeadm user data."""
    ec2 = ec2_client(cloud)
    user_data = render_user_data(ClusterEndpoint(name=cloud.cluster_name), registration)
    reservation = ec2.run_instances(
        ImageId=cloud.ec2.image_ids["x86_64"],
        InstanceType="m5.xlarge",
        MinCount=1,
        MaxCount=1,
        SubnetId=cloud.ec2.subnet_ids["us-east-1c"],
        UserData=user_data,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "daiku.dev/cluster", "Value": cloud.cluster_name},
                    {"Key": f"kubernetes.io/cluster/{cloud.cluster_name}", "Value": "owned"},
                ],
            }
        ],
    )
    instance_id: str = reservation["Instances"][0]["InstanceId"]
    return instance_id


async def kubectl(cloud: LocalCloud, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cloud.kubeconfig_path)}
    process = await asyncio.create_subprocess_exec(
        "kubectl", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode()


async def test_pods_wait_for_nodes_then_run_on_a_launched_instance(
    cloud: LocalCloud, core: client.CoreV1Api
) -> None:
    """With no node, a Deployment's pods are Unschedulable; once an instance is launched they
    run on its Ready node; `kubectl scale` adds pods; terminating the instance removes the node."""
    await kubectl(cloud, "create", "deployment", "web", "--image=nginx", "--replicas=2")

    async def unschedulable() -> list[str] | None:
        pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
        messages = [
            c.message
            for p in pods
            for c in p.status.conditions or []
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        ]
        return messages if len(messages) == 2 else None

    assert await until(unschedulable) == ["no nodes available to schedule pods"] * 2

    registration = NodeRegistration(
        labels={"daiku.dev/nodepool": "default"},
        taints=(Taint("daiku.dev/unregistered", "", "NoExecute"),),
    )
    instance_id = await asyncio.to_thread(launch, cloud, registration)

    async def ready_node() -> Any:
        for item in (await core.list_node()).items:
            ready = [c.status for c in item.status.conditions if c.type == "Ready"]
            if item.spec.provider_id == f"aws:///us-east-1c/{instance_id}" and ready == ["True"]:
                return item
        return None

    node = await until(ready_node)
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert node.metadata.labels["topology.kubernetes.io/zone"] == "us-east-1c"
    assert node.metadata.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert node.metadata.labels["daiku.dev/nodepool"] == "default"
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        ("daiku.dev/unregistered", "NoExecute")
    ]
    # daiku's scheduler removes the registration taint once it adopts the node
    await core.patch_node(
        node.metadata.name,
        {"spec": {"taints": None}},
        **MERGE_PATCH,
    )

    async def running(count: int) -> bool:
        pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
        return len(pods) == count and all(
            p.status.phase == "Running" and p.spec.node_name == node.metadata.name for p in pods
        )

    await until(lambda: running(2))
    await kubectl(cloud, "scale", "deployment", "web", "--replicas=4")
    await until(lambda: running(4))
    wide = await kubectl(cloud, "get", "nodes", "-o", "wide")
    assert node.metadata.name in wide

    ec2_client(cloud).terminate_instances(InstanceIds=[instance_id])

    async def node_gone() -> bool:
        return not (await core.list_node()).items

    await until(node_gone)

    async def pending_again() -> bool:
        pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
        return len(pods) == 4 and all(not p.spec.node_name for p in pods)

    await until(pending_again)


async def test_python_m_localcloud_serves_kubectl(tmp_path: Path) -> None:
    """`python -m localcloud` prints its endpoints and `ready`, serves kubectl through the
    kubeconfig it wrote, and exits 0 on SIGTERM."""
    kubeconfig = tmp_path / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "localcloud",
        "--kubeconfig",
        str(kubeconfig),
        "--boot-seconds",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        while not any("ready" in line for line in lines):
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, f"exited before ready: {lines}"
            lines.append(line.decode())
        assert any(line.startswith("kube_url=https://127.0.0.1:") for line in lines)
        assert any(line.startswith("ec2_endpoint_url=http://127.0.0.1:") for line in lines)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        kubectl_process = await asyncio.create_subprocess_exec(
            "kubectl",
            "get",
            "nodes",
            "-o",
            "name",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(kubectl_process.communicate(), 30)
        assert kubectl_process.returncode == 0, stderr.decode()
        assert stdout == b""  # no instances yet, so no nodes
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        returncode = await asyncio.wait_for(process.wait(), 30)
    assert returncode == 0
