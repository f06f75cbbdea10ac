"""Empty nodes and disruption budgets, case by case: which empty nodes go, what their Empty
decision says, which budget a blocked node names, and the node the simulations see for a
candidate. Small hand-made snapshots through ``plan_disruption`` and ``validate``; pure core,
clock passed in (``at``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionReason,
    NodePoolState,
    plan_disruption,
    validate,
)
from scheduler_svc.core.taints import Taint, TaintEffect
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    consolidating,
    pool,
    snapshot,
)

NO_EXPIRY: dict[str, Any] = {"expire_after_seconds": None}
EMPTY_ONLY = frozenset({DisruptionReason.EMPTY})


def blocked_events(plan: DisruptionPlan) -> dict[str, str]:
    """Each blocked node's Event, reason and message, by node name."""
    return {b.node: f"{b.event_reason}: {b.message}" for b in plan.blocked}


def nodepool(name: str, after: float | None, **settings: Any) -> NodePoolState:
    """A NodePool consolidating after ``after`` seconds (None: Never), WhenEmptyOrUnderutilized,
    no expiry, no budget unless given."""
    options: dict[str, Any] = {"budgets": (), **NO_EXPIRY, **settings}
    return pool(name, consolidate_after_seconds=after, **options)


# -- which empty nodes go ---------------------------------------------------------------------


def test_an_empty_node_of_a_never_pool_does_not_stop_the_next_one() -> None:
    """``a`` (consolidateAfter Never) has been quiet longest, so it is looked at first and
    skipped; ``b``, quiet since 100 s in a pool consolidating after 30 s, still goes as Empty."""
    never = candidate("a", "c4.large", created=0, nodepool="never")
    quiet = candidate("b", "c4.large", created=100, nodepool="fast")
    state = snapshot(
        [never, quiet],
        [nodepool("never", None), nodepool("fast", 30.0)],
    )
    plan = plan_disruption(state, at(600))
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(DisruptionReason.EMPTY, ("b",))]


def test_an_empty_node_not_quiet_long_enough_does_not_stop_the_next_one() -> None:
    """``a`` has been quiet since 0 s but its pool waits an hour; ``b``, quiet since 100 s in a
    pool waiting 30 s, comes after it in the (quiet since, name) order and still goes."""
    slow = candidate("a", "c4.large", created=0, nodepool="slow")
    quiet = candidate("b", "c4.large", created=100, nodepool="fast")
    state = snapshot(
        [slow, quiet],
        [nodepool("slow", 3600.0), nodepool("fast", 30.0)],
    )
    plan = plan_disruption(state, at(600))
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(DisruptionReason.EMPTY, ("b",))]
    assert plan.blocked == ()


def test_the_empty_decision_says_how_long_the_node_was_quiet() -> None:
    """An empty c4.xlarge quiet for 9m30s under consolidateAfter 30s: deleted, its NodeClaim
    named, nothing launched, its whole price saved, the wait and the quiet time in the
    message; no validation (it has already been quiet for consolidateAfter)."""
    node = candidate("n1", "c4.xlarge", created=0, last_event=30)
    plan = plan_disruption(snapshot([node], [nodepool("default", 30.0)]), at(600))
    assert plan.decisions == (
        DisruptionDecision(
            reason=DisruptionReason.EMPTY,
            nodes=("n1",),
            nodeclaims=("default-n1",),
            replacements=(),
            message="Empty: no pods for 9m30s (consolidateAfter 30s)",
            decided_at=at(600),
            old_price_per_hour=0.199,
            new_price_per_hour=0.0,
        ),
    )
    assert plan.decisions[0].savings_per_hour == 0.199


def test_a_do_not_disrupt_daemonset_pod_keeps_an_empty_node() -> None:
    """A DaemonSet pod does not make a node busy, but one annotated do-not-disrupt holds it:
    the empty node stays, blocked, the pod named."""
    guarded = CandidatePod(app_pod("ds", 25, 0), owner_kind="DaemonSet", do_not_disrupt=True)
    node = candidate("n1", "c4.large", (guarded,), created=0)
    plan = plan_disruption(snapshot([node], [nodepool("default", 30.0)]), at(600))
    assert plan.decisions == ()
    assert blocked_events(plan) == {"n1": "DisruptionBlocked: do-not-disrupt pod default/ds"}


def test_a_nominated_until_with_no_nominated_pods_does_not_keep_an_empty_node() -> None:
    """A nomination window still open but no pod nominated: the node is not nominated, and
    goes as Empty."""
    node = dataclasses.replace(
        candidate("n1", "c4.large", created=0), nominated_pods=0, nominated_until=at(900)
    )
    plan = plan_disruption(snapshot([node], [nodepool("default", 30.0)]), at(600))
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(DisruptionReason.EMPTY, ("n1",))]
    assert plan.blocked == ()


