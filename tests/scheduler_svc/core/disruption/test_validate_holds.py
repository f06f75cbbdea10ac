"""validate() and the pass's budget accounting at their edges: the room a replacement holds, a
pod event at the decision's own instant, budgets counted per node and per reason, a merge in
waves re-checked under changed options or budgets, and the catalog cache it is handed."""

from __future__ import annotations

import dataclasses

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption import (
    Budget,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionReason,
    Validation,
    plan_disruption,
    validate,
)
from scheduler_svc.core.disruption.methods import room_held_message
from tests.scheduler_svc.core.disruption.builders import at, candidate, one_cpu_nodes, snapshot
from tests.scheduler_svc.core.disruption.test_methods import consolidating
from tests.scheduler_svc.core.disruption.test_validate import (
    DECIDED,
    LATER,
    ROOMY,
    SMALL,
    delete_small,
)

ONE_AT_A_TIME = Budget(nodes=1, percent=None)
TWO_AT_A_TIME = Budget(nodes=2, percent=None)


def test_validation_builds_its_catalog_indexes_in_the_cache_it_is_given() -> None:
    """The provisioner hands validate() its CatalogCache: the simulation's index lands there."""
    catalogs = CatalogCache()
    state = snapshot([SMALL, ROOMY], [consolidating()])
    assert validate(delete_small(), state, LATER, catalogs=catalogs) == Validation(True)
    assert catalogs.builds >= 1


def test_a_node_that_now_holds_room_for_a_deferred_node_is_refused() -> None:
    """small became a replacement holding room for roomy's NodeClaim (a deferred node of a
    merge in waves) until 09:15: deleting it now would take that room, so the decision fails
    and names the hold. Once the hold has ended it holds again."""
    holding = dataclasses.replace(
        SMALL, room_held_for=frozenset({"default-roomy", "default-gone"}), room_held_until=at(900)
    )
    state = snapshot([holding, ROOMY], [consolidating()])
    assert validate(delete_small(), state, LATER) == Validation(
        False,
        "DisruptionBlocked: holds room for default-roomy, deferred by a consolidation in "
        "waves until 2026-01-05T09:15:00+00:00",
    )
    assert validate(delete_small(), state, at(900)) == Validation(True)


def test_a_pod_event_at_the_decision_instant_does_not_invalidate_it() -> None:
    """The decision saw the pods as they were at its instant; only a later event changes them."""
    same_instant = dataclasses.replace(SMALL, last_pod_event_at=DECIDED)
    state = snapshot([same_instant, ROOMY], [consolidating()])
    assert validate(delete_small(), state, LATER) == Validation(True)


def test_the_room_held_message_names_every_claim_in_order() -> None:
    """Without an end time the message says only what the room is held for, claims sorted."""
    replacement = candidate("r", "c4.xlarge")
    assert room_held_message(replacement, ["default-n2", "default-n1"]) == (
        "holds room for default-n1, default-n2, deferred by a consolidation in waves"
    )


def test_a_merge_larger_than_a_narrowed_budget_is_refused() -> None:
    """Three nodes decided together need three disruptions: a budget of two since then refuses
    the merge, counting each of its nodes."""
    (decision,) = plan_disruption(snapshot(one_cpu_nodes(3), [consolidating()]), DECIDED).decisions
    assert decision.nodes == ("n0", "n1", "n2")
    narrowed = snapshot(one_cpu_nodes(3), [consolidating(budgets=(TWO_AT_A_TIME,))])
    assert validate(decision, narrowed, LATER) == Validation(
        False,
        "DisruptionBlocked: budget nodes: 2 of NodePool default allows 2 more "
        "Underutilized disruption(s) now",
    )


def test_a_budget_blocks_a_consolidation_only_when_it_names_its_reason() -> None:
    """A zero budget for Underutilized refuses the consolidation; one for Drifted does not."""
    frozen = Budget(nodes=0, percent=None, reasons=frozenset({DisruptionReason.UNDERUTILIZED}))
    blocking = snapshot([SMALL, ROOMY], [consolidating(budgets=(frozen,))])
    assert validate(delete_small(), blocking, LATER) == Validation(
        False,
        "DisruptionBlocked: budget nodes: 0 for Underutilized of NodePool default allows 0 "
        "more Underutilized disruption(s) now",
    )
    drift_only = dataclasses.replace(frozen, reasons=frozenset({DisruptionReason.DRIFTED}))
    other = snapshot([SMALL, ROOMY], [consolidating(budgets=(drift_only,))])
    assert validate(delete_small(), other, LATER) == Validation(True)


def test_a_pass_counts_each_empty_node_it_takes_against_the_budget() -> None:
    """Three empty nodes under a budget of two: two go in this pass, the third waits."""
    empty = [candidate(f"e{i}", "c4.large", created=0) for i in range(3)]
    plan = plan_disruption(snapshot(empty, [consolidating(budgets=(TWO_AT_A_TIME,))]), DECIDED)
    assert [(d.reason, d.nodes) for d in plan.decisions] == [
        (DisruptionReason.EMPTY, ("e0",)),
        (DisruptionReason.EMPTY, ("e1",)),
    ]
    assert [(b.node, b.message) for b in plan.blocked] == [
        ("e2", "budget nodes: 2 of NodePool default allows 0 more Empty disruption(s) now")
    ]


def wave_decision() -> DisruptionDecision:
    """Three 1-CPU c4.large merge into one c4.xlarge; a budget of two defers n2."""
    state = snapshot(one_cpu_nodes(3), [consolidating(budgets=(TWO_AT_A_TIME,))])
    (decision,) = plan_disruption(state, DECIDED).decisions
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))
    return decision


def test_a_wave_whose_deferred_node_would_no_longer_pay_alone_is_refused() -> None:
    """Validated under a minimum saving of $0.1005/h, the whole merge still saves enough
    ($0.101/h) but deferred n2, deleted alone later, would save only $0.10/h and stay: the wave
    is refused as the plan would refuse it."""
    state = snapshot(one_cpu_nodes(3), [consolidating(budgets=(TWO_AT_A_TIME,))])
    stricter = ConsolidationOptions(min_saving_per_hour=0.1005)
    assert validate(wave_decision(), state, LATER) == Validation(True)
    assert validate(wave_decision(), state, LATER, stricter) == Validation(
        False,
        "in waves, deferred n2 alone would save only $0.1000/h (needs $0.1005/h) and would stay",
    )
