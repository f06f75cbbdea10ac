"""Real kubectl against localcloud's API server: an EC2NodeClass whose root volume grows
(ebs.maxVolumeSize) is applied; one with the cap off the root mapping or without volumeSize is
refused with the CRD's message."""

from __future__ import annotations

import asyncio
import copy
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcloud.kube.server import KubeApiServer

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
EXAMPLE = ROOT / "examples/launch-options/root-volume.yaml"


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    async with KubeApiServer(tls=True) as api:
        yield api.write_kubeconfig(tmp_path / "kubeconfig")


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        f"--kubeconfig={kubeconfig}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    return process.returncode or 0, (stdout + stderr).decode()


def node_class() -> dict[str, Any]:
    document: dict[str, Any] = next(yaml.safe_load_all(EXAMPLE.read_text()))
    return copy.deepcopy(document)


async def apply(kubeconfig: Path, tmp_path: Path, obj: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "nodeclass.yaml"
    path.write_text(yaml.safe_dump(obj))
    return await kubectl(kubeconfig, "apply", "-f", str(path))


async def test_kubectl_applies_a_growing_root_volume_and_refuses_misplaced_caps(
    kubeconfig: Path, tmp_path: Path
) -> None:
    code, out = await kubectl(kubeconfig, "apply", "-f", str(ROOT / "deploy/crds"))
    assert code == 0, out
    code, out = await apply(kubeconfig, tmp_path, node_class())
    assert code == 0, out

    off_root = node_class()
    off_root["metadata"]["name"] = "off-root"
    off_root["spec"]["blockDeviceMappings"].append(
        {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "10Gi", "maxVolumeSize": "20Gi"}}
    )
    code, out = await apply(kubeconfig, tmp_path, off_root)
    assert code != 0
    assert "maxVolumeSize is allowed only on the blockDeviceMappings entry with rootVolume" in out

    no_base = node_class()
    no_base["metadata"]["name"] = "no-base"
    ebs = no_base["spec"]["blockDeviceMappings"][0]["ebs"]
    del ebs["volumeSize"]
    ebs["snapshotID"] = "snap-0abc"
    code, out = await apply(kubeconfig, tmp_path, no_base)
    assert code != 0
    assert "maxVolumeSize needs volumeSize, the size the root volume grows from" in out
