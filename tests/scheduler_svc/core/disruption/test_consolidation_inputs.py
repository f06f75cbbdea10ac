"""What consolidation looks at, and what its simulations are given: a candidate left out for
one reason does not stop the next from being considered; a suspended pass says how many claims
are in flight; and the snapshot's DaemonSets, exhausted offerings and namespace labels reach the
solver, while the delete simulation opens nothing and counts only the nodes that exist. Pure
core on hand-made snapshots, clock passed in (``at``)."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_svc.core import (
    LabelSelector,
    Node,
    NodePool,
    Operator,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    Taint,
    TaintEffect,
    TopologySpreadConstraint,
    UnavailableOffering,
)
from scheduler_svc.core.disruption import (
    BlockedNode,
    Candidate,
    CandidatePod,
    ConsolidationPolicy,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSettings,
    NodePoolState,
    plan_disruption,
)
from scheduler_svc.core.requirements import LABEL_HOSTNAME, LABEL_ZONE, LABEL_ZONE_ID
from tests.scheduler_svc.core.builders import MIB, instance_type
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    app_pod,
    at,
    candidate,
    consolidating,
    pool,
    snapshot,
)

RACK = "example.com/rack"
C4_LARGE = next(t for t in CATALOG if t.name == "c4.large")

# b: a c4.xlarge ($0.199/h) holding one 500m pod, which fits on any node with 500m free.
B_GOES = "Underutilized: pods of b fit on other nodes; saves $0.1990/h"
N1_GOES = "Underutilized: pods of n1 fit on other nodes; saves $0.1990/h"
N1_REPLACED = (
    "Underutilized: replace n1 ($0.1990/h) by c4.large (on-demand, $0.1000/h); saves $0.0990/h"
)


def node_b() -> Candidate:
    """A c4.xlarge ``b`` (quiet since T0) holding one 500m pod ``b-0``."""
    return candidate("b", "c4.xlarge", (CandidatePod(app_pod("b-0")),))


def moves(plan: DisruptionPlan) -> list[tuple[tuple[str, ...], str]]:
    """Each decision's nodes and message."""
    return [(d.nodes, d.message) for d in plan.decisions]


def offered(decision: DisruptionDecision) -> list[list[tuple[str, str]]]:
    """Per replacement, its (instance type, zone) offerings in order."""
    return [[(o.instance_type, o.zone) for o in claim.offerings] for claim in decision.replacements]


def other_node(name: str, *pods: Pod, **labels: str) -> Node:
    """A c4.large-sized node that is no candidate, in zone-a, with ``pods`` and ``labels``."""
    node_labels = {LABEL_HOSTNAME: name, LABEL_ZONE: "zone-a", **labels}
    return Node(name, labels=node_labels, allocatable=C4_LARGE.allocatable, pods=pods)


# -- Which candidates consolidation looks at ---------------------------------------------------


NO_EXPIRY: dict[str, object] = {"expire_after_seconds": None, "budgets": ()}


def only_empty_pool() -> NodePoolState:
    return pool("only-empty", consolidation_policy=ConsolidationPolicy.WHEN_EMPTY, **NO_EXPIRY)


def never_pool() -> NodePoolState:
    return pool("never", consolidate_after_seconds=None, **NO_EXPIRY)