# -- budgets ----------------------------------------------------------------------------------


def test_of_two_budgets_allowing_as_few_the_first_is_named() -> None:
    """Budgets of 0 nodes for every reason and 0 for Empty: the empty node is blocked, and the
    message names the first of the two (the later one limits no further)."""
    budgets = (Budget(nodes=0, percent=None), Budget(nodes=0, percent=None, reasons=EMPTY_ONLY))
    node = candidate("n1", "c4.large", created=0)
    plan = plan_disruption(snapshot([node], [nodepool("default", 30.0, budgets=budgets)]), at(600))
    assert plan.decisions == ()
    assert blocked_events(plan) == {
        "n1": "DisruptionBlocked: budget nodes: 0 of NodePool default allows 0 more Empty "
        "disruption(s) now"
    }


def test_a_decision_whose_node_pool_is_gone_no_longer_holds() -> None:
    """An Empty decision validated once the node's NodePool is gone from the snapshot: a
    NodePool that is not there lets nothing go, so it is refused, and says so."""
    node = candidate("n1", "c4.large", created=0, nodepool="gone")
    (decision,) = plan_disruption(snapshot([node], [nodepool("gone", 30.0)]), at(600)).decisions
    assert decision.reason is DisruptionReason.EMPTY
    verdict = validate(decision, snapshot([node], [nodepool("default", 30.0)]), at(615))
    assert verdict.is_valid is False
    assert verdict.reason == "DisruptionBlocked: NodePool gone not found"


def test_a_wave_names_no_budget_for_a_node_pool_without_one() -> None:
    """n0 in NodePool ``free`` (no budget), n1 and n2 in ``default`` (one node at a time): the
    3 -> 1 merge goes in waves, n0 and n1 now, n2 later; the note names the budget of
    ``default`` and says that ``free`` has none."""
    nodes = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1000)),), nodepool=name)
        for i, name in enumerate(["free", "default", "default"])
    ]
    pools = [
        nodepool("free", 30.0),
        nodepool("default", 30.0, budgets=(Budget(nodes=1, percent=None),)),
    ]
    (decision,) = plan_disruption(snapshot(nodes, pools), at(600)).decisions
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))
    assert decision.message.endswith(
        "; in waves (budget nodes: 1 of NodePool default lets 1 go now; NodePool free (no "
        "budget) lets 1 go now): n0, n1 now, n2 later, each a delete once the replacements run "
        "(the cheapest, n2, saves $0.1000/h alone)"
    )


# -- the node a candidate is to the simulation ------------------------------------------------


def guarded_host(name: str, **fields: Any) -> Candidate:
    """A c4.xlarge with 3.4 CPU free whose one pod is do-not-disrupt (it never goes itself)."""
    keeper = CandidatePod(app_pod(f"{name}-keeper"), do_not_disrupt=True)
    host = candidate(name, "c4.xlarge", (keeper,), created=0)
    return dataclasses.replace(host, **fields)


def test_a_pod_moves_onto_a_candidate_whose_labels_it_selects() -> None:
    """small's pod selects team=blue; host carries that label and has room: small is deleted,
    its pod moving to host (a new node could not carry the label)."""
    mover = CandidatePod(app_pod("mover", node_selector={"team": "blue"}))
    small = candidate("small", "c4.large", (mover,), created=0)
    host = guarded_host("host", labels={**guarded_host("host").labels, "team": "blue"})
    plan = plan_disruption(snapshot([small, host], [consolidating()]), at(600))
    assert [(d.reason, d.nodes, d.replacements) for d in plan.decisions] == [
        (DisruptionReason.UNDERUTILIZED, ("small",), ())
    ]


def test_a_pod_does_not_move_onto_a_candidate_whose_taint_it_does_not_tolerate() -> None:
    """host has room but a NoSchedule taint small's pod does not tolerate, and nothing is
    cheaper than small's c4.large: small stays, Unconsolidatable."""
    small = candidate("small", "c4.large", (CandidatePod(app_pod("mover")),), created=0)
    host = guarded_host("host", taints=(Taint("dedicated", TaintEffect.NO_SCHEDULE, "db"),))
    plan = plan_disruption(snapshot([small, host], [consolidating()]), at(600))
    assert plan.decisions == ()
    assert blocked_events(plan) == {
        "small": "Unconsolidatable: would cost more: no replacement saves 10% and $0.01/h on "
        "$0.1000/h",
        "host": "DisruptionBlocked: do-not-disrupt pod default/host-keeper",
    }
