"""Real kubectl, over HTTPS against localcloud's API server, applies daiku's CRDs and examples
and evaluates every printer column's JSONPath to the value users should see."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from localcloud.kube.server import KubeApiServer

from .crd_validation import load_crd

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    # TLS, because kubectl sends its bearer token only over HTTPS.
    async with KubeApiServer(tls=True) as api:
        yield api.write_kubeconfig(tmp_path / "kubeconfig")


async def _kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        f"--kubeconfig={kubeconfig}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, f"kubectl {' '.join(args)}: {stderr.decode()}"
    return stdout.decode()


def _columns(kind: str) -> str:
    """The CRD's printer columns as a kubectl custom-columns spec (Age excluded: it moves)."""
    (version,) = load_crd(kind)["spec"]["versions"]
    return ",".join(
        f"{c['name'].upper()}:{c['jsonPath']}"
        for c in version["additionalPrinterColumns"]
        if c["name"] != "Age"
    )


async def test_printer_columns_show_what_users_need(kubeconfig: Path) -> None:
    """`kubectl apply -f deploy/crds/ -f deploy/examples/` succeeds, and the printer columns of
    a ready NodeClaim read its type, capacity type, zone, node, Ready, ID, NodePool and class."""
    await _kubectl(kubeconfig, "apply", "-f", str(ROOT / "deploy/crds"))
    await _kubectl(kubeconfig, "apply", "-f", str(ROOT / "deploy/examples"))
    # The status subresource ignores status on create; daiku's controllers patch it.
    await _kubectl(
        kubeconfig,
        "patch",
        "nodeclaim",
        "default-x7k2p",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"nodeName": "ip-10-0-1-23", "providerID": "aws:///us-west-2a/i-0abc",'
        ' "conditions": [{"type": "Launched", "status": "True"},'
        ' {"type": "Ready", "status": "True"}]}}',
    )
    table = await _kubectl(
        kubeconfig, "get", "nodeclaims", "-o", f"custom-columns={_columns('NodeClaim')}"
    )
    header, row = table.splitlines()
    assert header.split() == [
        "TYPE",
        "CAPACITY",
        "ZONE",
        "NODE",
        "READY",
        "ID",
        "NODEPOOL",
        "NODECLASS",
    ]
    assert row.split() == [
        "m6g.large",
        "spot",
        "us-west-2a",
        "ip-10-0-1-23",
        "True",
        "aws:///us-west-2a/i-0abc",
        "default",
        "default",
    ]
    nodepools = await _kubectl(
        kubeconfig, "get", "nodepools", "-o", f"custom-columns={_columns('NodePool')}"
    )
    assert nodepools.splitlines()[1].split()[:2] == ["default", "<none>"]  # class, no nodes yet
