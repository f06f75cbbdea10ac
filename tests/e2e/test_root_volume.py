"""A root volume sized from its pods' ephemeral-storage on the stack: an EC2NodeClass whose root
mapping may grow (ebs.maxVolumeSize) launches a pod asking for 60Gi on a 68 GiB volume (the
smallest holding 60Gi after the kubelet's 10 % eviction threshold and 1 GiB reserved), passed
through CreateFleet's launch template; the emulated kubelet reports it; a pod asking for more
than the cap's allocatable stays pending, with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.provisioning.launch import ROOT_VOLUME_SIZE_ANNOTATION
from tests.e2e.conftest import Stack, pause_pod_spec, pods_running
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

GIB = 1024**3


async def create_pod(stack: Stack, name: str, ephemeral: str) -> None:
    spec = pause_pod_spec("500m", "512Mi")
    spec["containers"][0]["resources"]["requests"]["ephemeral-storage"] = ephemeral
    await stack.store.create(
        "pods", {"metadata": {"name": name, "namespace": "default"}, "spec": spec}, "default"
    )


async def test_the_root_volume_grows_to_hold_the_pods_ephemeral_storage(stack: Stack) -> None:
    await stack.apply_pool()
    await stack.store.patch(
        "ec2nodeclasses",
        "default",
        {
            "spec": {
                "blockDeviceMappings": [
                    {
                        "deviceName": "/dev/xvda",
                        "rootVolume": True,
                        "ebs": {"volumeSize": "20Gi", "maxVolumeSize": "200Gi"},
                    }
                ]
            }
        },
    )
    await stack.start_scheduler()
    await create_pod(stack, "scratch", "60Gi")
    await create_pod(stack, "too-big", "500Gi")

    async def running() -> bool:
        return any(map(pods_running(["scratch"]), await stack.objects("pods", "default")))

    await until(running)
    (claim,) = await stack.objects("nodeclaims")
    assert claim["metadata"]["annotations"][ROOT_VOLUME_SIZE_ANNOTATION] == "68Gi"
    assert claim["status"]["capacity"]["ephemeral-storage"] == "68Gi"
    # What EC2 launched: the root device's volume, from the launch template CreateFleet used.
    (instance,) = stack.running_instances()
    root = next(
        m for m in instance["BlockDeviceMappings"] if m["DeviceName"] == instance["RootDeviceName"]
    )
    (volume,) = stack.ec2_client().describe_volumes(VolumeIds=[root["Ebs"]["VolumeId"]])["Volumes"]
    assert volume["Size"] == 68
    (node,) = await stack.objects("nodes")
    assert node["status"]["capacity"]["ephemeral-storage"] == f"{68 * GIB // 1024}Ki"

    async def refused() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in await stack.objects("events", "default")
                if e.get("reason") == "FailedProvisioning"
                and e["involvedObject"].get("name") == "too-big"
            ),
            None,
        )

    event = await until(refused)
    assert "no instance type has 500 GiB ephemeral-storage allocatable" in event["message"]
    assert "EC2NodeClass default's root volume grows to at most 200Gi" in event["message"]
