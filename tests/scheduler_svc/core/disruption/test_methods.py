"""One disruption pass: empty, expired, drifted and underutilized nodes, with their blockers."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler_svc.core import InstanceType, LabelSelector, Node, NodePool, Offering, Resources
from scheduler_svc.core.disruption import (
    Budget,
    CandidatePod,
    ConsolidationOptions,
    ConsolidationPolicy,
    DisruptionReason,
    DisruptionSnapshot,
    NodeClassState,
    NodePoolState,
    PodDisruptionBudget,
    explain_node,
    plan_disruption,
    validate,
)
from scheduler_svc.core.requirements import Operator, Requirement
from tests.scheduler_svc.core.builders import GIB
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    candidate,
    pods,
    pool,
    snapshot,
)

DAEMON = CandidatePod(app_pod("ds", 25, 0), owner_kind="DaemonSet")
NO_EXPIRY: dict[str, Any] = {"expire_after_seconds": None}
WHEN_EMPTY = ConsolidationPolicy.WHEN_EMPTY


def decided(plan: object) -> list[tuple[str, tuple[str, ...]]]:
    return [(d.reason.value, d.nodes) for d in plan.decisions]  # type: ignore[attr-defined]


def blocked(plan: object) -> dict[str, str]:
    return {b.node: f"{b.event_reason}: {b.message}" for b in plan.blocked}  # type: ignore[attr-defined]


# -- Empty -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("consolidate_after", "quiet_seconds", "removed"),
    [(30.0, 29, False), (30.0, 30, True), (0.0, 0, True), (None, 10**6, False)],
)
def test_empty_nodes_go_after_consolidate_after(
    consolidate_after: float | None, quiet_seconds: int, removed: bool
) -> None:
    """A node with only DaemonSet pods goes once quiet for consolidateAfter (never: Never)."""
    node = candidate("n1", "c4.xlarge", (DAEMON,), created=0, last_event=100)
    state = snapshot(
        [node],
        [pool(consolidate_after_seconds=consolidate_after, budgets=(), **NO_EXPIRY)],
    )
    plan = plan_disruption(state, at(100 + quiet_seconds))
    assert decided(plan) == ([("Empty", ("n1",))] if removed else [])


def test_budgets_cap_concurrent_disruptions() -> None:
    """With a budget of 2 nodes and one node already disrupting, one more empty node goes."""
    nodes = [candidate(f"n{i}", "c4.large", (), created=0) for i in range(5)]
    state = snapshot(
        nodes,
        [pool(budgets=(Budget(nodes=2, percent=None), Budget(percent=50)), **NO_EXPIRY)],
        disrupting=frozenset({"n0"}),
    )
    plan = plan_disruption(state, at(60))
    assert decided(plan) == [("Empty", ("n1",))]
    assert set(blocked(plan)) == {"n2", "n3", "n4"}
    assert (
        "DisruptionBlocked: budget nodes: 2 of NodePool default allows 0 more"
        in blocked(plan)["n2"]
    )


def test_a_budget_for_other_reasons_does_not_block_empty() -> None:
    """A zero budget for Underutilized only leaves empty nodes free to go."""
    nodes = [candidate("n1", "c4.large", (), created=0)]
    zero = Budget(nodes=0, percent=None, reasons=frozenset({DisruptionReason.UNDERUTILIZED}))
    plan = plan_disruption(snapshot(nodes, [pool(budgets=(zero,), **NO_EXPIRY)]), at(60))
    assert decided(plan) == [("Empty", ("n1",))]


def test_an_inactive_scheduled_budget_does_not_block() -> None:
    """A zero budget scheduled for 01:00-02:00 blocks nothing at 09:00 and everything at 01:30."""
    nodes = [candidate("n1", "c4.large", (), created=0)]
    night = Budget(nodes=0, percent=None, schedule="0 1 * * *", duration_seconds=3600.0)
    state = snapshot(nodes, [pool(budgets=(night,), **NO_EXPIRY)])
    assert decided(plan_disruption(state, at(60))) == [("Empty", ("n1",))]
    assert decided(plan_disruption(state, at(16 * 3600 + 1800))) == []


# -- Expired, blockers -------------------------------------------------------------------------


def expired_state(*members: CandidatePod, **kwargs: Any) -> DisruptionSnapshot:
    node = candidate("old", "c4.xlarge", members, created=0, last_event=10)
    room = candidate("room", "t3a.2xlarge", pods("r", 1), created=3000, last_event=3500)
    settings = pool(consolidation_policy=WHEN_EMPTY, expire_after_seconds=3600.0, budgets=())
    return snapshot([node, room], [settings], **kwargs)


def test_do_not_disrupt_holds_an_expired_node() -> None:
    """An expired node with a do-not-disrupt pod stays, and says which pod holds it."""
    hold = CandidatePod(app_pod("batch"), do_not_disrupt=True)
    plan = plan_disruption(expired_state(hold), at(3600))
    assert "old" not in [n for _, ns in decided(plan) for n in ns]
    assert blocked(plan)["old"].startswith("DisruptionBlocked: do-not-disrupt pod default/batch")


@pytest.mark.parametrize(("allowed", "goes"), [(0, False), (1, True)])
def test_a_pdb_blocks_until_it_allows(allowed: int, goes: bool) -> None:
    """A PDB allowing no disruption holds the node (``pdb default/web``); once it allows, it
    goes."""
    web = PodDisruptionBudget("default", "web", LabelSelector.of({"app": "app"}), allowed)
    plan = plan_disruption(expired_state(*pods("w", 2), pdbs=(web,)), at(3600))
    if goes:
        assert decided(plan) == [("Expired", ("old",))]
        assert plan.decisions[0].replacements == ()  # the pods fit on "room"
    else:
        assert decided(plan) == []
        assert blocked(plan)["old"].startswith("DisruptionBlocked: pdb default/web")


def test_a_bare_pod_does_not_block_expiry() -> None:
    """A pod without a controller does not hold an expired node (it blocks only consolidation)."""
    bare = CandidatePod(app_pod("bare"), owner_kind=None)
    plan = plan_disruption(expired_state(bare), at(3600))
    assert decided(plan) == [("Expired", ("old",))]


# -- Drifted -----------------------------------------------------------------------------------


def test_drift_after_an_ami_change() -> None:
    """A node whose AMI is still among its EC2NodeClass's resolved AMIs stays; once the class
    resolves to a newer AMI (same selector), the node is replaced, right-sized."""
    node = candidate("n1", "c4.xlarge", pods("p", 3), created=0, image_id="ami-1")
    settings_pool = dataclasses.replace(
        pool(consolidation_policy=WHEN_EMPTY, budgets=(), **NO_EXPIRY), nodeclass="default"
    )
    resolved = NodeClassState("default", ami_ids=frozenset({"ami-1", "ami-arm-1"}))
    same = snapshot([node], [settings_pool], nodeclasses=(resolved,))
    assert decided(plan_disruption(same, at(600))) == []
    unresolved = snapshot([node], [settings_pool], nodeclasses=(NodeClassState("default"),))
    assert decided(plan_disruption(unresolved, at(600))) == []
    newer = NodeClassState("default", ami_ids=frozenset({"ami-2", "ami-arm-1"}))
    plan = plan_disruption(snapshot([node], [settings_pool], nodeclasses=(newer,)), at(600))
    assert decided(plan) == [("Drifted", ("n1",))]
    assert "AMI ami-1 is no longer selected by EC2NodeClass default" in plan.decisions[0].message
    assert [c.instance_type for c in plan.decisions[0].replacements] == ["c4.large"]


def test_drift_after_an_ec2nodeclass_launch_field_change() -> None:
    """A node stamped with the EC2NodeClass hash of its launch is replaced once a launch field
    (tags) changes."""
    from scheduler_svc.core.disruption import nodeclass_hash

    spec = {"amiFamily": "AL2023", "role": "KarpenterNodeRole", "tags": {"team": "a"}}
    old = nodeclass_hash(spec)
    new = nodeclass_hash({**spec, "tags": {"team": "b"}})
    node = candidate("n1", "c4.xlarge", pods("p", 3), created=0, nodeclass_hash=old)
    settings_pool = dataclasses.replace(
        pool(consolidation_policy=WHEN_EMPTY, budgets=(), **NO_EXPIRY), nodeclass="default"
    )
    same = snapshot([node], [settings_pool], nodeclasses=(NodeClassState("default", old),))
    assert decided(plan_disruption(same, at(600))) == []
    changed = snapshot([node], [settings_pool], nodeclasses=(NodeClassState("default", new),))
    plan = plan_disruption(changed, at(600))
    assert decided(plan) == [("Drifted", ("n1",))]
    assert "EC2NodeClass default changed since launch" in plan.decisions[0].message


def test_drift_when_requirements_exclude_the_node() -> None:
    """A NodePool that no longer allows the node's instance type drifts it; one that still
    does not."""
    node = candidate("n1", "c4.xlarge", pods("p", 1), created=0)
    for allowed, drifts in ((["c4.xlarge", "c4.large"], False), (["c4.large"], True)):
        nodepool = NodePool(
            "default",
            requirements=(
                Requirement("node.kubernetes.io/instance-type", Operator.IN, tuple(allowed)),
            ),
        )
        state = snapshot(
            [node],
            [
                NodePoolState(
                    nodepool,
                    pool(consolidation_policy=WHEN_EMPTY, budgets=(), **NO_EXPIRY).disruption,
                )
            ],
        )
        assert (decided(plan_disruption(state, at(600))) == [("Drifted", ("n1",))]) is drifts


# -- Underutilized -----------------------------------------------------------------------------


def consolidating(**kwargs: Any) -> NodePoolState:
    settings: dict[str, Any] = {
        "consolidation_policy": ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        "consolidate_after_seconds": 60.0,
        "budgets": (),
        **NO_EXPIRY,
        **kwargs,
    }
    return pool(**settings)


def test_multi_node_consolidation_merges_three_nodes_into_one() -> None:
    """Three c4.xlarge with 2 pods each become one c4.xlarge ($0.597/h -> $0.199/h)."""
    nodes = [candidate(f"n{i}", "c4.xlarge", pods(f"p{i}", 2), created=0) for i in range(3)]
    plan = plan_disruption(snapshot(nodes, [consolidating()]), at(600))
    (decision,) = plan.decisions
    assert decision.reason is DisruptionReason.UNDERUTILIZED
    assert sorted(decision.nodes) == ["n0", "n1", "n2"]
    assert [c.instance_type for c in decision.replacements] == ["c4.xlarge"]
    assert decision.savings_per_hour == pytest.approx(0.398)
    assert decision.needs_validation


def test_a_node_whose_pods_fit_elsewhere_is_deleted() -> None:
    """A node's 2 pods fit on a roomy node, so the node is deleted with no replacement."""
    small = candidate("small", "c4.large", pods("s", 2), created=0)
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 2), created=0, last_event=590)
    plan = plan_disruption(snapshot([small, roomy], [consolidating()]), at(600))
    assert [(d.nodes, d.replacements) for d in plan.decisions] == [(("small",), ())]


