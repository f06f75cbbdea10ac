"""Consolidation in waves (decision 0021): a merge larger than the budgets launches all its
replacements, disrupts now as many nodes as the budgets allow, and defers the others, each a
single-node delete of a later pass. Pure core, clock passed in (``at``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from scheduler_svc.core.disruption import (
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    ConsolidationPolicy,
    DisruptionDecision,
    DisruptionReason,
    DisruptionSnapshot,
    explain_node,
    plan_disruption,
    validate,
)
from scheduler_svc.core.disruption.settings import Budget
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    candidate,
    consolidating,
    one_cpu_nodes,
    snapshot,
)
from tests.scheduler_svc.core.disruption.test_multi_node import LIVE_40, _default_pool_cluster

PLAN_40 = 0.2491  # what `daiku plan` buys for the 40 pods of LIVE_40 (USD/h)
EVERY_OTHER = ["m1", "m2", "m3", "l0", "l1", "x0", "x1"]


def live_40(tmp_path: Path, budget: Budget) -> DisruptionSnapshot:
    """LIVE_40 (8 spot nodes, $0.2781/h) quiet since T0, under ``budget``."""
    return _default_pool_cluster(tmp_path, LIVE_40, budget)[1]


def the_wave(state: DisruptionSnapshot, seconds: float = 600) -> DisruptionDecision:
    (decision,) = plan_disruption(state, at(seconds)).decisions
    return decision


def test_a_merge_larger_than_the_budget_goes_in_waves(tmp_path: Path) -> None:
    """The default 10 % lets one of eight nodes go at a time. No merge within it pays, and no
    single node does, so the 8 -> 4 merge goes in waves: its four replacements now, m0 now,
    the seven others deferred. The prices are the whole merge's."""
    decision = the_wave(live_40(tmp_path, Budget(percent=10)))
    assert decision.reason is DisruptionReason.UNDERUTILIZED
    assert decision.nodes == ("m0",)
    assert list(decision.deferred) == EVERY_OTHER
    assert decision.deferred_nodeclaims == tuple(EVERY_OTHER)
    assert sorted(c.instance_type for c in decision.replacements) == [
        "c6g.4xlarge",
        "m6g.large",
        "m6g.large",
        "m6g.large",
    ]
    assert decision.old_price_per_hour == pytest.approx(0.2781, abs=1e-4)
    assert decision.new_price_per_hour == pytest.approx(PLAN_40, abs=1e-4)
    assert decision.needs_validation
    # Held for the validation wait plus 5 minutes per deferred node.
    assert decision.room_held_until == at(600 + 15 + 7 * 300)
    assert decision.message.startswith(
        "Underutilized: replace m0, m1, m2, m3, l0, l1, x0, x1 ($0.2781/h) by 4 nodes"
    )
    assert decision.message.endswith(
        "; in waves (budget nodes: 10% of NodePool default lets 1 go now): m0 now, "
        "m1, m2, m3, l0, l1, x0, x1 later, each a delete once the replacements run "
        "(the cheapest, m1, saves $0.0117/h alone)"
    )


@dataclass
class LiveCluster:
    """LIVE_40 acted on decision after decision, as the controller and the default-scheduler
    would: a decision's nodes go, its replacements run (holding room when it deferred nodes),
    the moved 500m pods land on the replacements first, then on any free slot (every pod has
    the same shape, so slots are exact)."""

    tmp_path: Path
    layout: list[tuple[str, str, int]] = field(default_factory=lambda: list(LIVE_40))
    holds: dict[str, tuple[frozenset[str], datetime | None]] = field(default_factory=dict)
    created: dict[str, float] = field(default_factory=dict)

    def snapshot(self) -> DisruptionSnapshot:
        state = _default_pool_cluster(self.tmp_path, self.layout, Budget(percent=10))[1]
        nodes = []
        for node in state.candidates:
            since = at(self.created.get(node.name, 0.0))
            held_for, until = self.holds.get(node.name, (frozenset(), None))
            nodes.append(
                dataclasses.replace(
                    node,
                    created_at=since,
                    last_pod_event_at=since,
                    room_held_for=held_for,
                    room_held_until=until,
                )
            )
        return dataclasses.replace(state, candidates=tuple(nodes))

    def act(self, decision: DisruptionDecision, seconds: float) -> None:
        moving = sum(count for name, _, count in self.layout if name in decision.nodes)
        kept = [row for row in self.layout if row[0] not in decision.nodes]
        for i, claim in enumerate(decision.replacements):
            name = f"r{int(seconds)}-{i}"
            self.created[name] = seconds
            if decision.deferred:
                self.holds[name] = (
                    frozenset(decision.deferred_nodeclaims),
                    decision.room_held_until,
                )
            kept.append((name, claim.instance_type, 0))
        state = _default_pool_cluster(self.tmp_path, kept)[1]
        slots = {
            c.name: min(
                c.allocatable.as_mapping()["cpu"] // 500,
                c.allocatable.as_mapping()["memory"] // (512 << 20),
            )
            for c in state.candidates
        }
        placed = {name: count for name, _, count in kept}
        for name, _, count in sorted(kept, key=lambda row: not row[0].startswith("r")):
            take = min(moving, slots[name] - count)
            placed[name] += take
            moving -= take
        assert moving == 0
        self.layout = [(name, type_name, placed[name]) for name, type_name, _ in kept]


