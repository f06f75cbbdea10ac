"""Properties of any disruption pass: it never breaks a budget or a PDB, never takes a node
holding a do-not-disrupt pod, every consolidation replacement is strictly cheaper, and every
consolidation holds when validated against the snapshot it came from."""

from __future__ import annotations

from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_svc.core import LabelSelector
from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionPlan,
    DisruptionReason,
    DisruptionSnapshot,
    PodDisruptionBudget,
    plan_disruption,
    validate,
)
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    candidate,
    pool,
    snapshot,
)

TYPES = [t.name for t in CATALOG]
APPS = ("web", "api", "batch")
OWNERS = ["ReplicaSet"] * 8 + ["DaemonSet", None]


@st.composite
def clusters(draw: st.DrawFn) -> DisruptionSnapshot:
    nodes: list[Candidate] = []
    for i in range(draw(st.integers(1, 7))):
        members = []
        for j in range(draw(st.integers(0, 5))):
            app = draw(st.sampled_from(APPS))
            pod = app_pod(
                f"n{i}-{j}", draw(st.sampled_from([100, 250, 500, 1000])), labels={"app": app}
            )
            members.append(
                CandidatePod(
                    pod,
                    owner_kind=draw(st.sampled_from(OWNERS)),
                    do_not_disrupt=draw(st.integers(0, 15)) == 0,
                )
            )
        nodes.append(
            candidate(
                f"n{i}",
                draw(st.sampled_from(TYPES)),
                members,
                created=draw(st.sampled_from([0, 3000])),
                last_event=draw(st.sampled_from([None, 100, 3500])),
                capacity_type=draw(st.sampled_from(["on-demand", "spot"])),
            )
        )
    budget = draw(
        st.sampled_from(
            [
                Budget(),
                Budget(nodes=0, percent=None),
                Budget(nodes=1, percent=None),
                Budget(percent=50),
                Budget(nodes=2, percent=None, reasons=frozenset({DisruptionReason.EMPTY})),
            ]
        )
    )
    pdbs = tuple(
        PodDisruptionBudget(
            "default", app, LabelSelector.of({"app": app}), draw(st.sampled_from([0, 1, 1, 1]))
        )
        for app in APPS
    )
    disrupting = frozenset(n.name for n in nodes if draw(st.booleans()) and draw(st.booleans()))
    nodepool = pool(
        consolidation_policy=draw(st.sampled_from(list(ConsolidationPolicy))),
        consolidate_after_seconds=draw(st.sampled_from([0.0, 60.0])),
        expire_after_seconds=draw(st.sampled_from([None, 3600.0])),
        budgets=(budget,),
    )
    return snapshot(nodes, [nodepool], pdbs=pdbs, disrupting=disrupting)


def check(state: DisruptionSnapshot, plan: DisruptionPlan, now: datetime) -> None:
    taken = [n for d in plan.decisions for n in d.nodes]
    assert len(taken) == len(set(taken)), "a node is decided twice"
    assert not set(taken) & state.disrupting
    nodepool = state.nodepools[0]
    # Budgets count every node disrupting when a decision is made, whatever its reason.
    chosen = len(state.disrupting)
    for decision in plan.decisions:
        chosen += len(decision.nodes)
        expired = decision.reason is DisruptionReason.EXPIRED
        ceilings = [
            b.allowed(len(state.candidates))
            for b in nodepool.disruption.budgets
            if (not b.reasons if expired else b.applies_to(decision.reason))
        ]
        assert chosen <= min(ceilings, default=chosen), f"budget broken by {decision}"
    for decision in plan.decisions:
        for name in decision.nodes:
            node = state.candidate(name)
            assert node is not None
            assert not any(p.do_not_disrupt for p in node.pods), "took a do-not-disrupt pod"
            for pod in node.reschedulable_pods():
                for pdb in state.pdbs:
                    assert not (pdb.covers(pod.pod) and pdb.disruptions_allowed == 0), "broke a PDB"
        if decision.reason is DisruptionReason.UNDERUTILIZED:
            assert validate(decision, state, now).is_valid, "does not hold on its own snapshot"
            assert decision.new_price_per_hour < decision.old_price_per_hour
            for claim in decision.replacements:
                assert all(o.price_per_hour < decision.old_price_per_hour for o in claim.offerings)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([60, 3700]))
def test_a_pass_keeps_every_promise(state: DisruptionSnapshot, seconds: int) -> None:
    """No decision breaks a budget or a PDB, takes a do-not-disrupt pod, costs more, or fails
    validation on an unchanged snapshot."""
    check(state, plan_disruption(state, at(seconds)), at(seconds))


def _held(state: DisruptionSnapshot, node: Candidate) -> bool:
    """A do-not-disrupt pod or a PDB allowing no disruption keeps the node where it is."""
    return any(p.do_not_disrupt for p in node.pods) or any(
        pdb.covers(p.pod) and pdb.disruptions_allowed == 0
        for p in node.reschedulable_pods()
        for pdb in state.pdbs
    )


def _budget_full(state: DisruptionSnapshot, plan: DisruptionPlan, reason: DisruptionReason) -> bool:
    """Whether the NodePool's budgets for ``reason`` allow no more nodes after ``plan``
    (expiry counts only budgets naming no reason, as ``check`` does)."""
    disruption = state.nodepools[0].disruption
    chosen = len(state.disrupting) + sum(len(d.nodes) for d in plan.decisions)
    ceilings = [
        b.allowed(len(state.candidates))
        for b in disruption.budgets
        if (not b.reasons if reason is DisruptionReason.EXPIRED else b.applies_to(reason))
    ]
    return chosen >= min(ceilings, default=chosen + 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([60, 3700]))
def test_a_pass_acts_on_every_due_node_the_budgets_allow(
    state: DisruptionSnapshot, seconds: int
) -> None:
    """Liveness: an empty node quiet for consolidateAfter that nothing holds goes unless the
    Empty budget is used up; when a node has expired and nothing holds it, the pass replaces
    one expired node (one per pass) unless the budget is used up."""
    now = at(seconds)
    plan = plan_disruption(state, now)
    taken = {n for d in plan.decisions for n in d.nodes}
    disruption = state.nodepools[0].disruption
    free = [n for n in state.candidates if n.name not in state.disrupting and not _held(state, n)]
    wait = disruption.consolidate_after_seconds
    for node in free:
        quiet = (now - node.quiet_since()).total_seconds()
        if not node.reschedulable_pods() and wait is not None and quiet >= wait:
            assert node.name in taken or _budget_full(state, plan, DisruptionReason.EMPTY), (
                f"empty node {node.name} left with budget to spare"
            )
    limit = disruption.expire_after_seconds
    expired = [
        n
        for n in free
        if n.name not in taken
        and limit is not None
        and (now - n.created_at).total_seconds() >= limit
    ]
    if expired:
        replaced = [d for d in plan.decisions if d.reason is DisruptionReason.EXPIRED]
        assert replaced or _budget_full(state, plan, DisruptionReason.EXPIRED), (
            f"expired nodes {[n.name for n in expired]} left with budget to spare"
        )
