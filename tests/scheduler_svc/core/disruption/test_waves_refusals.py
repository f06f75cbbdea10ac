"""Consolidation in waves (decision 0021), what it refuses and what it says: a merge within the
budgets is the ordinary search's, a delete larger than the budgets and a merge whose deferred
node would stay (its saving, its Balanced score) are refused; a wave's note names the budget
that limits Underutilized and every node going now. The refusals reach people as the largest
multi-node refusal in each blocked node's Unconsolidatable message. Pure core, clock passed in
(``at``)."""

from __future__ import annotations

import dataclasses

from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    ConsolidationPolicy,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionReason,
    DisruptionSnapshot,
    NodePoolState,
    plan_disruption,
    validate,
)
from tests.scheduler_svc.core.builders import instance_type
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    one_cpu_nodes,
    pool,
    snapshot,
)

UNDERUTILIZED_ONLY = frozenset({DisruptionReason.UNDERUTILIZED})


def budget_of(nodes: int) -> NodePoolState:
    """``consolidating`` with a budget of ``nodes`` nodes."""
    return consolidating(budgets=(Budget(nodes=nodes, percent=None),))


def the_decision(plan: DisruptionPlan) -> DisruptionDecision:
    (decision,) = plan.decisions
    return decision


# -- refusals ---------------------------------------------------------------------------------


def test_a_merge_within_the_budgets_is_left_to_the_ordinary_search() -> None:
    """Three 1-CPU c4.large under a budget of two, no extra lengths scanned: the waves search
    tries only the first two, which the budget lets go whole; that merge is the ordinary
    search's (it does not pay), so waves refuse it and say so."""
    options = ConsolidationOptions(max_multi_node_scan=0)
    plan = plan_disruption(snapshot(one_cpu_nodes(3), [budget_of(2)]), at(600), options)
    assert plan.decisions == ()
    refused = (
        "would cost more: no replacement saves 10% and $0.01/h on $0.1000/h; "
        "multi-node: merging the first 2 candidates does not pay "
        "(2: within the budgets (searched as an ordinary merge))"
    )
    assert blocked_messages(plan) == dict.fromkeys(("n0", "n1", "n2"), refused)


def test_a_delete_larger_than_the_budgets_is_refused() -> None:
    """Three nodes at $0.004/h whose pods fit on ``big`` (held by a do-not-disrupt pod): deleting
    all three saves $0.012/h, any two too little, and a budget of two would defer n2 as a
    delete of its own saving $0.004/h. Waves launch replacements; a delete has none: refused."""
    tiny = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 250)),), price=0.004)
        for i in range(3)
    ]
    pinned = CandidatePod(app_pod("pinned", 250), do_not_disrupt=True)
    big = candidate("big", "c4.2xlarge", (pinned,))
    plan = plan_disruption(snapshot([*tiny, big], [budget_of(2)]), at(600))
    assert plan.decisions == ()
    messages = blocked_messages(plan)
    assert messages["big"] == "do-not-disrupt pod default/pinned"
    for name in ("n0", "n1", "n2"):
        assert messages[name] == (
            "would save only $0.0040/h; multi-node: merging the first 3, 2 candidates does not "
            "pay (3: a delete larger than the budgets (a smaller one goes first))"
        )


# Balanced, a budget of one; c5.2xlarge ($0.12/h) holds every pod, no type cheaper than a node
# holds one. n0 and n1: $0.10/h, one pod (cost 2 each); n2: $0.05/h, one pod of eviction cost
# 10 (cost 11). The pool: $0.25/h, cost 15.
#   n0 + n1 (n1 deferred):  saves $0.08/h, 32 % of the price for 27 % of the cost: 1.20
#   n0 + n1 + n2:           saves $0.13/h, 52 % for 100 %: 0.52 (passes 0.50)
#   n1 alone:               40 % for 13 %: 3.0;   n2 alone: 20 % for 73 %: 0.27 (fails)
WAVE_CATALOG = (*CATALOG, instance_type("c5.2xlarge", 7.91, 16.0, 0.12))


