"""`daiku explain node` against localcloud's API server over HTTPS: the verdict for an empty
node past consolidateAfter, a young one, a PDB-held one and a node daiku did not launch."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from daiku_cli.explain import explain, render
from localcloud.kube.server import KubeApiServer
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.writer import parse_timestamp, utc_now

ROOT = Path(__file__).resolve().parents[2]
NODE = "ip-10-0-1-2.ec2.internal"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[KubeApiServer, KubeObjects, Path]]:
    server = KubeApiServer(host="127.0.0.1", port=0, tls=True)
    await server.start()
    try:
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
        for crd in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            await server.store.create("customresourcedefinitions", yaml.safe_load(crd.read_text()))
        await server.store.create(
            "ec2nodeclasses",
            yaml.safe_load((ROOT / "deploy/examples/demo/ec2nodeclass.yaml").read_text()),
        )
        pool = yaml.safe_load((ROOT / "deploy/examples/demo/nodepool.yaml").read_text())
        await server.store.create("nodepools", pool)
        async with await api_client_from_kubeconfig(path) as api:
            yield server, KubeObjects(api), path
    finally:
        await server.close()


async def add_node(
    server: KubeApiServer,
    name: str,
    *,
    daiku: bool = True,
    annotations: dict[str, str] | None = None,
    requirements: list[dict[str, Any]] | None = None,
) -> datetime:
    labels = {
        "node.kubernetes.io/instance-type": "t3a.large",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/arch": "amd64",
    }
    if daiku:
        labels["daiku.dev/nodepool"] = "default"
    allocatable = {"cpu": "1930m", "memory": "7Gi", "pods": "35"}
    await server.store.create(
        "nodes",
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name[:8]}"},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        },
    )
    if not daiku:
        return utc_now()
    claim: dict[str, Any] = {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-abcde",
            "labels": {"daiku.dev/nodepool": "default"},
            "annotations": {
                "daiku.dev/offerings": '[["t3a.large","us-east-1a","on-demand",0.0752]]',
                **(annotations or {}),
            },
        },
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": requirements or [],
            "resources": {"requests": {"cpu": "1"}},
        },
    }
    created = await server.store.create("nodeclaims", claim)
    now = utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")
    await server.store.patch(
        "nodeclaims",
        "default-abcde",
        {
            "status": {
                "nodeName": name,
                "providerID": f"aws:///us-east-1a/i-{name[:8]}",
                "conditions": [
                    {"type": t, "status": "True", "reason": t, "lastTransitionTime": now}
                    for t in ("Launched", "Registered", "Initialized")
                ],
            }
        },
        subresource="status",
    )
    born = parse_timestamp(created["metadata"]["creationTimestamp"])
    assert born is not None
    return born


async def add_pod(server: KubeApiServer, name: str, node: str) -> None:
    await server.store.create(
        "pods",
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web-1",
                        "uid": "u1",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "web", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}
                ],
            },
            "status": {"phase": "Running"},
        },
        "default",
    )


async def test_an_empty_node_past_consolidate_after_is_going_away(cluster: Any) -> None:
    """An empty daiku node 31 s after its creation (consolidateAfter 30s) is going away as
    Empty; at 5 s it stays, and the details name its NodePool, type and price."""
    server, objects, _ = cluster
    born = await add_node(server, NODE)
    later = await explain(objects, NODE, clock=lambda: born + timedelta(seconds=31))
    assert later.is_going_away
    assert later.verdict.startswith("going away: Empty: no pods for 31s")
    assert "NodePool default, t3a.large on-demand in us-east-1a, $0.0752/h" in later.details
    early = await explain(objects, NODE, clock=lambda: born + timedelta(seconds=5))
    assert not early.is_going_away
    assert early.verdict == "stays: no disruption method applies now"


async def test_a_pdb_allowing_no_disruption_holds_an_expired_node(cluster: Any) -> None:
    """A node past expireAfter whose pod is covered by a PDB allowing 0 disruptions stays,
    and the verdict names the PDB."""
    server, objects, _ = cluster
    born = await add_node(server, NODE)
    await add_pod(server, "web-1", NODE)
    await server.store.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0},
        },
        "default",
    )
    verdict = await explain(objects, NODE, clock=lambda: born + timedelta(hours=721))
    assert not verdict.is_going_away
    assert verdict.verdict.startswith("stays: DisruptionBlocked: ")
    assert "default/web" in verdict.verdict


async def test_the_command_prints_the_verdict_for_a_node_daiku_did_not_launch(
    cluster: Any,
) -> None:
    """`daiku explain node NAME --kubeconfig PATH` prints that a node daiku did not launch
    stays (exit status 0)."""
    server, _, path = cluster
    await add_node(server, "control-plane-1", daiku=False)
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "daiku"),
        "explain",
        "node",
        "control-plane-1",
        "--kubeconfig",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "control-plane-1: stays: not a node daiku launched"


async def test_the_details_say_how_the_claim_launched_beyond_its_class(cluster: Any) -> None:
    """A node whose claim grew its root volume and relaxed minValues says both."""
    server, objects, _ = cluster
    born = await add_node(
        server,
        NODE,
        annotations={
            "daiku.dev/root-volume-size": "68Gi",
            "daiku.dev/nodeclaim-min-values-relaxed": "true",
        },
        requirements=[
            {
                "key": "karpenter.k8s.aws/instance-family",
                "operator": "In",
                "values": ["m6g", "c6g"],
                "minValues": 1,
            }
        ],
    )
    explained = await explain(objects, NODE, clock=lambda: born + timedelta(seconds=5))
    assert explained.details[:2] == (
        "root volume 68Gi, grown for its pods' ephemeral-storage",
        "launched with minValues relaxed (--min-values-policy BestEffort):"
        " karpenter.k8s.aws/instance-family 1",
    )


def test_render_puts_the_verdict_first_and_indents_the_details() -> None:
    """The verdict is the first line; each detail follows, indented."""
    from scheduler_svc.core.disruption import NodeExplanation

    text = render(NodeExplanation("n1", True, "going away: x", ("a", "b")))
    assert text == "n1: going away: x\n  a\n  b"