def test_the_deferred_nodes_go_one_delete_per_pass_and_end_at_the_plan(tmp_path: Path) -> None:
    """Pass after pass (31 s apart, past consolidateAfter), each within the 10 % budget: after
    the wave, every decision is a delete of deferred nodes, the held replacements stay (three
    of them empty until the deferred pods come), and the cluster ends at the plan's price."""
    cluster = LiveCluster(tmp_path)
    seconds = 600.0
    decisions: list[DisruptionDecision] = []
    for _ in range(12):
        state = cluster.snapshot()
        plan = plan_disruption(state, at(seconds))
        if not plan.decisions:
            break
        (decision,) = plan.decisions
        assert validate(decision, state, at(seconds + 15)).is_valid
        decisions.append(decision)
        cluster.act(decision, seconds)
        seconds += 31
    first, *later = decisions
    assert first.deferred
    assert later
    for decision in later:
        assert not decision.replacements, decision.message
        assert set(decision.nodes) <= set(first.deferred), decision.message
    assert {name for d in later for name in d.nodes} == set(first.deferred)
    price = sum(c.price_per_hour for c in cluster.snapshot().candidates)
    assert price == pytest.approx(PLAN_40, abs=1e-4)


def test_a_replacement_holds_its_room_while_a_deferred_node_remains() -> None:
    """An empty replacement bought for deferred n2 is not deleted as Empty while n2 is there
    and its hold lasts; n2 goes first (its pod fits on the replacement). Without n2, or after
    the hold, the replacement is an ordinary empty node."""
    deferred = candidate("n2", "c4.large", (CandidatePod(app_pod("p2", 1000)),))
    replacement = candidate(
        "r",
        "c4.xlarge",
        created=615,
        room_held_for=frozenset({"default-n2"}),
        room_held_until=at(915),
    )
    pools = [consolidating()]
    plan = plan_disruption(snapshot([deferred, replacement], pools), at(700))
    (decision,) = plan.decisions
    assert decision.nodes == ("n2",)
    assert not decision.replacements
    assert {b.node: b.message for b in plan.blocked}["r"] == (
        "holds room for default-n2, deferred by a consolidation in waves until "
        "2026-01-05T09:15:15+00:00"
    )
    (gone,) = plan_disruption(snapshot([replacement], pools), at(700)).decisions
    assert (gone.reason, gone.nodes) == (DisruptionReason.EMPTY, ("r",))
    late = plan_disruption(snapshot([deferred, replacement], pools), at(915)).decisions
    assert [(d.reason, d.nodes) for d in late] == [(DisruptionReason.EMPTY, ("r",))]


def test_a_merge_whose_straggler_would_not_pay_alone_is_refused() -> None:
    """Three 1-CPU c4.large ($0.10/h each) -> one c4.xlarge saves $0.101/h; a budget of two
    would defer n2. With a minimum saving of $0.1005/h, n2 deleted alone ($0.10/h) would not
    clear it and would stay, the cluster then dearer than before: refused, and said so."""
    options = ConsolidationOptions(min_saving_per_hour=0.1005)
    budget = consolidating(budgets=(Budget(nodes=2, percent=None),))
    plan = plan_disruption(snapshot(one_cpu_nodes(3), [budget]), at(600), options)
    assert plan.decisions == ()
    assert (
        "(3: in waves, deferred n2 alone would save only $0.1000/h (needs $0.1005/h) and "
        "would stay)"
    ) in {b.node: b.message for b in plan.blocked}["n0"]
    # The same merge, its straggler clearing the thresholds, goes in waves.
    (decision,) = plan_disruption(snapshot(one_cpu_nodes(3), [budget]), at(600)).decisions
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))