def costly_straggler() -> DisruptionSnapshot:
    heavy = CandidatePod(app_pod("p2", 1000), priority=9 * 2**25)
    nodes = [
        candidate("n0", "c4.large", (CandidatePod(app_pod("p0", 1000)),)),
        candidate("n1", "c4.large", (CandidatePod(app_pod("p1", 1000)),)),
        candidate("n2", "c4.large", (heavy,), price=0.05),
    ]
    balanced = pool(
        consolidation_policy=ConsolidationPolicy.BALANCED,
        consolidate_after_seconds=30.0,
        expire_after_seconds=None,
        budgets=(Budget(nodes=1, percent=None),),
    )
    return snapshot(nodes, [balanced], WAVE_CATALOG)


def test_a_balanced_merge_whose_deferred_node_would_score_too_low_alone_is_refused() -> None:
    """With a 45 % saving required, n0 + n1 does not pay and n0 + n1 + n2 does (52 %), its
    score passing too; but n2, deferred, deleted alone later would score 0.27 and stay: the
    merge is refused, the score it would fail stated."""
    options = ConsolidationOptions(min_saving_fraction=0.45)
    plan = plan_disruption(costly_straggler(), at(600), options)
    assert plan.decisions == ()
    assert blocked_messages(plan)["n0"] == (
        "would cost more: no replacement saves 45% and $0.01/h on $0.1000/h; multi-node: "
        "merging the first 3, 2 candidates does not pay (3: in waves, deferred n2 alone would "
        "stay: Balanced score 0.27 < 0.50 (consolidationThreshold 2): saves $0.0500/h (20% of "
        "$0.2500/h), disrupts 1 pod(s) (cost 11.0, 73% of 15.0))"
    )


def test_a_balanced_wave_goes_when_each_deferred_node_would_score_alone() -> None:
    """With the default 10 %, n0 + n1 goes in waves (n1 deferred scores 3.0 alone, deleting all
    its price); the larger n0 + n1 + n2 is not taken, as n2 would stay."""
    decision = the_decision(plan_disruption(costly_straggler(), at(600)))
    assert (decision.nodes, decision.deferred) == (("n0",), ("n1",))
    assert [c.instance_type for c in decision.replacements] == ["c5.2xlarge"]
    assert decision.balanced_score is not None
    assert decision.message == (
        "Underutilized: replace n0, n1 ($0.2000/h) by c5.2xlarge (on-demand, $0.1200/h); "
        "saves $0.0800/h; Balanced score 1.20 >= 0.50 (consolidationThreshold 2): saves "
        "$0.0800/h (32% of $0.2500/h), disrupts 2 pod(s) (cost 4.0, 27% of 15.0); in waves "
        "(budget nodes: 1 of NodePool default lets 1 go now): n0 now, n1 later, each a delete "
        "once the replacements run (the cheapest, n1, saves $0.1000/h alone)"
    )


# -- the wave decision ------------------------------------------------------------------------


def test_a_wave_obeys_the_budget_naming_underutilized_and_names_it() -> None:
    """Budgets of two nodes for Underutilized and five for every reason: the wave takes two now
    (the tighter budget that names the reason), says which budget, names both nodes going now,
    and disrupts only their NodeClaims now."""
    budgets = (
        Budget(nodes=2, percent=None, reasons=UNDERUTILIZED_ONLY),
        Budget(nodes=5, percent=None),
    )
    state = snapshot(one_cpu_nodes(3), [consolidating(budgets=budgets)])
    decision = the_decision(plan_disruption(state, at(600)))
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))
    assert decision.nodeclaims == ("default-n0", "default-n1")
    assert decision.deferred_nodeclaims == ("default-n2",)
    assert decision.message == (
        "Underutilized: replace n0, n1, n2 ($0.3000/h) by c4.xlarge (on-demand, $0.1990/h); "
        "saves $0.1010/h; in waves (budget nodes: 2 for Underutilized of NodePool default lets "
        "2 go now): n0, n1 now, n2 later, each a delete once the replacements run (the "
        "cheapest, n2, saves $0.1000/h alone)"
    )


