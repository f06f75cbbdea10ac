"""kubectl against daiku's capacity CRDs on localcloud: `kubectl scale nodepool` through the
CRD's scale subresource (spec.replicas / status.nodes), and the API server refusing what
Karpenter's CRDs refuse, with their messages."""

from __future__ import annotations

from pathlib import Path

import yaml

from localcloud.kube.server import KubeApiServer
from tests.localcloud.kube.conftest import Kubectl

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "capacity"


async def _apply_pools(kubectl: Kubectl, tmp_path: Path) -> None:
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    pools = [
        d
        for d in yaml.safe_load_all((EXAMPLES / "static-nodepool.yaml").read_text())
        if d["kind"] == "NodePool"
    ]
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump_all(pools))
    await kubectl("apply", "-f", str(path))


async def test_kubectl_scale_nodepool(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`kubectl scale nodepool/static --replicas=5` sets spec.replicas; the Scale reads
    status.nodes as its status."""
    await _apply_pools(kubectl, tmp_path)
    await kube.store.patch(
        "nodepools.daiku.dev", "static", {"status": {"nodes": 3}}, subresource="status"
    )
    await kubectl("scale", "nodepool/static", "--replicas=5")
    assert (await kube.store.get("nodepools.daiku.dev", "static"))["spec"]["replicas"] == 5
    scale = await kube.store.scale("nodepools.daiku.dev", "static")
    assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (5, 3)
    wide = (await kubectl("get", "nodepool", "static", "-o", "wide")).stdout
    assert "REPLICAS" in wide.splitlines()[0]


async def test_static_and_dynamic_nodepools_do_not_trade_places(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Karpenter's rules: replicas cannot be added to a dynamic pool (kubectl scale included)
    nor removed from a static one; a static pool takes no cpu limit and no weight."""
    await _apply_pools(kubectl, tmp_path)
    refused = await kubectl("scale", "nodepool/default", "--replicas=2", check=False)
    assert refused.returncode != 0
    assert "Cannot transition NodePool between static" in refused.stderr
    removed = await kubectl(
        "patch", "nodepool", "static", "--type=json", "-p",
        '[{"op":"remove","path":"/spec/replicas"}]', check=False,
    )  # fmt: skip
    assert "Cannot transition NodePool between static" in removed.stderr
    cpu = await kubectl(
        "patch", "nodepool", "static", "--type=merge", "-p", '{"spec":{"limits":{"cpu":"8"}}}',
        check=False,
    )  # fmt: skip
    assert "only 'limits.nodes' is supported on static NodePools" in cpu.stderr
    weight = await kubectl(
        "patch", "nodepool", "static", "--type=merge", "-p", '{"spec":{"weight":5}}', check=False
    )
    assert "'weight' is not supported on static NodePools" in weight.stderr


async def test_nodeoverlay_columns_and_refusals(
    kube: KubeApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`kubectl get nodeoverlays` shows weight, price and ready columns; an overlay with both price
    and priceAdjustment is refused with Karpenter's message."""
    await kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    overlays = [
        d
        for d in yaml.safe_load_all((EXAMPLES / "nodeoverlay.yaml").read_text())
        if d["kind"] == "NodeOverlay"
    ]
    path = tmp_path / "overlays.yaml"
    path.write_text(yaml.safe_dump_all(overlays))
    await kubectl("apply", "-f", str(path))
    table = (await kubectl("get", "nodeoverlays")).stdout.splitlines()
    assert table[0].split()[:6] == ["NAME", "WEIGHT", "PRICE", "ADJUSTMENT", "READY", "AGE"]
    assert any(line.startswith("savings-plan-m5") and "-30%" in line for line in table)
    both = {**overlays[0], "metadata": {"name": "both"}}
    both["spec"] = {**both["spec"], "price": "0.05"}
    path.write_text(yaml.safe_dump(both))
    refused = await kubectl("apply", "-f", str(path), check=False)
    assert refused.returncode != 0
    assert "cannot set both 'price' and 'priceAdjustment'" in refused.stderr
