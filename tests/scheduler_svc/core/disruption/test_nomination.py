"""The nomination window: a node the provisioner planned pending pods onto is not Empty, not
consolidated and not replaced while those pods wait for the default-scheduler (Karpenter's
``StateNode.Nominated()``: "state node is nominated for a pending pod")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler_svc.core.disruption import Candidate, ConsolidationPolicy, plan_disruption, validate
from tests.scheduler_svc.core.disruption.builders import at, candidate, pods, pool, snapshot


def fresh(**kwargs: Any) -> Candidate:
    """A just-initialized node with no pods bound yet (consolidateAfter 0s)."""
    return candidate("fresh", "c4.xlarge", (), created=0, **kwargs)


@pytest.mark.parametrize(
    ("nominated_pods", "until", "now", "removed"),
    [
        (0, None, 5, True),  # nothing nominated: Empty at once, as before
        (1, 20, 5, False),  # its pod is still pending: stays
        (1, 20, 19.999, False),
        (1, 20, 20, True),  # the window is over (boundary: now == until ends it)
        (2, None, 5, True),  # no window: never held for ever
    ],
)
def test_a_node_with_pods_nominated_to_it_is_not_empty(
    nominated_pods: int, until: float | None, now: float, removed: bool
) -> None:
    node = fresh(
        nominated_pods=nominated_pods, nominated_until=None if until is None else at(until)
    )
    state = snapshot([node], [pool(consolidate_after_seconds=0.0, budgets=())])
    plan = plan_disruption(state, at(now))
    assert [d.nodes for d in plan.decisions] == ([("fresh",)] if removed else [])
    if not removed:
        (held,) = plan.blocked
        assert held.event_reason == "DisruptionBlocked"
        assert held.message.startswith(f"nominated for {nominated_pods} pending pod(s)")


def test_a_nominated_node_is_not_consolidated_or_replaced() -> None:
    """Underutilized (its pods fit elsewhere) and expired, but nominated: it stays."""
    busy = candidate("busy", "c4.large", pods("b", 1), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=0, last_event=0)
    nominated = dataclasses.replace(busy, nominated_pods=1, nominated_until=at(4000))
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        expire_after_seconds=3600.0,
        budgets=(),
    )
    plan = plan_disruption(snapshot([busy, room], [settings]), at(3600))
    assert "busy" in [n for d in plan.decisions for n in d.nodes]
    plan = plan_disruption(snapshot([nominated, room], [settings]), at(3600))
    assert "busy" not in [n for d in plan.decisions for n in d.nodes]
    assert any(b.node == "busy" and "nominated" in b.message for b in plan.blocked)


def test_a_decision_made_before_a_nomination_does_not_validate() -> None:
    busy = candidate("busy", "c4.large", pods("b", 1), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=0, last_event=0)
    settings = pool(expire_after_seconds=None, budgets=())
    plan = plan_disruption(snapshot([busy, room], [settings]), at(100))
    (decision,) = [d for d in plan.decisions if "busy" in d.nodes]
    nominated = dataclasses.replace(busy, nominated_pods=1, nominated_until=at(200))
    checked = validate(decision, snapshot([nominated, room], [settings]), at(115))
    assert not checked.is_valid
    assert "nominated" in checked.reason