def test_a_wave_across_node_pools_names_each_pools_budget() -> None:
    """n0, n1 in NodePool a and n2, n3 in b, a budget of one each: the 4 -> 1 merge takes n0 and
    n2 now, defers n1 and n3, and its note lists both budgets."""

    def pool_of(name: str) -> NodePoolState:
        return pool(
            name,
            consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
            consolidate_after_seconds=30.0,
            expire_after_seconds=None,
            budgets=(Budget(nodes=1, percent=None),),
        )

    nodes = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1000)),), nodepool=name)
        for i, name in enumerate(["a", "a", "b", "b"])
    ]
    decision = the_decision(plan_disruption(snapshot(nodes, [pool_of("a"), pool_of("b")]), at(600)))
    assert (decision.nodes, decision.deferred) == (("n0", "n2"), ("n1", "n3"))
    assert decision.nodeclaims == ("a-n0", "b-n2")
    assert decision.deferred_nodeclaims == ("a-n1", "b-n3")
    assert decision.message.endswith(
        "; in waves (budget nodes: 1 of NodePool a lets 1 go now; budget nodes: 1 of NodePool b "
        "lets 1 go now): n0, n2 now, n1, n3 later, each a delete once the replacements run (the "
        "cheapest, n1, saves $0.1000/h alone)"
    )


def test_a_wave_whose_budgets_widened_validates_as_the_ordinary_merge() -> None:
    """Decided under a budget of two (n2 deferred); by validation the budget is gone, so the
    whole merge may go at once: it is checked as the ordinary merge, which still holds."""
    decision = the_decision(plan_disruption(snapshot(one_cpu_nodes(3), [budget_of(2)]), at(600)))
    assert decision.deferred == ("n2",)
    widened = snapshot(one_cpu_nodes(3), [consolidating()])
    assert validate(decision, widened, at(615)).is_valid
    # Under the budget it was decided with, too.
    assert validate(decision, snapshot(one_cpu_nodes(3), [budget_of(2)]), at(615)).is_valid


def test_waves_wait_only_as_long_as_configured() -> None:
    """consolidateAfter 0 and ``waves_min_quiet_seconds`` 0: nodes whose pods changed half a
    second ago may start a wave; a minimum of one second holds it."""
    settings = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        consolidate_after_seconds=0.0,
        expire_after_seconds=None,
        budgets=(Budget(nodes=2, percent=None),),
    )
    nodes: list[Candidate] = [
        dataclasses.replace(c, last_pod_event_at=at(599.5)) for c in one_cpu_nodes(3)
    ]
    state = snapshot(nodes, [settings])
    eager = ConsolidationOptions(waves_min_quiet_seconds=0.0)
    decision = the_decision(plan_disruption(state, at(600), eager))
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))
    patient = ConsolidationOptions(waves_min_quiet_seconds=1.0)
    assert plan_disruption(state, at(600), patient).decisions == ()


# -- the single-node step before waves --------------------------------------------------------


def test_an_unscored_single_move_after_a_scored_one_lets_the_scored_one_go() -> None:
    """b0 (Balanced) and p0 (WhenEmptyOrUnderutilized) can each be deleted onto ``spare`` (a
    NodePool that never consolidates), not both; with multi-node merges off, b0's scored delete
    is found first, p0's unscored one ends the scan, and the scored one goes."""

    def pool_of(name: str, policy: ConsolidationPolicy, after: float | None) -> NodePoolState:
        return pool(
            name,
            consolidation_policy=policy,
            consolidate_after_seconds=after,
            expire_after_seconds=None,
            budgets=(),
        )

    nodes = [
        candidate("b0", "c4.large", (CandidatePod(app_pod("pb", 1000)),), nodepool="bal"),
        candidate("p0", "c4.large", (CandidatePod(app_pod("pp", 1000)),), nodepool="plain"),
        candidate("spare", "c4.large", (), nodepool="keep"),
    ]
    pools = [
        pool_of("bal", ConsolidationPolicy.BALANCED, 30.0),
        pool_of("plain", ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, 30.0),
        pool_of("keep", ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, None),
    ]
    options = ConsolidationOptions(max_multi_node_candidates=1)
    decision = the_decision(plan_disruption(snapshot(nodes, pools), at(600), options))
    assert decision.nodes == ("b0",)
    assert decision.balanced_score == 1.0
    assert decision.message.startswith("Underutilized: pods of b0 fit on other nodes;")
