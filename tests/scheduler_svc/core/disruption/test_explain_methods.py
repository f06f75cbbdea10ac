"""``daiku explain node`` names, for each disruption method, why it acts or not now, with the
Balanced score, on one screen."""

from __future__ import annotations

import dataclasses

from scheduler_svc.core.disruption import CandidatePod, ConsolidationPolicy, explain_node
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)


def lines_starting(details: tuple[str, ...], prefix: str) -> list[str]:
    return [d for d in details if d.startswith(prefix)]


def test_every_method_has_its_line_with_the_balanced_score() -> None:
    mover = CandidatePod(app_pod("mover"), deletion_cost=9 * 2**27)
    small = candidate("small", "c4.xlarge", (mover,), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1, do_not_disrupt=True), last_event=0)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.BALANCED,
        expire_after_seconds=7200.0,
        budgets=(),
    )
    explained = explain_node(snapshot([small, room], [settings]), "small", at(600))
    assert not explained.is_going_away
    details = explained.details
    assert lines_starting(details, "Empty: ") == ["Empty: no, 1 pod(s) to move"]
    assert lines_starting(details, "Expired: ") == ["Expired: not yet, expires in 1h50m"]
    assert lines_starting(details, "Drifted: ") == ["Drifted: no"]
    (under,) = lines_starting(details, "Underutilized: ")
    assert under.startswith("Underutilized: no, Balanced score 0.47 < 0.50")
    assert lines_starting(details, "repair: ")
    assert lines_starting(details, "rebalance: ")
    assert len(details) <= 20  # one screen


def test_the_acting_method_says_so() -> None:
    node = candidate("idle", "c4.xlarge", (), created=0, last_event=0)
    settings = pool(consolidate_after_seconds=30.0, expire_after_seconds=None, budgets=())
    explained = explain_node(snapshot([node], [settings]), "idle", at(30))
    assert explained.is_going_away
    assert lines_starting(explained.details, "Empty: ") == [
        "Empty: yes, quiet 30s (consolidateAfter 30s) -> acts now"
    ]
    assert lines_starting(explained.details, "Underutilized: ") == [
        "Underutilized: no, empty (the Empty method's)"
    ]
    early = explain_node(snapshot([node], [settings]), "idle", at(29))
    assert lines_starting(early.details, "Empty: ") == [
        "Empty: not yet, quiet 29s of consolidateAfter 30s"
    ]


def test_a_nominated_node_says_so() -> None:
    node = candidate("fresh", "c4.xlarge", (), created=0)
    nominated = dataclasses.replace(node, nominated_pods=2, nominated_until=at(20))
    explained = explain_node(snapshot([nominated], [pool(budgets=())]), "fresh", at(5))
    assert explained.verdict.startswith("stays: DisruptionBlocked: nominated for 2 pending pod(s)")
    assert any(d.startswith("nominated for 2 pending pod(s)") for d in explained.details)


def test_an_expired_node_held_by_do_not_disrupt_names_the_grace_period() -> None:
    """Issue 15 item 4: the Expired line says which pod holds the node and when the NodePool's
    doNotDisruptGracePeriod ends; at that moment it says the pod no longer holds it."""
    batch = CandidatePod(app_pod("batch"), do_not_disrupt=True)
    old = candidate("old", "c4.xlarge", (batch,), created=0, last_event=0)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=3000, last_event=3500)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
        expire_after_seconds=3600.0,
        budgets=(),
        do_not_disrupt_grace_period_seconds=1800.0,
    )
    state = snapshot([old, room], [settings])
    held = explain_node(state, "old", at(3600 + 1799))
    assert not held.is_going_away
    assert lines_starting(held.details, "Expired: ") == [
        "Expired: 1h29m59s old (expireAfter 1h); held by do-not-disrupt pod default/batch, "
        "doNotDisruptGracePeriod 30m ends 2026-01-05T10:30:00+00:00"
    ]
    assert any("doNotDisruptGracePeriod 30m" in d for d in held.details[:4])
    ended = explain_node(state, "old", at(3600 + 1800))
    assert ended.is_going_away
    (line,) = lines_starting(ended.details, "Expired: ")
    assert line.endswith(
        "no longer holds it (doNotDisruptGracePeriod 30m ended 2026-01-05T10:30:00+00:00) "
        "-> acts now"
    )
    assert len(ended.details) <= 20  # one screen