def test_a_delete_anywhere_comes_before_a_replacement() -> None:
    """With one node replaceable by a cheaper one and another deletable, the delete is chosen."""
    big_pods = tuple(CandidatePod(app_pod(f"b-{i}", 1500)) for i in range(2))
    replaceable = candidate("big", "c4.2xlarge", big_pods, created=0)
    deletable = candidate("small", "c4.large", pods("s", 3), created=0)
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 10), created=0, last_event=590)
    one_at_a_time = consolidating(budgets=(Budget(nodes=1, percent=None),))
    state = snapshot([replaceable, deletable, roomy], [one_at_a_time])
    plan = plan_disruption(state, at(600))
    assert "big" not in blocked(plan)  # it was replaceable, only not first
    assert [(d.nodes, d.replacements) for d in plan.decisions] == [(("small",), ())]


def test_no_consolidation_when_it_would_cost_more() -> None:
    """A full c4.xlarge has no cheaper replacement: it stays, Unconsolidatable: would cost more."""
    node = candidate("n1", "c4.xlarge", pods("p", 7), created=0)
    plan = plan_disruption(snapshot([node], [consolidating()]), at(600))
    assert plan.decisions == ()
    assert blocked(plan)["n1"].startswith("Unconsolidatable: would cost more")


@pytest.mark.parametrize(("fraction", "replaced"), [(0.10, False), (0.01, True)])
def test_only_savings_above_the_threshold_count(fraction: float, replaced: bool) -> None:
    """A node at $0.21/h replaceable by a $0.199/h one (5 %) is kept at 10 %, replaced at 1 %."""
    node = candidate("n1", "c4.2xlarge", pods("p", 6), created=0, price=0.21)
    options = ConsolidationOptions(min_saving_fraction=fraction, min_saving_per_hour=0.001)
    plan = plan_disruption(snapshot([node], [consolidating()]), at(600), options)
    assert (decided(plan) == [("Underutilized", ("n1",))]) is replaced


