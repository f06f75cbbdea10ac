"""``daiku explain node``'s method lines in the cases a person asks about: a drifted node a
do-not-disrupt pod holds (and when the grace period lets it go), a timed hold, a merge the pass
acts on, a broken node, a rebalance recommendation, and a node whose NodePool is gone."""

from __future__ import annotations

import dataclasses

from scheduler_svc.core.disruption import (
    CandidatePod,
    ConsolidationPolicy,
    NodeCondition,
    NodePoolState,
    explain_node,
)
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

WHEN_EMPTY = ConsolidationPolicy.WHEN_EMPTY


def line(details: tuple[str, ...], prefix: str) -> str:
    (found,) = [d for d in details if d.startswith(prefix)]
    return found


def test_a_drifted_node_held_by_do_not_disrupt_names_the_grace_period_then_its_end() -> None:
    """The Drifted line says which pod holds the node and when doNotDisruptGracePeriod (30m from
    the Drifted condition at 09:01:40) ends; once it has, the node is replaced."""
    node = candidate(
        "old",
        "c4.xlarge",
        pods("b", 1, do_not_disrupt=True),
        nodepool_hash="launched",
        drifted_since=at(100),
    )
    settings = pool(
        consolidation_policy=WHEN_EMPTY,
        expire_after_seconds=None,
        budgets=(),
        do_not_disrupt_grace_period_seconds=1800.0,
    ).disruption
    state = snapshot([node], [NodePoolState(pool().nodepool, settings, nodepool_hash="today")])
    drift = "Drifted: NodePool default changed since launch (nodepool-hash differs)"

    held = explain_node(state, "old", at(1000))
    assert not held.is_going_away
    assert line(held.details, "Drifted: ") == (
        f"{drift}; held by do-not-disrupt pod default/b-0, doNotDisruptGracePeriod 30m ends "
        "2026-01-05T09:31:40+00:00"
    )
    ended = explain_node(state, "old", at(1900))
    assert ended.is_going_away
    assert line(ended.details, "Drifted: ") == (
        f"{drift}; do-not-disrupt pod default/b-0 no longer holds it (doNotDisruptGracePeriod "
        "30m ended 2026-01-05T09:31:40+00:00) -> acts now"
    )


def test_a_timed_hold_shows_on_an_expired_node_only_while_it_lasts() -> None:
    """``do-not-disrupt: "2h"`` holds an expired node until 11:00; before expiry the Expired line
    names no hold, and with no grace period the hold line ends at the pod's name."""
    job = CandidatePod(app_pod("j"), do_not_disrupt=True, do_not_disrupt_until=at(7200))
    node = candidate("t", "c4.xlarge", (job,))
    state = snapshot(
        [node], [pool(consolidation_policy=WHEN_EMPTY, expire_after_seconds=3600.0, budgets=())]
    )
    assert line(explain_node(state, "t", at(600)).details, "Expired: ") == (
        "Expired: not yet, expires in 50m"
    )
    held = explain_node(state, "t", at(4000))
    assert not held.is_going_away
    assert line(held.details, "Expired: ") == (
        "Expired: 1h6m40s old (expireAfter 1h); held by do-not-disrupt pod default/j"
    )
    after = explain_node(state, "t", at(8000))
    assert after.is_going_away
    assert line(after.details, "Expired: ") == "Expired: 2h13m20s old (expireAfter 1h) -> acts now"


def test_the_merge_the_pass_acts_on_is_the_underutilized_line() -> None:
    """Three nodes merged into one: each node's line is the merge, not what it would do alone."""
    nodes = [candidate(f"n{i}", "c4.xlarge", pods(f"p{i}", 2)) for i in range(3)]
    settings = pool(consolidate_after_seconds=60.0, budgets=(), expire_after_seconds=None)
    explained = explain_node(snapshot(nodes, [settings]), "n1", at(600))
    assert line(explained.details, "Underutilized: ") == (
        "Underutilized: replace n0, n1, n2 ($0.5970/h) by c4.xlarge (on-demand, $0.1990/h); "
        "saves $0.3980/h -> acts now"
    )


def test_an_expired_node_s_underutilized_line_is_what_it_would_do_alone() -> None:
    """The pass replaces the expired node; its Underutilized line still says what
    consolidation alone would do (the pass acted for another reason)."""
    old = candidate("old", "c4.large", pods("o", 1))
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 1), created=7000, last_event=7000)
    state = snapshot([old, roomy], [pool(expire_after_seconds=3600.0, budgets=())])
    explained = explain_node(state, "old", at(7200))
    assert explained.is_going_away
    assert line(explained.details, "Underutilized: ") == (
        "Underutilized: alone it would: pods of old fit on other nodes; saves $0.1000/h"
    )


def test_a_broken_node_s_repair_line_says_it_is_due() -> None:
    sick = candidate("sick", "c4.xlarge", conditions=(NodeCondition("Ready", "False", at(0)),))
    state = snapshot([sick], [pool(consolidation_policy=WHEN_EMPTY, expire_after_seconds=None)])
    assert line(explain_node(state, "sick", at(1860)).details, "repair: ") == (
        "repair: Ready False for 31m (toleration 30m); due now (replaced first when the "
        "scheduler runs with --node-repair, drain bounded)"
    )


def test_a_rebalance_recommendation_shows_its_time_and_policy() -> None:
    node = candidate("spot", "c4.xlarge", capacity_type="spot", rebalance_recommended_at=at(30))
    state = snapshot([node], [pool(consolidation_policy=WHEN_EMPTY, expire_after_seconds=None)])
    assert line(explain_node(state, "spot", at(600)).details, "rebalance: ") == (
        "rebalance: recommended at 2026-01-05T09:00:30Z; rebalanceRecommendationPolicy Ignore: "
        "Event only"
    )


def test_a_node_whose_nodepool_is_gone_is_explained_without_settings() -> None:
    """No NodePool, no settings: the node stays, and every method line says it does not act."""
    busy = candidate("busy", "c4.xlarge", pods("b", 1), nodepool="gone")
    empty = dataclasses.replace(busy, name="empty", pods=())
    state = snapshot([busy, empty], [pool()])
    explained = explain_node(state, "busy", at(600))
    assert explained.verdict == "stays: DisruptionBlocked: NodePool gone not found"
    assert explained.details[3:] == (
        "Empty: no, 1 pod(s) to move",
        "Expired: never (expireAfter Never)",
        "Drifted: no",
        "Underutilized: no, NodePool gone not found",
        "repair: healthy (no repair policy's condition holds)",
        "rebalance: no recommendation (rebalanceRecommendationPolicy None)",
    )
    assert line(explain_node(state, "empty", at(600)).details, "Empty: ") == (
        "Empty: never (consolidateAfter Never)"
    )
