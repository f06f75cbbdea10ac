"""Balanced consolidation (Karpenter v1.14): a move is made only when its saving, as a fraction
of the NodePool's price, is at least 1/k of its disruption as a fraction of the NodePool's
disruption cost (each node 1 + its pods' eviction costs)."""

from __future__ import annotations

import pytest

from scheduler_svc.core import Node, Resources
from scheduler_svc.core.disruption import (
    Budget,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionSettings,
    DisruptionSettingsError,
    DisruptionSnapshot,
    plan_disruption,
)
from scheduler_svc.core.disruption.balanced import eviction_cost
from tests.scheduler_svc.core.builders import GIB
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

BALANCED = ConsolidationPolicy.BALANCED


def two_nodes(
    policy: ConsolidationPolicy, threshold: int = 2, deletion_cost: int = 0
) -> DisruptionSnapshot:
    """``small`` (c4.xlarge $0.199/h, one pod) whose pod fits on ``room`` (t3a.2xlarge
    $0.3008/h, one pod held in place): deleting ``small`` saves 40 % of the pool's price."""
    mover = CandidatePod(app_pod("mover"), deletion_cost=deletion_cost)
    small = candidate("small", "c4.xlarge", (mover,), created=0, last_event=0)
    # Its pod is do-not-disrupt: ``room`` stays (no merge of both), yet counts in the totals.
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    settings = pool(
        consolidation_policy=policy,
        consolidation_threshold=threshold,
        expire_after_seconds=None,
        budgets=(),
    )
    return snapshot([small, room], [settings])


def moved(plan: object) -> list[tuple[str, ...]]:
    return [d.nodes for d in plan.decisions]  # type: ignore[attr-defined]


# Pod eviction cost c = 1 + deletion_cost / 2^27. Deleting ``small``: savings fraction
# 0.199 / 0.4998 = 0.398, disruption fraction (1 + c) / (3 + c); score >= 1/k passes.
@pytest.mark.parametrize(
    ("threshold", "pod_cost", "passes"),
    [
        (2, 1, True),  # score 0.80 >= 0.5
        (2, 6, True),  # score 0.51
        (2, 7, False),  # score 0.50 - a hair: 0.398 * 10 / 8 = 0.4975
        (2, 10, False),  # the pod's deletion cost says it is expensive to restart
        (3, 10, True),  # a looser threshold (1/3) accepts it
        (1, 1, False),  # the strictest threshold (1) refuses the default pod
    ],
)
def test_a_move_is_made_only_when_its_saving_justifies_its_disruption(
    threshold: int, pod_cost: int, passes: bool
) -> None:
    state = two_nodes(BALANCED, threshold, deletion_cost=(pod_cost - 1) * 2**27)
    plan = plan_disruption(state, at(600))
    if passes:
        assert moved(plan) == [("small",)]
        assert "Balanced score" in plan.decisions[0].message
        assert "saves $0.1990/h (40% of $0.4998/h), disrupts 1 pod(s)" in (
            plan.decisions[0].message
        )
    else:
        assert moved(plan) == []
        held = {b.node: b for b in plan.blocked}["small"]
        assert held.event_reason == "Unconsolidatable"
        assert held.message.startswith("Balanced score ")
        assert f"< {1 / threshold:.2f}" in held.message


def test_when_empty_or_underutilized_does_not_score() -> None:
    """The same expensive pod moves under WhenEmptyOrUnderutilized: any saving is enough."""
    plan = plan_disruption(
        two_nodes(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, 2, 9 * 2**27), at(600)
    )
    assert moved(plan) == [("small",)]
    assert "Balanced" not in plan.decisions[0].message


def test_a_single_node_pool_delete_scores_exactly_one() -> None:
    """Boundary: the only node of its pool, its pods fitting on a node daiku does not manage,
    saves 100 % for 100 % of the disruption: score 1.0 passes the strictest threshold (k=1)."""
    lone = candidate("lone", "c4.xlarge", pods("p", 2), created=0, last_event=0)
    other = Node("static", allocatable=Resources(cpu_millis=8000, memory_bytes=32 * GIB, pods=110))
    settings = pool(
        consolidation_policy=BALANCED,
        consolidation_threshold=1,
        expire_after_seconds=None,
        budgets=(),
    )
    plan = plan_disruption(snapshot([lone], [settings], other_nodes=(other,)), at(600))
    assert moved(plan) == [("lone",)]
    assert "Balanced score 1.00 >= 1.00" in plan.decisions[0].message


