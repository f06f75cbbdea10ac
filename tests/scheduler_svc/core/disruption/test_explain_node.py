"""``daiku explain node``'s whole answer: the verdict, whether the node goes, and the facts
shown above the method lines (what a person reads before acting on a node)."""

from __future__ import annotations

from scheduler_svc.core.disruption import (
    Budget,
    CandidatePod,
    ConsolidationOptions,
    ConsolidationPolicy,
    DisruptionReason,
    NodeExplanation,
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

DAEMON = CandidatePod(app_pod("ds", 25, 0), owner_kind="DaemonSet")


def test_a_node_daiku_did_not_launch_stays_with_no_details() -> None:
    node = candidate("n1", "c4.xlarge", pods("p", 1))
    assert explain_node(snapshot([node]), "other", at(600)) == NodeExplanation(
        "other", False, "stays: not a node daiku launched", ()
    )


def test_a_node_already_being_disrupted_is_going_away() -> None:
    node = candidate("n1", "c4.xlarge", pods("p", 1))
    state = snapshot([node], disrupting=frozenset({"n1"}))
    assert explain_node(state, "n1", at(600)) == NodeExplanation(
        "n1", True, "going away: already being disrupted", ()
    )


def test_the_facts_name_type_age_quiet_time_pods_and_settings() -> None:
    """Age counts from creation, quiet time from the last pod event; DaemonSet pods are
    counted apart; the NodePool's settings include its doNotDisruptGracePeriod when set."""
    node = candidate("n1", "c4.xlarge", (DAEMON, *pods("p", 2)), created=0, last_event=3600)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
        consolidate_after_seconds=30.0,
        expire_after_seconds=86400.0,
        budgets=(),
        do_not_disrupt_grace_period_seconds=1800.0,
    )
    explained = explain_node(snapshot([node], [settings]), "n1", at(7200))
    assert explained.node == "n1"
    assert not explained.is_going_away
    assert explained.verdict == "stays: no disruption method applies now"
    assert explained.details[:4] == (
        "NodePool default, c4.xlarge on-demand in zone-a, $0.1990/h",
        "age 2h; pods changed 1h ago",
        "2 pod(s) to move (1 DaemonSet/mirror)",
        "consolidationPolicy WhenEmpty, consolidateAfter 30s, expireAfter 24h, "
        "doNotDisruptGracePeriod 30m",
    )


def test_a_node_created_ahead_of_the_clock_reads_zero_age_and_never_settings() -> None:
    """A creationTimestamp after ``now`` (clock skew) reads age 0s, not a negative age; Never
    settings read Never and no grace period is listed when none is set."""
    node = candidate("n1", "c4.xlarge", pods("p", 1), created=60)
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY,
        consolidate_after_seconds=None,
        expire_after_seconds=None,
        budgets=(),
    )
    explained = explain_node(snapshot([node], [settings]), "n1", at(0))
    assert explained.details[1:4] == (
        "age 0s; pods changed 0s ago",
        "1 pod(s) to move (0 DaemonSet/mirror)",
        "consolidationPolicy WhenEmpty, consolidateAfter Never, expireAfter Never",
    )


def test_a_consolidation_says_it_waits_for_validation() -> None:
    small = candidate("small", "c4.large", pods("s", 2), created=0)
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 2), created=0, last_event=590)
    settings = pool(consolidate_after_seconds=60.0, budgets=(), expire_after_seconds=None)
    explained = explain_node(snapshot([small, roomy], [settings]), "small", at(600))
    assert explained.is_going_away
    assert explained.node == "small"
    assert explained.verdict == (
        "going away: Underutilized: pods of small fit on other nodes; saves $0.1000/h "
        "(after validation)"
    )


def test_a_blocked_node_stays_with_the_blocker() -> None:
    held = candidate("held", "c4.xlarge", pods("p", 1, do_not_disrupt=True), created=0)
    settings = pool(consolidate_after_seconds=60.0, budgets=(), expire_after_seconds=None)
    explained = explain_node(snapshot([held], [settings]), "held", at(600))
    assert explained.node == "held"
    assert explained.is_going_away is False
    assert explained.verdict == "stays: DisruptionBlocked: do-not-disrupt pod default/p-0"