@pytest.mark.parametrize(
    ("first", "pools", "blocked"),
    [
        pytest.param(
            candidate("a", "c4.large", (CandidatePod(app_pod("a-0")),), nodepool="only-empty"),
            [only_empty_pool(), consolidating()],
            (),
            id="nodepool-consolidates-only-empty-nodes",
        ),
        pytest.param(
            candidate("a", "c4.large", (), last_event=590),
            [consolidating()],
            (),
            id="empty-node-not-yet-quiet",
        ),
        pytest.param(
            candidate("a", "c4.large", (CandidatePod(app_pod("a-0")),), nodepool="never"),
            [never_pool(), consolidating()],
            (),
            id="consolidate-after-never",
        ),
        pytest.param(
            candidate("a", "c4.large", (CandidatePod(app_pod("a-0")),), last_event=590),
            [consolidating()],
            (BlockedNode("a", "Unconsolidatable", "pods changed 10s ago (consolidateAfter 30s)"),),
            id="pods-changed-recently",
        ),
        pytest.param(
            candidate("a", "c4.large", (CandidatePod(app_pod("a-0"), do_not_disrupt=True),)),
            [consolidating()],
            (BlockedNode("a", "DisruptionBlocked", "do-not-disrupt pod default/a-0"),),
            id="do-not-disrupt-pod",
        ),
    ],
)
def test_a_candidate_left_out_does_not_stop_the_next_one(
    first: Candidate, pools: list[NodePoolState], blocked: tuple[BlockedNode, ...]
) -> None:
    """A candidate consolidation leaves out (its NodePool consolidates only empty nodes or
    never, it is empty but not yet quiet for Empty, its pods changed within consolidateAfter,
    a do-not-disrupt pod holds it) comes first in candidate order; the next candidate, b, is
    still considered and goes (its pod fits on a). Only a blocked reason a user can act on is
    reported, with its Event reason."""
    plan = plan_disruption(snapshot([first, node_b()], pools), at(600))
    assert moves(plan) == [(("b",), B_GOES)]
    assert plan.blocked == blocked


def test_an_uninitialized_candidate_counts_as_a_claim_in_flight() -> None:
    """A candidate whose node is not initialized yet is a scale-up under way: consolidation of
    underutilized nodes waits, and every candidate it would have looked at (a, then b) says so
    with the exact counts (no pod pending, one claim in flight) under the Unconsolidatable
    Event reason."""
    booting = candidate("booting", "c4.large", (), is_initialized=False)
    a = candidate("a", "c4.large", (CandidatePod(app_pod("a-0")),))
    plan = plan_disruption(snapshot([booting, a, node_b()], [consolidating()]), at(600))
    assert plan.decisions == ()
    waiting = "scale-up in progress (0 pod(s) pending, 1 claim(s) in flight)"
    assert plan.blocked == (
        BlockedNode("a", "Unconsolidatable", waiting),
        BlockedNode("b", "Unconsolidatable", waiting),
    )


# -- What the simulations are given --------------------------------------------------------------


def test_a_daemonsets_overhead_sizes_the_replacement() -> None:
    """A replacement runs the snapshot's DaemonSets too: a 1400m pod plus a 600m DaemonSet do
    not fit a c4.large (1.93 CPU), so n1 is replaced by the 2.5-CPU mid.large ($0.15/h), not the
    cheaper c4.large the pod alone would fit."""
    agent = Pod("agent", namespace="kube-system", containers=(Resources(600, 256 * MIB),))
    members = (CandidatePod(agent, owner_kind="DaemonSet"), CandidatePod(app_pod("web-0", 1400)))
    n1 = candidate("n1", "c4.xlarge", members)
    mid = instance_type("mid.large", 2.5, 6.0, 0.15)
    state = snapshot([n1], [consolidating()], (*CATALOG, mid), daemonsets=(agent,))
    (decision,) = plan_disruption(state, at(600)).decisions
    assert decision.message == (
        "Underutilized: replace n1 ($0.1990/h) by mid.large (on-demand, $0.1500/h); saves $0.0490/h"
    )
    assert offered(decision) == [
        [("mid.large", "zone-a"), ("mid.large", "zone-b"), ("mid.large", "zone-c")]
    ]


def test_an_exhausted_offering_is_not_offered_for_a_replacement() -> None:
    """c4.large on-demand in zone-a was reported exhausted: n1's replacement is still a c4.large,
    launched in zone-b or zone-c only."""
    n1 = candidate("n1", "c4.xlarge", (CandidatePod(app_pod("web-0")),))
    exhausted = frozenset({UnavailableOffering("c4.large", "zone-a", "on-demand")})
    state = snapshot([n1], [consolidating()], unavailable_offerings=exhausted)
    (decision,) = plan_disruption(state, at(600)).decisions
    assert decision.message == N1_REPLACED
    assert offered(decision) == [[("c4.large", "zone-b"), ("c4.large", "zone-c")]]


