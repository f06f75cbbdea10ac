"""validate(): every way a disruption decision stops holding after the wait is refused, with
the reason a person reads, and a decision that still holds is approved."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler_svc.core import LabelSelector, Node, Resources
from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionDecision,
    DisruptionReason,
    DisruptionSnapshot,
    PodDisruptionBudget,
    Validation,
    plan_disruption,
    validate,
)
from tests.scheduler_svc.core.builders import GIB
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    candidate,
    pods,
    snapshot,
)
from tests.scheduler_svc.core.disruption.test_methods import consolidating

DECIDED = at(600)
LATER = at(615)


SMALL = candidate("small", "c4.large", pods("s", 2), created=0)
ROOMY = candidate("roomy", "t3a.2xlarge", pods("r", 2), created=0, last_event=590)


def delete_small() -> DisruptionDecision:
    """The decision of the seed case: small's two pods move to roomy, small goes."""
    (decision,) = plan_disruption(snapshot([SMALL, ROOMY], [consolidating()]), DECIDED).decisions
    assert (decision.reason, decision.nodes, decision.replacements) == (
        DisruptionReason.UNDERUTILIZED,
        ("small",),
        (),
    )
    return decision


def with_small(small: Candidate, **kwargs: Any) -> DisruptionSnapshot:
    return snapshot([small, ROOMY], [consolidating()], **kwargs)


def test_an_unchanged_consolidation_holds() -> None:
    """Nothing changed since the decision: validate approves it."""
    verdict = validate(delete_small(), with_small(SMALL), LATER)
    assert verdict.is_valid
    assert verdict.reason == ""


HELD = CandidatePod(app_pod("db"), do_not_disrupt=True)
BARE = CandidatePod(app_pod("bare"), owner_kind=None)
NO_EVICTION = PodDisruptionBudget("default", "web", LabelSelector.of({"app": "app"}), 0)
IN_FLIGHT = Node(
    "claim-1",
    {"daiku.dev/nodepool": "default"},
    allocatable=Resources(2000, GIB),
    is_in_flight=True,
)


@pytest.mark.parametrize(
    ("later", "reason"),
    [
        pytest.param(snapshot([ROOMY], [consolidating()]), "node small is gone", id="gone"),
        pytest.param(
            with_small(SMALL, disrupting=frozenset({"small"})),
            "node small is already being disrupted",
            id="already-disrupting",
        ),
        pytest.param(
            with_small(dataclasses.replace(SMALL, last_pod_event_at=at(610))),
            "pods changed on node small since the decision",
            id="pod-event",
        ),
        pytest.param(
            with_small(
                dataclasses.replace(SMALL, pods=(*SMALL.pods, HELD), last_pod_event_at=at(610))
            ),
            "pods changed on node small since the decision",
            id="do-not-disrupt-pod-arrived",
        ),
        pytest.param(
            # The annotation set on a pod already there: no bind event, the pod holds the node.
            with_small(dataclasses.replace(SMALL, pods=(*SMALL.pods[1:], HELD))),
            "DisruptionBlocked: do-not-disrupt pod default/db",
            id="do-not-disrupt-annotation",
        ),
        pytest.param(
            with_small(SMALL, pdbs=(NO_EVICTION,)),
            "DisruptionBlocked: pdb default/web (pod default/s-0; no disruption allowed now)",
            id="pdb",
        ),
        pytest.param(
            with_small(dataclasses.replace(SMALL, pods=(*SMALL.pods[1:], BARE))),
            "DisruptionBlocked: pod default/bare has no controller and would not come back",
            id="bare-pod",
        ),
        pytest.param(
            snapshot([SMALL, ROOMY], [consolidating(budgets=(Budget(nodes=0, percent=None),))]),
            "DisruptionBlocked: budget nodes: 0 of NodePool default allows 0 more "
            "Underutilized disruption(s) now",
            id="budget",
        ),
        pytest.param(
            with_small(SMALL, pending_pods=(app_pod("new"),)),
            "scale-up in progress",
            id="pending-pod",
        ),
        pytest.param(
            with_small(SMALL, other_nodes=(IN_FLIGHT,)), "scale-up in progress", id="in-flight"
        ),
        pytest.param(
            snapshot(
                [SMALL, ROOMY, candidate("young", "c4.large", is_initialized=False)],
                [consolidating()],
            ),
            "scale-up in progress",
            id="uninitialized-node",
        ),
    ],
)
def test_a_consolidation_that_no_longer_holds_is_refused(
    later: DisruptionSnapshot, reason: str
) -> None:
    """Gone, already disrupting, pods changed, a blocker (do-not-disrupt, PDB, bare pod), the
    budget, or a scale-up under way: validate refuses and says which."""
    verdict = validate(delete_small(), later, LATER)
    assert verdict.is_valid is False
    assert verdict.reason == reason


