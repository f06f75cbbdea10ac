"""Seed 000 (scale 20 -> 10 -> 5 -> 0) as a pure timeline: expiry at 1800 s replaces nodes
with right-sized ones, empty nodes go 30 s after their last pod, at 0 replicas all go."""

from __future__ import annotations

import dataclasses

from scheduler_svc.core import Node, Resources
from scheduler_svc.core.disruption import (
    Candidate,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionReason,
    DisruptionSnapshot,
    plan_disruption,
)
from tests.scheduler_svc.core.builders import MIB
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

SEED_POOL = pool(
    consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
    consolidate_after_seconds=30.0,
    expire_after_seconds=1800.0,
)
DAEMON = CandidatePod(app_pod("aws-node", 25, 0), owner_kind="DaemonSet")
# The managed node group's m5.large: karpenter, coredns … and one app pod leave no room.
SYSTEM_NODE = Node(
    "ip-192-168-88-26",
    labels={"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.large"},
    allocatable=Resources(1930, 6903 * MIB, 29),
    pods=(app_pod("system", 1425, 1214), app_pod("app-first")),
)


def seed_snapshot(*nodes: Candidate) -> DisruptionSnapshot:
    return snapshot(nodes, [SEED_POOL], other_nodes=(SYSTEM_NODE,))


def test_seed_000_timeline() -> None:
    """Expiry moves node1's pods to node2, node2 expires into a c4.xlarge, and at 0 replicas
    the last node goes 30 s after its last pod."""
    # 20 replicas -> 10: node1 (c4.xlarge, created at 0) keeps 7, node2 (t3a.2xlarge, 600) 2.
    node1 = candidate("node1", "c4.xlarge", (DAEMON, *pods("a", 7)), created=0, last_event=60)
    node2 = candidate("node2", "t3a.2xlarge", (DAEMON, *pods("b", 2)), created=600, last_event=700)
    assert plan_disruption(seed_snapshot(node1, node2), at(1799)).decisions == ()

    expired = plan_disruption(seed_snapshot(node1, node2), at(1800))
    assert [(d.reason, d.nodes, d.replacements) for d in expired.decisions] == [
        (DisruptionReason.EXPIRED, ("node1",), ())
    ]

    # node1's 7 pods moved to node2 at 1810; scale 10 -> 5 at 1900 leaves 4 there.
    node2 = dataclasses.replace(node2, pods=(DAEMON, *pods("b", 4)), last_pod_event_at=at(1900))
    assert plan_disruption(seed_snapshot(node2), at(2399)).decisions == ()
    replaced = plan_disruption(seed_snapshot(node2), at(2400))
    (decision,) = replaced.decisions
    assert decision.reason is DisruptionReason.EXPIRED
    assert decision.nodes == ("node2",)
    assert [c.instance_type for c in decision.replacements] == ["c4.xlarge"]
    assert decision.new_price_per_hour < decision.old_price_per_hour

    # node3 (c4.xlarge) took the 4 pods at 2500; 0 replicas at 3000: only the DaemonSet pod.
    node3 = candidate("node3", "c4.xlarge", (DAEMON,), created=2450, last_event=3000)
    assert plan_disruption(seed_snapshot(node3), at(3029)).decisions == ()
    gone = plan_disruption(seed_snapshot(node3), at(3030))
    assert [(d.reason, d.nodes) for d in gone.decisions] == [(DisruptionReason.EMPTY, ("node3",))]


def test_at_zero_replicas_every_node_goes_within_the_default_budget() -> None:
    """Two empty nodes at 0 replicas both go 30 s after their last pod, one per pass as the
    default budget (10 % of 2, rounded up: 1) allows."""
    nodes = [
        candidate(f"node{i}", "c4.xlarge", (DAEMON,), created=0, last_event=3000) for i in (3, 4)
    ]
    first = plan_disruption(seed_snapshot(*nodes), at(3030))
    assert [(d.reason, d.nodes) for d in first.decisions] == [(DisruptionReason.EMPTY, ("node3",))]
    assert first.blocked[0].message.startswith("budget nodes: 10% of NodePool default allows 0")
    # node3 is being terminated, then gone.
    draining = snapshot(
        nodes, [SEED_POOL], other_nodes=(SYSTEM_NODE,), disrupting=frozenset({"node3"})
    )
    assert plan_disruption(draining, at(3035)).decisions == ()
    second = plan_disruption(seed_snapshot(nodes[1]), at(3040))
    assert [(d.reason, d.nodes) for d in second.decisions] == [(DisruptionReason.EMPTY, ("node4",))]