def spot_catalog(cheaper_spot_types: int) -> tuple[InstanceType, ...]:
    shape = Resources(4000, 8 * GIB, 110, 20 * GIB)
    return tuple(
        InstanceType(
            f"x{i}.xlarge",
            shape,
            shape,
            {"kubernetes.io/arch": "amd64"},
            (Offering("zone-a", "spot", 0.05 + i * 0.001), Offering("zone-a", "on-demand", 0.5)),
        )
        for i in range(cheaper_spot_types)
    )


@pytest.mark.parametrize(("types", "replaced"), [(14, False), (15, True)])
def test_spot_to_spot_needs_fifteen_cheaper_types(types: int, replaced: bool) -> None:
    """A spot node is replaced by a cheaper spot node only with at least 15 cheaper spot types."""
    node = candidate("n1", "c4.2xlarge", pods("p", 2), created=0, capacity_type="spot", price=0.12)
    state = snapshot([node], [consolidating()], catalog=spot_catalog(types))
    plan = plan_disruption(state, at(600))
    assert (decided(plan) == [("Underutilized", ("n1",))]) is replaced
    if replaced:
        assert {o.capacity_type for o in plan.decisions[0].replacements[0].offerings} == {"spot"}
    else:
        assert "spot->spot needs 15 cheaper spot types" in blocked(plan)["n1"]