@pytest.mark.parametrize(
    ("deletion_cost", "priority", "cost"),
    [
        (0, 0, 1.0),
        (2**27, 0, 2.0),
        (0, 2**25, 2.0),
        (2147483647, 0, 10.0),  # clamped
        (-2147483647, 0, -10.0),  # clamped (scored as 0: max(0, cost))
        (0, 1_000_000_000, 10.0),  # system-node-critical: clamped
    ],
)
def test_eviction_cost_as_karpenter(deletion_cost: int, priority: int, cost: float) -> None:
    pod = CandidatePod(app_pod("p"), deletion_cost=deletion_cost, priority=priority)
    assert eviction_cost(pod) == pytest.approx(cost)


def test_settings_read_balanced_and_its_threshold() -> None:
    spec = {"disruption": {"consolidationPolicy": "Balanced", "consolidationThreshold": 3}}
    settings = DisruptionSettings.from_spec("default", spec)
    assert settings.consolidation_policy is BALANCED
    assert settings.consolidation_threshold == 3
    default = DisruptionSettings.from_spec(
        "default", {"disruption": {"consolidationPolicy": "Balanced"}}
    )
    assert default.consolidation_threshold == 2


@pytest.mark.parametrize(
    ("disruption", "error"),
    [
        (
            {"consolidationPolicy": "Balanced", "consolidationThreshold": 4},
            "4 is not one of 1, 2, 3",
        ),
        (
            {"consolidationPolicy": "Balanced", "consolidationThreshold": 0},
            "0 is not one of 1, 2, 3",
        ),
        ({"consolidationPolicy": "Balanced", "consolidationThreshold": True}, "True is not one of"),
        ({"consolidationThreshold": 2}, "only allowed with consolidationPolicy Balanced"),
        ({"consolidationPolicy": "Balancd"}, "WhenEmpty, WhenEmptyOrUnderutilized, Balanced"),
    ],
)
def test_bad_balanced_settings_are_refused(disruption: dict[str, object], error: str) -> None:
    with pytest.raises(DisruptionSettingsError, match=r"spec\.disruption\.consolidation") as raised:
        DisruptionSettings.from_spec("default", {"disruption": disruption})
    assert error in str(raised.value)


def ranked(policy: ConsolidationPolicy) -> DisruptionSnapshot:
    """Two single-node deletes, one move a pass (budget 1): ``costly`` (c4.xlarge, its pod's
    eviction cost 10) comes first in candidate order (as many pods, dearer node) but scores
    0.45; ``light`` (c4.large, eviction cost 1) scores 1.25. Both pass k = 3."""
    costly_pod = CandidatePod(app_pod("costly-0"), deletion_cost=9 * 2**27)
    costly = candidate("costly", "c4.xlarge", (costly_pod,), created=0, last_event=0)
    light = candidate("light", "c4.large", pods("light", 1), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    settings = pool(
        consolidation_policy=policy,
        consolidation_threshold=3,
        expire_after_seconds=None,
        budgets=(Budget(nodes=1, percent=None),),
    )
    return snapshot([costly, light, room], [settings])


def test_balanced_takes_the_highest_scoring_move_not_the_first() -> None:
    """Savings fraction / disruption fraction against the pool ($0.5998/h, cost 15):
    costly 0.332 / 0.733 = 0.45, light 0.167 / 0.133 = 1.25; the budget's one move goes to
    light (candidate order alone would have taken costly)."""
    plan = plan_disruption(ranked(BALANCED), at(600))
    assert moved(plan) == [("light",)]
    assert plan.decisions[0].balanced_score == pytest.approx((0.1 / 0.5998) / (2 / 15))
    assert "Balanced score 1.25 >= 0.33" in plan.decisions[0].message


def test_unscored_policies_keep_candidate_order() -> None:
    """WhenEmptyOrUnderutilized does not score: the first candidate that consolidates goes."""
    plan = plan_disruption(ranked(ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED), at(600))
    assert moved(plan) == [("costly",)]
    assert plan.decisions[0].balanced_score is None
