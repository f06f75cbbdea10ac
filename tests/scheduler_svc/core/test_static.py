"""Static NodePools: exactly `replicas` claims, at most `limits.nodes` in all, the least
disruptive claims removed first, the cheapest allowed offering launched; never a target for
pending pods' claims, never consolidated."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.core import NodePool, NodePoolLimits, Operator, Requirement
from scheduler_svc.core.disruption.settings import DisruptionSettings
from scheduler_svc.core.static import StaticClaim, reconcile_static, static_claim_plan
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import nodepool_from_k8s

from .builders import instance_type

STATIC = NodePool("static", replicas=3)


def claims(*names: str, **fields: Any) -> list[StaticClaim]:
    return [StaticClaim(n, **fields) for n in names]


def test_missing_claims_are_created() -> None:
    assert reconcile_static(STATIC, claims("a")).create == 2
    assert reconcile_static(STATIC, claims("a", "b", "c")).create == 0


def test_limits_nodes_caps_creation_counting_claims_being_deleted() -> None:
    """limits.nodes=4 with 1 active and 2 deleting claims leaves room for 1 of the 2 missing."""
    pool = NodePool("static", replicas=3, limits=NodePoolLimits(nodes=4))
    decision = reconcile_static(pool, claims("a"), deleting=2)
    assert decision.create == 1
    assert decision.limited is not None
    assert "limits.nodes=4" in decision.limited


def test_scale_down_removes_the_least_disruptive_claims() -> None:
    """Not initialized first, then the fewest pods, then the newest."""
    active = [
        StaticClaim("busy", pods=5, created="2026-01-01T00:00:00Z"),
        StaticClaim("idle-old", pods=0, created="2026-01-01T00:00:00Z"),
        StaticClaim("idle-new", pods=0, created="2026-01-02T00:00:00Z"),
        StaticClaim("booting", pods=0, initialized=False, created="2026-01-01T00:00:00Z"),
    ]
    assert reconcile_static(NodePool("s", replicas=2), active).delete == ("booting", "idle-new")
    assert reconcile_static(NodePool("s", replicas=0), active).delete == (
        "booting",
        "idle-new",
        "idle-old",
        "busy",
    )


def test_a_dynamic_pool_is_left_alone() -> None:
    assert reconcile_static(NodePool("dynamic"), claims("a")).create == 0


def test_a_static_claim_launches_the_cheapest_allowed_offering() -> None:
    types = [
        instance_type("c5.large", 2, 4, 0.085, spot_price=0.03),
        instance_type("m5.large", 2, 8, 0.096, spot_price=0.04),
    ]
    on_demand_m5 = NodePool(
        "static",
        requirements=(
            Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.large",)),
            Requirement("karpenter.sh/capacity-type", Operator.IN, ("on-demand",)),
        ),
        replicas=2,
    )
    plan = static_claim_plan(on_demand_m5, types)
    assert plan is not None
    assert {(o.instance_type, o.capacity_type) for o in plan.offerings} == {
        ("m5.large", "on-demand")
    }
    assert plan.pods == ()
    anything = static_claim_plan(NodePool("static", replicas=1), types)
    assert anything is not None
    assert (anything.instance_type, anything.offerings[0].capacity_type) == ("c5.large", "spot")


def test_static_pools_are_never_consolidated() -> None:
    """Karpenter ignores a static pool's consolidation fields: consolidateAfter is Never."""
    settings = DisruptionSettings.from_spec("static", {"replicas": 2, "template": {}})
    assert settings.consolidate_after_seconds is None


def _nodepool(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "static"},
        "spec": {
            "template": {"spec": {"nodeClassRef": {"name": "default"}, "requirements": []}},
            **spec,
        },
    }


def test_the_converter_reads_replicas() -> None:
    pool = nodepool_from_k8s(_nodepool(replicas=3, limits={"nodes": 4}))
    assert (pool.replicas, pool.is_static, pool.limits.nodes) == (3, True, 4)
    assert nodepool_from_k8s(_nodepool()).is_static is False


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"replicas": 2, "limits": {"cpu": "10"}}, "spec.limits.cpu", "only 'limits.nodes'"),
        ({"replicas": 2, "weight": 10}, "spec.weight", "'weight' is not supported"),
        ({"replicas": -1}, "spec.replicas", "at least 0"),
    ],
)
def test_the_converter_refuses_what_karpenter_refuses(
    spec: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidObjectError) as caught:
        nodepool_from_k8s(_nodepool(**spec))
    assert caught.value.field == field
    assert reason in caught.value.reason
