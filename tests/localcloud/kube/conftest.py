"""Fixtures: a KubeApiServer on loopback (TLS, so kubectl sends its token), its kubeconfig,
a kubernetes_asyncio client and a kubectl runner."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from localcloud.kube.server import KubeApiServer


@dataclass(frozen=True)
class KubectlResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path
    home: Path

    async def __call__(
        self, *args: str, timeout_seconds: float = 30, check: bool = True
    ) -> KubectlResult:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}
        process = await asyncio.create_subprocess_exec(
            "kubectl",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_seconds)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        result = KubectlResult(process.returncode or 0, stdout.decode(), stderr.decode())
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result


@pytest.fixture(autouse=True)
async def no_leftover_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running behind it (a watch, a server handler)."""
    before = asyncio.all_tasks()
    yield
    leftover = {t for t in asyncio.all_tasks() - before if not t.done()}
    leftover.discard(asyncio.current_task())
    assert not leftover, f"tasks left running: {leftover}"


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(tls=True, bookmark_interval_seconds=0.2, event_window=50) as api:
        api.write_kubeconfig(tmp_path / "kubeconfig")
        yield api


@pytest.fixture
async def k8s(kube: KubeApiServer, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(tmp_path / "kubeconfig"), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
def kubectl(kube: KubeApiServer, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(tmp_path / "kubeconfig", home)