def _with(state: DisruptionSnapshot, name: str, **changes: object) -> DisruptionSnapshot:
    nodes: Sequence[Candidate] = [
        dataclasses.replace(c, **changes) if c.name == name else c  # type: ignore[arg-type]
        for c in state.candidates
    ]
    return dataclasses.replace(state, candidates=tuple(nodes))


def test_validating_a_wave_rechecks_the_whole_merge(tmp_path: Path) -> None:
    """Only m0 goes now, but the decision holds only while the whole merge does: a deferred
    node whose pods changed, that is gone or that a do-not-disrupt pod now holds invalidates it;
    so does a budget that no longer lets m0 go."""
    state = live_40(tmp_path, Budget(percent=10))
    decision = the_wave(state)
    later = at(615)
    assert validate(decision, state, later).is_valid
    moved = _with(state, "x1", last_pod_event_at=at(610))
    assert validate(decision, moved, later).reason == "pods changed on node x1 since the decision"
    gone = dataclasses.replace(state, candidates=state.candidates[:-1])
    assert validate(decision, gone, later).reason == "node x1 is gone"
    x1 = state.candidates[-1]
    held = (*x1.pods, CandidatePod(app_pod("batch"), do_not_disrupt=True))
    assert validate(decision, _with(state, "x1", pods=held), later).reason == (
        "DisruptionBlocked: do-not-disrupt pod default/batch"
    )
    frozen = live_40(tmp_path, Budget(nodes=0, percent=None))
    assert validate(decision, frozen, later).reason.startswith(
        "DisruptionBlocked: budget nodes: 0 of NodePool default allows 0 more"
    )


def test_a_zero_budget_still_blocks_everything(tmp_path: Path) -> None:
    """A budget of one lets the wave start; a budget of zero lets nothing go, waves included."""
    assert the_wave(live_40(tmp_path, Budget(nodes=1, percent=None))).deferred
    plan = plan_disruption(live_40(tmp_path, Budget(nodes=0, percent=None)), at(600))
    assert plan.decisions == ()
    assert len(plan.blocked) == len(LIVE_40)
    for blocked in plan.blocked:
        assert blocked.message == (
            "budget nodes: 0 of NodePool default allows no more Underutilized disruptions now"
        )


def test_a_balanced_pool_scores_the_whole_merge_not_the_wave(tmp_path: Path) -> None:
    """m0 alone disrupts one pod, but the merge moves all 40 to save 10 % of the pool: its
    Balanced score (0.10 < 0.50) refuses it."""
    state = live_40(tmp_path, Budget(percent=10))
    (pool,) = state.nodepools
    balanced = dataclasses.replace(
        pool,
        disruption=dataclasses.replace(
            pool.disruption, consolidation_policy=ConsolidationPolicy.BALANCED
        ),
    )
    plan = plan_disruption(dataclasses.replace(state, nodepools=(balanced,)), at(600))
    assert plan.decisions == ()
    message = {b.node: b.message for b in plan.blocked}["m0"]
    assert "(8: Balanced score 0.10 < 0.50" in message


def test_the_hold_counts_from_the_decision() -> None:
    """The replacements wait the validation wait plus 5 minutes per deferred node."""
    budget = consolidating(budgets=(Budget(nodes=2, percent=None),))
    decision = the_wave(snapshot(one_cpu_nodes(3), [budget]))
    assert decision.room_held_until == at(600) + timedelta(seconds=15 + 300)


def test_explain_says_a_deferred_node_goes_in_a_later_wave(tmp_path: Path) -> None:
    explanation = explain_node(live_40(tmp_path, Budget(percent=10)), "x1", at(600))
    assert explanation.is_going_away
    assert explanation.verdict.startswith(
        "going away in a later wave: Underutilized: replace m0, m1, m2, m3, l0, l1, x0, x1"
    )


def test_a_merge_in_waves_waits_for_its_nodes_to_be_quiet_for_ten_minutes(tmp_path: Path) -> None:
    """A wave spans several passes: it starts only on nodes quiet for
    ``waves_min_quiet_seconds`` (600 s), not on a cluster still changing."""
    state = live_40(tmp_path, Budget(percent=10))
    assert plan_disruption(state, at(599)).decisions == ()
    assert the_wave(state, 600).deferred
    patient = ConsolidationOptions(waves_min_quiet_seconds=1200)
    assert plan_disruption(state, at(600), patient).decisions == ()