def test_a_node_no_method_touches_names_what_the_pass_disrupts_instead() -> None:
    """While an expired node is replaced, consolidation waits: the young node stays, and the
    verdict says which decision this pass made instead."""
    old = candidate("old", "c4.large", pods("o", 1), created=0)
    young = candidate("young", "t3a.2xlarge", pods("y", 1), created=7000, last_event=7000)
    state = snapshot([old, young], [pool(expire_after_seconds=3600.0, budgets=())])
    explained = explain_node(state, "young", at(7200))
    assert explained == NodeExplanation(
        "young",
        False,
        "stays: no disruption method applies now (this pass disrupts other nodes: Expired: 2h "
        "old (expireAfter 1h); its pods fit on other nodes)",
        explained.details,
    )


def test_empty_nodes_going_elsewhere_are_not_named_as_what_the_pass_disrupts() -> None:
    """Deleting empty nodes is routine: the verdict of a node nothing acts on does not cite
    it."""
    empty = candidate("empty", "c4.large", (DAEMON,), created=0)
    busy = candidate("busy", "c4.xlarge", pods("b", 1), created=0)
    settings = pool(consolidation_policy=ConsolidationPolicy.WHEN_EMPTY, budgets=())
    explained = explain_node(snapshot([empty, busy], [settings]), "busy", at(600))
    assert explained.verdict == "stays: no disruption method applies now"


def test_the_consolidation_options_reach_the_pass_and_the_method_lines() -> None:
    """A 5 % saving is taken under a 1 % threshold and refused under the default 10 %; with a
    budget of 0 for Underutilized, the Underutilized line still says what the options allow
    the node alone."""
    node = candidate("n1", "c4.2xlarge", pods("p", 6), created=0, price=0.21)
    options = ConsolidationOptions(min_saving_fraction=0.01, min_saving_per_hour=0.001)
    replace = "replace n1 ($0.2100/h) by c4.xlarge (on-demand, $0.1990/h); saves $0.0110/h"
    refuse = (
        "would cost more: no single node saving 10% on $0.2100/h holds the pods (they would need 2)"
    )
    free = snapshot(
        [node], [pool(consolidate_after_seconds=60.0, budgets=(), expire_after_seconds=None)]
    )
    taken = explain_node(free, "n1", at(600), options)
    assert taken.is_going_away
    assert taken.verdict == f"going away: Underutilized: {replace} (after validation)"
    kept = explain_node(free, "n1", at(600))
    assert kept.verdict == f"stays: Unconsolidatable: {refuse}"

    no_budget = (
        Budget(nodes=0, percent=None, reasons=frozenset({DisruptionReason.UNDERUTILIZED})),
    )
    blocked = snapshot(
        [node], [pool(consolidate_after_seconds=60.0, budgets=no_budget, expire_after_seconds=None)]
    )
    alone = explain_node(blocked, "n1", at(600), options)
    assert not alone.is_going_away
    assert f"Underutilized: alone it would: {replace}" in alone.details
    assert f"Underutilized: no, {refuse}" in explain_node(blocked, "n1", at(600)).details


def test_a_nominated_node_stays_until_the_nomination_window_ends() -> None:
    """The verdict and the facts say how many pending pods the provisioner planned onto the
    node and until when the pass leaves it alone for them."""
    fresh = candidate("fresh", "c4.xlarge", (), nominated_pods=2, nominated_until=at(20))
    explained = explain_node(snapshot([fresh], [pool(budgets=())]), "fresh", at(5))
    message = (
        "nominated for 2 pending pod(s) the provisioner planned onto it until "
        "2026-01-05T09:00:20+00:00"
    )
    assert explained.verdict == f"stays: DisruptionBlocked: {message}"
    assert explained.details[4] == message


def test_a_node_deferred_to_a_later_wave_is_explained_in_full() -> None:
    """Three 1-CPU c4.large merge into one c4.xlarge; a budget of 2 takes n0 and n1 now and
    defers n2: n2's explanation says it goes in a later wave, with its facts and method
    lines like any other node's."""
    nodes = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1000)),)) for i in range(3)
    ]
    two = (Budget(nodes=2, percent=None),)
    settings = pool(consolidate_after_seconds=30.0, budgets=two, expire_after_seconds=None)
    explained = explain_node(snapshot(nodes, [settings]), "n2", at(600))
    assert explained.node == "n2"
    assert explained.is_going_away
    assert explained.verdict.startswith(
        "going away in a later wave: Underutilized: replace n0, n1, n2 ($0.3000/h) by c4.xlarge"
    )
    assert explained.details[:3] == (
        "NodePool default, c4.large on-demand in zone-a, $0.1000/h",
        "age 10m; pods changed 10m ago",
        "1 pod(s) to move (0 DaemonSet/mirror)",
    )
