"""The replacement controller's pacing: kubelet heartbeats do not wake it, a condition's status
change does; with node repair off and no NodePool replacing on rebalance recommendations a pass
builds nothing."""

from __future__ import annotations

from typing import Any

from scheduler_svc.core.model import InstanceType
from scheduler_svc.disruption.replacement import ReplacementController, ReplacementSettings
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.resources import NODE_POOLS, NODES, KubeObject
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import Change, ClusterMirror


def node(ready: str, heartbeat: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "resourceVersion": heartbeat},
        "status": {
            "conditions": [
                {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat},
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat},
            ]
        },
    }


async def _no_cordon(_: KubeObject) -> bool:
    return False


def controller(mirror: ClusterMirror, **settings: Any) -> tuple[ReplacementController, list[int]]:
    calls: list[int] = []

    async def instance_types() -> tuple[InstanceType, ...]:
        calls.append(1)
        return ()

    return (
        ReplacementController(
            mirror=mirror,
            writer=None,  # type: ignore[arg-type]  # no pass here writes
            metrics=SchedulerMetrics(),
            cordon=_no_cordon,
            instance_types=instance_types,
            settings=ReplacementSettings(**settings),
        ),
        calls,
    )


def test_heartbeats_do_not_wake_it_a_status_change_does() -> None:
    replacer, _ = controller(ClusterMirror())
    wake = replacer._wake
    replacer.on_change(Change(NODES, "MODIFIED", "n1", node("True", "1"), node("True", "2")))
    assert not wake.is_set()
    replacer.on_change(Change(NODES, "MODIFIED", "n1", node("True", "2"), node("Unknown", "3")))
    assert wake.is_set()
    wake.clear()
    replacer.on_change(Change(NODES, "ADDED", "n2", None, node("True", "1")))
    assert wake.is_set()


async def test_a_pass_with_nothing_to_decide_builds_no_snapshot() -> None:
    mirror = ClusterMirror()
    pool: dict[str, Any] = {
        "metadata": {"name": "default", "resourceVersion": "1"},
        "spec": {"template": {}},
    }
    mirror.handle(ObjectEvent(NODE_POOLS, "ADDED", pool))
    replacer, calls = controller(mirror)
    assert await replacer.replace_once() == []
    assert calls == []  # the catalog was not even asked
    replace: dict[str, Any] = {
        **pool,
        "spec": {"template": {}, "disruption": {"rebalanceRecommendationPolicy": "Replace"}},
    }
    mirror.handle(ObjectEvent(NODE_POOLS, "MODIFIED", replace))
    assert await replacer.replace_once() == []
    assert calls == [1]
    repairing, calls = controller(ClusterMirror(), node_repair=True)
    assert await repairing.replace_once() == []
    assert calls == [1]
