"""One NodeClaim creator (issue 12, decision 0013): provisioning, static NodePools, disruption's
replacements (drift, consolidation, repair, rebalance) and the lifecycle's relaunch all go
through `provisioning/creator.py`'s `NodeClaimCreator`; nothing else writes or launches a
NodeClaim. Checked on the source, so a second writer fails here when it is written."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scheduler_svc"


def calls(source: str, method: str) -> list[int]:
    """Lines calling `<anything>.<method>(...)`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    ]


def creates_nodeclaims(source: str) -> list[int]:
    """Lines calling `<anything>.create(NODE_CLAIMS, ...)` (a POST of a NodeClaim)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "create"
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "NODE_CLAIMS"
    ]


def callers(method: str) -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if calls(path.read_text(encoding="utf-8"), method)
    }


def test_the_checks_see_a_write_and_a_launch() -> None:
    """The scans find what they look for (so the tests below can fail)."""
    assert creates_nodeclaims("async def f(o):\n    await o.create(NODE_CLAIMS, {})\n") == [2]
    assert creates_nodeclaims("async def f(o):\n    await o.create(LEASES, {})\n") == []
    assert calls("async def f(w):\n    await w.create_nodeclaim({})\n", "create_nodeclaim") == [2]


def test_only_the_writer_posts_a_nodeclaim() -> None:
    """The NodeClaim POST lives in `KubeWriter.create_nodeclaim` alone."""
    found = {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if creates_nodeclaims(path.read_text(encoding="utf-8"))
    }
    assert found == {"scheduler_svc/kube/writer.py"}


def test_only_the_creator_writes_and_launches_nodeclaims() -> None:
    """`create_nodeclaim` (the write) and `ClaimLauncher.launch` are called by the creator
    only; the creator's own callers are the provisioner, static NodePools, disruption's
    replacements and the lifecycle's relaunch."""
    assert callers("create_nodeclaim") == {"scheduler_svc/provisioning/creator.py"}
    assert callers("launch") == {"scheduler_svc/provisioning/creator.py"}
    assert callers("relaunch") == {"scheduler_svc/lifecycle/controller.py"}
    assert {
        path
        for path in callers("create")
        if "_creator.create(" in (ROOT / path).read_text(encoding="utf-8")
    } == {
        "scheduler_svc/provisioning/provisioner.py",
        "scheduler_svc/provisioning/static.py",
        "scheduler_svc/disruption/controller.py",
        "scheduler_svc/disruption/replacement.py",
    }
