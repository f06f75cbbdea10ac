"""Static NodePools in the disruption pass: never consolidated (an empty static node stays),
but expired ones are replaced within budgets, their pods moving to dynamic pools only (the
static controller refills the pool itself)."""

from __future__ import annotations

from scheduler_svc.core import NodePool, Operator, Requirement
from scheduler_svc.core.disruption import (
    CandidatePod,
    DisruptionSettings,
    DisruptionSnapshot,
    NodePoolState,
    plan_disruption,
)
from tests.scheduler_svc.core.disruption.builders import app_pod, at, candidate, snapshot


def _static_state(*members: CandidatePod, expire: float | None = None) -> DisruptionSnapshot:
    settings = DisruptionSettings.from_spec(
        "always",
        {"replicas": 1, "template": {"spec": {"expireAfter": "1h" if expire else "Never"}}},
    )
    static = NodePoolState(NodePool("always", replicas=1), settings)
    # The static pool ("always") comes first by name and allows a cheaper type: only leaving
    # static pools out sends the replacement to the dynamic pool.
    pricier = Requirement("node.kubernetes.io/instance-type", Operator.IN, ("c4.2xlarge",))
    dynamic = NodePoolState(
        NodePool("default", requirements=(pricier,)), DisruptionSettings(budgets=())
    )
    node = candidate("s1", "c4.xlarge", members, created=0, nodepool="always")
    return snapshot([node], [static, dynamic])


def test_an_empty_static_node_is_never_consolidated() -> None:
    plan = plan_disruption(_static_state(), at(86_400))
    assert plan.decisions == ()


def test_an_expired_static_node_moves_its_pods_to_dynamic_pools_only() -> None:
    plan = plan_disruption(
        _static_state(CandidatePod(app_pod("web-0")), expire=3600),
        at(3600),
    )
    (decision,) = plan.decisions
    assert decision.reason.value == "Expired"
    assert decision.nodes == ("s1",)
    assert [(c.nodepool, c.instance_type) for c in decision.replacements] == [
        ("default", "c4.2xlarge")
    ]