def test_a_consolidation_whose_pods_no_longer_fit_is_refused() -> None:
    """roomy filled up since the decision: small's pods would need a new node, which costs more
    than small."""
    full = dataclasses.replace(ROOMY, pods=pods("r", 15))
    verdict = validate(delete_small(), snapshot([SMALL, full], [consolidating()]), LATER)
    assert verdict.is_valid is False
    assert verdict.reason.startswith("would cost more")


def test_a_replacement_that_became_dearer_is_refused() -> None:
    """A c4.2xlarge whose three 1-cpu pods go to a c4.xlarge at $0.199/h is refused once the
    c4.xlarge costs $0.25/h (still a saving, but more than decided)."""
    cores = tuple(CandidatePod(app_pod(f"b-{i}", 1000, 1024)) for i in range(3))
    big = candidate("big", "c4.2xlarge", cores, created=0)
    (decision,) = plan_disruption(snapshot([big], [consolidating()]), DECIDED).decisions
    assert [r.instance_type for r in decision.replacements] == ["c4.xlarge"]
    dearer = tuple(
        dataclasses.replace(
            t,
            offerings=tuple(dataclasses.replace(o, price_per_hour=0.25) for o in t.offerings),
        )
        if t.name == "c4.xlarge"
        else t
        for t in CATALOG
        # Without c4.large: the solver would now pick three of them ($0.30/h) over one
        # c4.xlarge, and the decision would fail for needing three nodes instead.
        if t.name != "c4.large"
    )
    assert validate(decision, snapshot([big], [consolidating()]), LATER).is_valid
    verdict = validate(decision, snapshot([big], [consolidating()], catalog=dearer), LATER)
    assert verdict.is_valid is False
    assert verdict.reason == "the replacement now costs $0.2500/h, more than the $0.1990/h decided"


def test_an_empty_node_that_got_a_pod_is_refused() -> None:
    """An Empty decision no longer holds once a pod runs on the node."""
    daemon = CandidatePod(app_pod("ds", 25, 0), owner_kind="DaemonSet")
    empty = candidate("n1", "c4.xlarge", (daemon,), created=0, last_event=100)
    state = snapshot([empty], [consolidating(consolidation_policy=ConsolidationPolicy.WHEN_EMPTY)])
    (decision,) = plan_disruption(state, DECIDED).decisions
    assert decision.reason is DisruptionReason.EMPTY
    assert validate(decision, state, LATER) == Validation(True, "")
    busy = dataclasses.replace(empty, pods=(daemon, *pods("p", 1)))
    later = snapshot([busy], [consolidating(consolidation_policy=ConsolidationPolicy.WHEN_EMPTY)])
    verdict = validate(decision, later, LATER)
    assert (verdict.is_valid, verdict.reason) == (False, "node n1 is no longer empty")


def test_an_expired_node_is_refused_only_for_a_blocker() -> None:
    """An Expired decision holds whatever the load, but not once a do-not-disrupt pod runs on
    the node (bare pods do not hold an expired node)."""
    old = candidate("old", "c4.xlarge", (*pods("p", 2), BARE), created=0)
    expiring = consolidating(expire_after_seconds=300.0, consolidate_after_seconds=None)
    (decision,) = plan_disruption(snapshot([old], [expiring]), DECIDED).decisions
    assert decision.reason is DisruptionReason.EXPIRED
    assert validate(
        decision, snapshot([old], [expiring], pending_pods=(app_pod("x"),)), LATER
    ).is_valid
    held = dataclasses.replace(old, pods=(*old.pods, HELD))
    verdict = validate(decision, snapshot([held], [expiring]), LATER)
    assert (verdict.is_valid, verdict.reason) == (
        False,
        "DisruptionBlocked: do-not-disrupt pod default/db",
    )
