"""Where the kubelets learn which instances run: EC2 over HTTP, or the emulator in process.

Both give the cluster's instances that are not terminated (pending, running, shutting-down,
stopping, stopped) as `ClusterInstance`s, and an instance's user data as text.

Each carries whether its EC2 status checks fail (`impaired`: DescribeInstanceStatus over HTTP,
the emulator's flag in process).

- `HttpInstances`: DescribeInstances (filtered by `daiku.dev/cluster=<cluster>` and, in a second
  call, by the `kubernetes.io/cluster/<cluster>` tag key) and DescribeInstanceAttribute(userData)
  over aiobotocore — exactly what a client of the emulator (or of AWS) sees. The emulator
  answers a thousand instances in about 10 ms, but the client parses ~3.5 KB of XML per
  instance (about half a second per poll at that size).
- `EmulatorInstances`: reads the running emulator's moto backend directly (about 5 ms for a
  thousand instances); `LocalCloud` uses it, since its emulator runs in the same process.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol, Self

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session

from localcloud.ec2 import Ec2Emulator, impairment

CLUSTER_TAG: Final = "daiku.dev/cluster"
GIB: Final = 1024**3
NOT_TERMINATED: Final = ("pending", "running", "shutting-down", "stopping", "stopped")


@dataclass(frozen=True, slots=True)
class ClusterInstance:
    instance_id: str
    instance_type: str
    zone: str
    state: str
    private_dns_name: str
    private_ip: str
    spot: bool
    impaired: bool = False  # its status checks fail (DescribeInstanceStatus `impaired`)


class InstanceSource(Protocol):
    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

    async def instances(self) -> dict[str, ClusterInstance]:
        """The cluster's instances that are not terminated, by id."""
        ...

    async def user_data(self, instance_id: str) -> str:
        """The instance's user data, decoded ('' when it has none)."""
        ...

    async def root_volume_bytes(self, instance_id: str) -> int:
        """The size of the volume at the instance's root device (0: none mapped there, the
        AMI's default then), which the kubelet reports as ephemeral-storage."""
        ...


def _decode(encoded: str) -> str:
    if not encoded:
        return ""
    try:
        return base64.b64decode(encoded).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return ""


@functools.cache
def _session() -> AioSession:
    """One session per process: each new one reloads EC2's service model (about a second)."""
    return get_session()


class HttpInstances:
    """The cluster's instances through the EC2 API at `endpoint_url`."""

    def __init__(self, endpoint_url: str, *, region: str, cluster_name: str) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.cluster_name = cluster_name
        self._stack = AsyncExitStack()
        self._ec2: Any = None

    async def __aenter__(self) -> Self:
        self._ec2 = await self._stack.enter_async_context(
            _session().create_client(
                "ec2",
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                aws_access_key_id="localcloud",
                aws_secret_access_key="localcloud",  # noqa: S106 - the emulator takes any key
                config=AioConfig(retries={"total_max_attempts": 2}, max_pool_connections=4),
            )
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def instances(self) -> dict[str, ClusterInstance]:
        found: dict[str, ClusterInstance] = {}
        states = {"Name": "instance-state-name", "Values": list(NOT_TERMINATED)}
        for selector in (
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster_name]},
            {"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{self.cluster_name}"]},
        ):
            paginator = self._ec2.get_paginator("describe_instances")
            async for page in paginator.paginate(Filters=[selector, states]):
                for reservation in page.get("Reservations", []):
                    for instance in reservation.get("Instances", []):
                        found[instance["InstanceId"]] = ClusterInstance(
                            instance_id=instance["InstanceId"],
                            instance_type=instance["InstanceType"],
                            zone=instance.get("Placement", {}).get("AvailabilityZone", ""),
                            state=instance.get("State", {}).get("Name", ""),
                            private_dns_name=instance.get("PrivateDnsName", ""),
                            private_ip=instance.get("PrivateIpAddress", ""),
                            spot=instance.get("InstanceLifecycle") == "spot",
                        )
        impaired = await self._impaired()
        return {
            i: dataclasses.replace(c, impaired=True) if i in impaired else c
            for i, c in found.items()
        }

    async def _impaired(self) -> set[str]:
        """Ids of running instances whose instance or system status check is impaired."""
        ids: set[str] = set()
        paginator = self._ec2.get_paginator("describe_instance_status")
        async for page in paginator.paginate():
            for status in page.get("InstanceStatuses", []):
                checks = (status.get("InstanceStatus") or {}, status.get("SystemStatus") or {})
                if any(c.get("Status") == "impaired" for c in checks):
                    ids.add(status["InstanceId"])
        return ids

    async def user_data(self, instance_id: str) -> str:
        answer = await self._ec2.describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData"
        )
        return _decode((answer.get("UserData") or {}).get("Value") or "")

    async def root_volume_bytes(self, instance_id: str) -> int:
        answer = await self._ec2.describe_instances(InstanceIds=[instance_id])
        instance: dict[str, Any] = next(
            (i for r in answer.get("Reservations", []) for i in r.get("Instances", [])), {}
        )
        root = instance.get("RootDeviceName")
        volume_id = next(
            (
                (m.get("Ebs") or {}).get("VolumeId")
                for m in instance.get("BlockDeviceMappings") or []
                if m.get("DeviceName") == root
            ),
            None,
        )
        if not volume_id:
            return 0
        volumes = await self._ec2.describe_volumes(VolumeIds=[volume_id])
        return int(volumes["Volumes"][0]["Size"]) * GIB


class EmulatorInstances:
    """The cluster's instances read from the in-process emulator's moto backend."""

    def __init__(self, emulator: Ec2Emulator, *, cluster_name: str) -> None:
        self.emulator = emulator
        self.cluster_name = cluster_name

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def _backend(self) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.emulator.account_id][self.emulator.region]

    async def instances(self) -> dict[str, ClusterInstance]:
        found: dict[str, ClusterInstance] = {}
        cluster_key = f"kubernetes.io/cluster/{self.cluster_name}"
        backend = self._backend()
        # moto's tag dictionary (resource id -> tags) read directly: this runs every poll on the
        # API server's event loop. .get: it is a defaultdict, a read must not add entries.
        tags_by_id = backend.tags
        # the emulator's request threads may launch meanwhile: read from copies
        for reservation in list(backend.reservations.values()):
            for instance in list(reservation.instances):
                if instance.state not in NOT_TERMINATED:
                    continue
                tags = tags_by_id.get(instance.id) or {}
                if tags.get(CLUSTER_TAG) != self.cluster_name and cluster_key not in tags:
                    continue
                found[instance.id] = ClusterInstance(
                    instance_id=str(instance.id),
                    instance_type=str(instance.instance_type),
                    zone=str(instance.availability_zone or ""),
                    state=str(instance.state),
                    private_dns_name=str(instance.private_dns_name or ""),
                    private_ip=str(instance.private_ip or ""),
                    spot=instance.lifecycle == "spot",
                    impaired=impairment.is_impaired(instance),
                )
        return found

    async def user_data(self, instance_id: str) -> str:
        for reservation in list(self._backend().reservations.values()):
            for instance in list(reservation.instances):
                if instance.id == instance_id:
                    return _decode(str(instance.user_data or ""))
        return ""

    async def root_volume_bytes(self, instance_id: str) -> int:
        for reservation in list(self._backend().reservations.values()):
            for instance in list(reservation.instances):
                if instance.id == instance_id:
                    mapping: Any = instance.block_device_mapping
                    root = mapping.get(instance.root_device_name)
                    return int(root.size) * GIB if root is not None and root.size else 0
        return 0