@pytest.mark.parametrize(
    ("kwargs", "created", "last_event", "reason"),
    [
        (
            {"pending_pods": (app_pod("waiting"),)},
            0,
            None,
            "scale-up in progress (1 pod(s) pending",
        ),
        ({"other_nodes": (Node("claim-1", is_in_flight=True),)}, 0, None, "1 claim(s) in flight"),
        (
            {"candidates_extra": (candidate("booting", "c4.large", (), is_initialized=False),)},
            0,
            None,
            "1 claim(s) in flight",
        ),
        ({}, 590, None, "pods changed 10s ago (consolidateAfter 1m)"),
        ({}, 0, 570, "pods changed 30s ago (consolidateAfter 1m)"),
        # created 2 h "in the future": the API server's clock is ahead of the scheduler's
        ({}, 7800, None, "pods changed 0s ago (consolidateAfter 1m)"),
    ],
)
def test_no_churn(
    kwargs: dict[str, Any], created: int, last_event: int | None, reason: str
) -> None:
    """Underutilized nodes stay while a scale-up runs, or if launched or changed within
    consolidateAfter."""
    nodes = [
        candidate(f"n{i}", "c4.xlarge", pods(f"p{i}", 1), created=created, last_event=last_event)
        for i in range(2)
    ]
    # The parameters are shared between runs in one process (mutmut runs the suite twice):
    # read them without changing them.
    nodes += kwargs.get("candidates_extra", ())
    rest = {key: value for key, value in kwargs.items() if key != "candidates_extra"}
    plan = plan_disruption(snapshot(nodes, [consolidating()], **rest), at(600))
    assert plan.decisions == ()
    assert reason in blocked(plan)["n0"]


def test_bare_pods_block_consolidation() -> None:
    """A pod with no controller keeps an underutilized node."""
    node = candidate(
        "n1", "c4.2xlarge", (CandidatePod(app_pod("bare"), owner_kind=None),), created=0
    )
    plan = plan_disruption(snapshot([node], [consolidating()]), at(600))
    assert plan.decisions == ()
    assert "pod default/bare has no controller" in blocked(plan)["n1"]


def test_when_empty_policy_never_consolidates_underutilized_nodes() -> None:
    """Under WhenEmpty a half-empty expensive node stays."""
    node = candidate("n1", "c4.2xlarge", pods("p", 1), created=0)
    state = snapshot(
        [node], [pool(consolidation_policy=ConsolidationPolicy.WHEN_EMPTY, **NO_EXPIRY)]
    )
    assert plan_disruption(state, at(600)).decisions == ()


