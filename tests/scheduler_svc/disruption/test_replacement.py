"""The replacement controller's pacing: kubelet heartbeats do not wake it, a condition's status
change does; with node repair off and no NodePool replacing on rebalance recommendations a pass
builds nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import generate_latest

from scheduler_svc.core.disruption import DisruptionDecision, DisruptionReason
from scheduler_svc.core.model import InstanceType
from scheduler_svc.disruption.replacement import ReplacementController, ReplacementSettings
from scheduler_svc.kube.events import ObjectEvent
from scheduler_svc.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, KubeObject
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


class RecordingWriter:
    """The writer calls a replacement makes, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def event(self, obj: KubeObject, reason: str, message: str, **_: Any) -> None:
        self.calls.append(("event", reason))

    async def patch_nodeclaim(self, name: str, patch: Any) -> KubeObject:
        self.calls.append(("patch", name))
        return {}

    async def delete_nodeclaim(self, name: str) -> None:
        self.calls.append(("delete", name))


async def test_a_node_taken_meanwhile_is_not_deleted_again() -> None:
    """An interruption warning deleted the claim while its replacement booted: the replacement
    records `superseded` and neither stamps nor deletes the claim."""
    mirror = ClusterMirror()
    claim = {
        "metadata": {
            "name": "c1",
            "resourceVersion": "1",
            "deletionTimestamp": "2026-01-05T09:00:00Z",
        },
        "status": {"nodeName": "n1"},
    }
    mirror.handle(ObjectEvent(NODE_CLAIMS, "ADDED", claim))
    writer = RecordingWriter()
    metrics = SchedulerMetrics()
    replacer = ReplacementController(
        mirror=mirror,
        writer=writer,  # type: ignore[arg-type]
        metrics=metrics,
        cordon=_no_cordon,
    )
    decision = DisruptionDecision(
        reason=DisruptionReason.UNHEALTHY,
        nodes=("n1",),
        nodeclaims=("c1",),
        replacements=(),
        message="Unhealthy: Ready Unknown for 30m (toleration 30m); no pods to move",
        decided_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
        old_price_per_hour=0.1,
        new_price_per_hour=0.0,
    )
    await replacer._replace(decision, ("Ready", "default"))
    assert ("delete", "c1") not in writer.calls
    assert ("patch", "c1") not in writer.calls
    text = generate_latest(metrics.registry).decode()
    assert 'outcome="superseded",reason="Unhealthy"} 1.0' in text
    assert 'nodeclaims_unhealthy_disrupted_total{condition="Ready"' not in text