@pytest.mark.parametrize(
    ("db_namespace_labels", "expected"),
    [
        pytest.param({"team": "data"}, N1_REPLACED, id="selected-namespace-keeps-web-away"),
        pytest.param({"team": "ops"}, N1_GOES, id="other-namespace-does-not"),
    ],
)
def test_a_namespace_selector_reads_the_namespaces_labels(
    db_namespace_labels: dict[str, str], expected: str
) -> None:
    """web-0 must not share a node with app=db pods of namespaces labelled team=data. The only
    other node runs db-0 in namespace db: when db is labelled team=data, web-0 cannot move there
    and n1 is replaced by a cheaper node; labelled otherwise, n1 simply goes."""
    away_from_data = PodAffinityTerm(
        LABEL_HOSTNAME,
        LabelSelector.of({"app": "db"}),
        namespace_selector=LabelSelector.of({"team": "data"}),
    )
    web = Pod(
        "web-0",
        namespace="web",
        labels={"app": "web"},
        containers=(Resources(500, 512 * MIB),),
        pod_anti_affinity=(away_from_data,),
    )
    db = Pod("db-0", namespace="db", labels={"app": "db"}, containers=(Resources(500, 512 * MIB),))
    n1 = candidate("n1", "c4.xlarge", (CandidatePod(web),))
    state = snapshot(
        [n1],
        [consolidating()],
        other_nodes=(other_node("db-node", db),),
        namespaces={"db": db_namespace_labels, "web": {}},
    )
    assert moves(plan_disruption(state, at(600))) == [(("n1",), expected)]


def test_a_delete_counts_only_the_spread_domains_of_nodes_that_exist() -> None:
    """web-0 spreads over racks (maxSkew 1). A NodePool web-0 does not tolerate could launch into
    racks r1 and r2, but a delete launches nothing: the evicted pod comes back through
    kube-scheduler onto the nodes that exist, all in r1, where the skew stays within 1. So n1
    goes, its pod landing on b."""
    spread = TopologySpreadConstraint(RACK, 1, label_selector=LabelSelector.of({"app": "app"}))
    n1 = candidate("n1", "c4.xlarge", (CandidatePod(app_pod("web-0", topology_spread=(spread,))),))
    n1 = dataclasses.replace(n1, labels={**n1.labels, RACK: "r1"})
    b = other_node("b", app_pod("b-0"), **{RACK: "r1"})
    racked = NodePoolState(
        NodePool(
            "racked",
            requirements=(Requirement(RACK, Operator.IN, ("r1", "r2")),),
            taints=(Taint("dedicated", TaintEffect.NO_SCHEDULE, "racked"),),
        ),
        DisruptionSettings(expire_after_seconds=None),
    )
    state = snapshot([n1], [consolidating(), racked], other_nodes=(b,))
    assert moves(plan_disruption(state, at(600))) == [(("n1",), N1_GOES)]


def test_a_pod_selecting_a_zone_id_fits_on_a_node_of_that_zone() -> None:
    """web-0 selects zone id use1-az1 (zone-a). b, in zone-a and labelled use1-az1, has room:
    n1 goes, its pod landing on b. The delete simulation has no catalog to learn the zone ids
    from; it learns them from the nodes' labels."""
    ids = {"zone-a": "use1-az1", "zone-b": "use1-az2", "zone-c": "use1-az3"}
    catalog = tuple(
        dataclasses.replace(
            t,
            offerings=tuple(dataclasses.replace(o, zone_id=ids[o.zone]) for o in t.offerings),
        )
        for t in CATALOG
    )
    web = app_pod("web-0", node_selector={LABEL_ZONE_ID: "use1-az1"})
    n1 = candidate("n1", "c4.xlarge", (CandidatePod(web),))
    n1 = dataclasses.replace(n1, labels={**n1.labels, LABEL_ZONE_ID: "use1-az1"})
    b = other_node("b", app_pod("b-0"), **{LABEL_ZONE_ID: "use1-az1"})
    state = snapshot([n1], [consolidating()], catalog, other_nodes=(b,))
    assert moves(plan_disruption(state, at(600))) == [(("n1",), N1_GOES)]