# -- validation --------------------------------------------------------------------------------


def test_validate_after_the_wait() -> None:
    """A consolidation holds when nothing changed; it no longer holds after a pod arrives, when a
    scale-up starts, or when its pods no longer fit elsewhere."""
    small = candidate("small", "c4.large", pods("s", 2), created=0)
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 2), created=0, last_event=590)
    state = snapshot([small, roomy], [consolidating()])
    (decision,) = plan_disruption(state, at(600)).decisions
    assert decision.nodes == ("small",)
    later = at(615)
    assert validate(decision, state, later).is_valid
    busy = dataclasses.replace(small, last_pod_event_at=at(610))
    assert validate(decision, snapshot([busy, roomy], [consolidating()]), later).reason == (
        "pods changed on node small since the decision"
    )
    scaling = snapshot([small, roomy], [consolidating()], pending_pods=(app_pod("x"),))
    assert validate(decision, scaling, later).reason == "scale-up in progress"
    full = dataclasses.replace(roomy, pods=pods("r", 15))
    verdict = validate(decision, snapshot([small, full], [consolidating()]), later)
    assert not verdict.is_valid
    assert verdict.reason.startswith("would cost more")


# -- explain -----------------------------------------------------------------------------------


def test_explain_node_says_why() -> None:
    """explain_node says a held node stays because of its pod, and an empty one goes."""
    hold = candidate(
        "held", "c4.xlarge", (CandidatePod(app_pod("db"), do_not_disrupt=True),), created=0
    )
    empty = candidate("empty", "c4.large", (DAEMON,), created=0, last_event=100)
    state = snapshot([hold, empty], [consolidating()])
    held = explain_node(state, "held", at(600))
    assert not held.is_going_away
    assert held.verdict == "stays: DisruptionBlocked: do-not-disrupt pod default/db"
    gone = explain_node(state, "empty", at(600))
    assert gone.is_going_away
    assert gone.verdict.startswith("going away: Empty: no pods for 8m20s")
    assert explain_node(state, "other", at(600)).verdict == "stays: not a node daiku launched"


def test_a_naive_now_is_refused() -> None:
    """A pass at a naive datetime fails loudly instead of comparing it with UTC schedules."""
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        plan_disruption(snapshot([]), at(0).replace(tzinfo=None))


def test_a_drifted_node_launched_with_min_values_relaxed_is_replaced_under_best_effort() -> None:
    """The scheduler's --min-values-policy reaches the simulations (Karpenter's does too): a
    drifted node whose pod only one family holds, under a NodePool asking for two families,
    gets a replacement under BestEffort; under Strict it drifts with none, its pod left to
    wait."""
    from scheduler_svc.core.disruption import ConsolidationOptions
    from scheduler_svc.core.model import MinValuesPolicy

    family = "karpenter.k8s.aws/instance-family"
    nodepool = NodePool(
        "default",
        requirements=(
            Requirement(family, Operator.IN, ("c4", "t3a"), 2),
            Requirement("node.kubernetes.io/instance-type", Operator.IN, ("c4.2xlarge",)),
        ),
    )
    big = CandidatePod(app_pod("big", cpu_millis=6000))
    node = candidate("n1", "t3a.2xlarge", (big,), created=0)
    catalog = [
        dataclasses.replace(t, labels={**t.labels, family: t.name.split(".")[0]}) for t in CATALOG
    ]
    settings = pool(consolidation_policy=WHEN_EMPTY, budgets=(), **NO_EXPIRY).disruption
    state = snapshot([node], [NodePoolState(nodepool, settings)], catalog)
    strict = plan_disruption(state, at(600))
    best_effort = plan_disruption(
        state, at(600), ConsolidationOptions(min_values_policy=MinValuesPolicy.BEST_EFFORT)
    )
    assert decided(strict) == decided(best_effort) == [("Drifted", ("n1",))]
    assert strict.decisions[0].replacements == ()
    assert "1 pod(s) will wait: NodePool default: minValues 2" in strict.decisions[0].message
    (replacement,) = best_effort.decisions[0].replacements
    assert replacement.instance_type == "c4.2xlarge"
    assert [r.key for r in replacement.min_values_relaxed] == [family]
