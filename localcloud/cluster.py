"""`LocalCloud`: the EC2 emulator, the Kubernetes API server and its control plane, together.

    async with LocalCloud(boot_seconds=0) as cloud:
        cloud.kubeconfig_path      # kubectl / kubernetes_asyncio use it unchanged
        cloud.kube                 # KubeApiServer (.url, .token, .store)
        cloud.ec2                  # Ec2Emulator (.endpoint_url, capacity and fault controls)

Instances launched in the emulator for `cluster_name` become Nodes (Ready after
`boot_seconds`), pending pods are scheduled, Deployments and DaemonSets get their pods. Each
behaviour can be switched off (`scheduler=False`, `kubelets=False`, `controllers=False`).
The kubelets read the emulator's instances in process (the same state its HTTP API serves,
without parsing a thousand instances' XML every poll). The kubeconfig goes to
`kubeconfig_path`, or to a temporary file removed on exit. moto keeps
EC2 state per process, so one LocalCloud runs per process at a time.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

import structlog

from localcloud.ec2 import Ec2Emulator
from localcloud.kube.controllers import ControlPlane, ControlPlaneSettings
from localcloud.kube.server import KubeApiServer

log = structlog.get_logger("localcloud.cluster")


class LocalCloud:
    """A local cloud with a Kubernetes cluster in it; see the module docstring."""

    def __init__(
        self,
        *,
        kube_port: int = 0,
        ec2_port: int = 0,
        boot_seconds: float = 5.0,
        cluster_name: str = "daiku",
        region: str = "us-east-1",
        kubeconfig_path: str | Path | None = None,
        scheduler: bool = True,
        kubelets: bool = True,
        controllers: bool = True,
        host: str = "127.0.0.1",
        tls: bool = True,
        ec2_poll_seconds: float = 0.5,
    ) -> None:
        self.cluster_name = cluster_name
        self.region = region
        self.kube = KubeApiServer(host=host, port=kube_port, tls=tls)
        self.ec2 = Ec2Emulator(host=host, port=ec2_port, region=region, cluster_name=cluster_name)
        self.settings = ControlPlaneSettings(
            scheduler=scheduler,
            kubelets=kubelets,
            controllers=controllers,
            boot_seconds=boot_seconds,
            ec2_poll_seconds=ec2_poll_seconds,
        )
        self._requested_kubeconfig = Path(kubeconfig_path) if kubeconfig_path else None
        self._temporary: Path | None = None
        self.kubeconfig_path: Path = self._requested_kubeconfig or Path()
        self.control_plane: ControlPlane | None = None

    async def start(self) -> None:
        await asyncio.to_thread(self.ec2.start)
        try:
            await self.kube.start()
            if self._requested_kubeconfig is None:
                self._temporary = Path(tempfile.mkdtemp(prefix="localcloud-"))
                self.kubeconfig_path = self._temporary / "kubeconfig"
            self.kube.write_kubeconfig(self.kubeconfig_path)
            self.control_plane = ControlPlane(
                self.kube.store,
                emulator=self.ec2,
                region=self.region,
                cluster_name=self.cluster_name,
                settings=self.settings,
            )
            await self.control_plane.start()
        except BaseException:
            await self.close()
            raise
        log.info(
            "localcloud_started",
            kube_url=self.kube.url,
            ec2_endpoint_url=self.ec2.endpoint_url,
            kubeconfig=str(self.kubeconfig_path),
            cluster_name=self.cluster_name,
        )

    async def close(self) -> None:
        if self.control_plane is not None:
            await self.control_plane.close()
            self.control_plane = None
        await self.kube.close()
        await asyncio.to_thread(self.ec2.stop)
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
