"""Multi-node consolidation: N under-filled nodes merge into one cheaper node (issue 11 item 2)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from daiku_cli.plan import build_input
from daiku_cli.scenario.defaults import default_node_class, default_node_pool, inflate_deployment
from scheduler_svc.core.disruption import (
    Budget,
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSnapshot,
    NodePoolState,
    plan_disruption,
    validate,
)
from scheduler_svc.core.disruption.multi_node import (
    Outcome,
    admitted_types,
    capacity_price_floor,
    could_fit,
    free_room,
    search,
    types_holding,
)
from scheduler_svc.core.model import NodePool
from scheduler_svc.core.requirements import Operator, Requirement
from tests.scheduler_svc.core.disruption.builders import (
    CATALOG,
    ONE_CPU,
    app_pod,
    at,
    candidate,
    consolidating,
    one_cpu_nodes,
    snapshot,
)


def test_three_one_cpu_nodes_merge_into_one_c4_xlarge() -> None:
    """The case split found: 3 x c4.large ($0.30/h) -> one c4.xlarge ($0.199/h). Merging the
    first two alone saves nothing, so the binary search alone (2 of 3) never tried three."""
    plan = plan_disruption(snapshot(one_cpu_nodes(3), [consolidating()]), at(600))
    (decision,) = plan.decisions
    assert decision.reason is DisruptionReason.UNDERUTILIZED
    assert sorted(decision.nodes) == ["n0", "n1", "n2"]
    assert [c.instance_type for c in decision.replacements] == ["c4.xlarge"]
    assert decision.savings_per_hour == pytest.approx(0.101)
    assert decision.needs_validation
    assert decision.message.startswith("Underutilized: replace n0, n1, n2 ($0.3000/h) by c4.xlarge")
    assert decision.message.endswith("saves $0.1010/h")


def test_the_merge_validates_and_is_invalidated_by_a_pod_change() -> None:
    nodes = one_cpu_nodes(3)
    state = snapshot(nodes, [consolidating()])
    (decision,) = plan_disruption(state, at(600)).decisions
    assert validate(decision, state, at(615)).is_valid
    busy = dataclasses.replace(nodes[1], last_pod_event_at=at(610))
    later = snapshot([nodes[0], busy, nodes[2]], [consolidating()])
    verdict = validate(decision, later, at(615))
    assert not verdict.is_valid
    assert verdict.reason == "pods changed on node n1 since the decision"


def test_a_budget_caps_the_merge_and_the_rest_goes_in_waves() -> None:
    """A budget of 2 nodes: merging 2 does not pay, so the 3-node merge goes in waves (decision
    0021): two now, n2 deferred (test_waves.py)."""
    plan = plan_disruption(
        snapshot(one_cpu_nodes(3), [consolidating(budgets=(Budget(nodes=2, percent=None),))]),
        at(600),
    )
    (decision,) = plan.decisions
    assert (decision.nodes, decision.deferred) == (("n0", "n1"), ("n2",))


def test_the_search_tries_the_sizes_the_binary_search_skips() -> None:
    """Savings are not monotonic in the prefix length: only 5 of 7 pays. Karpenter's binary
    search tries 4, then 2, and stops; the scan then tries 7, 6 and 5."""
    nodes = one_cpu_nodes(7)
    tried: list[int] = []

    def attempt(prefix: Sequence[Candidate]) -> Outcome:
        tried.append(len(prefix))
        if len(prefix) == 5:
            plan = plan_disruption(snapshot(one_cpu_nodes(3), [consolidating()]), at(600))
            return Outcome(plan.decisions[0])
        return Outcome(None, f"no luck with {len(prefix)}")

    found = search(nodes, attempt, max_candidates=100, max_scan=10)
    assert found.decision is not None
    assert tried == [4, 2, 7, 6, 5]
    nothing = search(nodes, attempt, max_candidates=100, max_scan=2)
    assert nothing.decision is None
    assert nothing.summary().startswith(
        "multi-node: merging the first 7, 6, 4, 2 candidates does not pay (7: no luck with 7)"
    )


def test_the_binary_search_alone_finds_the_length_just_below_a_refused_one() -> None:
    """With no scan, the binary search over 4 candidates refuses 3 and goes on to 2, the
    length just below, where the merge pays."""
    nodes = one_cpu_nodes(4)
    tried: list[int] = []
    merge = plan_disruption(snapshot(one_cpu_nodes(3), [consolidating()]), at(600)).decisions[0]

    def attempt(prefix: Sequence[Candidate]) -> Outcome:
        tried.append(len(prefix))
        return Outcome(merge) if len(prefix) == 2 else Outcome(None, "does not pay")

    found = search(nodes, attempt, max_candidates=100, max_scan=0)
    assert found.decision is merge
    assert tried == [3, 2]


def test_types_holding_keeps_only_types_with_room_for_every_pod() -> None:
    catalog = snapshot([]).instance_types
    pods = [app_pod(f"p{i}", ONE_CPU) for i in range(3)]
    assert [t.name for t in types_holding(pods, catalog)] == [
        "c4.xlarge",
        "c4.2xlarge",
        "t3a.2xlarge",
    ]


# -- the `make up` cluster on the bundled catalog ---------------------------------------------


def _make_up_cluster(tmp_path: Path) -> tuple[list[Candidate], DisruptionSnapshot]:
    """What `make up` ends with: 5 x c6gd.medium (spot, one 500m pod each) and one c6g.2xlarge
    holding 15, under the default NodePool with a budget of 100 % (the default 10 % lets one
    of six nodes go at a time, which no merge fits in)."""
    layout = [(f"m{i}", "c6gd.medium", 1) for i in range(5)] + [("big", "c6g.2xlarge", 15)]
    return _default_pool_cluster(tmp_path, layout)


def _default_pool_cluster(
    tmp_path: Path, layout: Sequence[tuple[str, str, int]], budget: Budget | None = None
) -> tuple[list[Candidate], DisruptionSnapshot]:
    """Spot nodes (name, type, how many 500m/512Mi inflate pods) of the default NodePool on the
    bundled catalog's real prices, with ``budget`` (default: 100 %)."""
    manifest = tmp_path / "default.json"
    items = [default_node_class("daiku"), default_node_pool(), inflate_deployment(20)]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    scheduling = build_input([str(manifest)], None)
    types = {t.name: t for t in scheduling.instance_types}

    def node(name: str, type_name: str, count: int) -> Candidate:
        shape = types[type_name]
        offer = min(
            (o for o in shape.offerings if o.capacity_type == "spot"),
            key=lambda o: o.price_per_hour,
        )
        labels = {
            **shape.labels,
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": offer.zone,
            "karpenter.sh/capacity-type": "spot",
            "karpenter.sh/nodepool": "default",
            "daiku.dev/nodepool": "default",
        }
        members = tuple(
            CandidatePod(app_pod(f"{name}-{i}"), owner_kind="ReplicaSet") for i in range(count)
        )
        return Candidate(
            name=name,
            nodeclaim=name,
            nodepool="default",
            created_at=at(0),
            instance_type=type_name,
            capacity_type="spot",
            zone=offer.zone,
            price_per_hour=offer.price_per_hour,
            allocatable=shape.allocatable,
            labels=labels,
            pods=members,
        )

    nodes = [node(name, type_name, count) for name, type_name, count in layout]
    settings = DisruptionSettings.from_spec("default", default_node_pool()["spec"])
    settings = dataclasses.replace(settings, budgets=(budget or Budget(percent=100),))
    state = DisruptionSnapshot(
        candidates=tuple(nodes),
        nodepools=(NodePoolState(scheduling.nodepools[0], settings),),
        instance_types=scheduling.instance_types,
    )
    return nodes, state


def test_make_ups_one_pod_spot_nodes_merge_into_one(tmp_path: Path) -> None:
    """The five one-pod spot nodes become one spot node: the solver alone buys five small
    claims for their pods (the one-node simulation asks the right question), and spot->spot's
    15-type rule is for single-node consolidation only (Karpenter's)."""
    _, state = _make_up_cluster(tmp_path)
    (decision,) = plan_disruption(state, at(600)).decisions
    assert sorted(decision.nodes) == ["m0", "m1", "m2", "m3", "m4"]
    (replacement,) = decision.replacements
    assert replacement.offerings[0].capacity_type == "spot"
    assert decision.new_price_per_hour < 0.9 * decision.old_price_per_hour
    assert validate(decision, state, at(615)).is_valid


def test_the_spot_rule_still_holds_for_one_node(tmp_path: Path) -> None:
    """A single spot node is not replaced by spot with fewer than 15 cheaper spot types."""
    nodes, state = _make_up_cluster(tmp_path)
    strict = ConsolidationOptions(spot_to_spot_min_types=10**6)
    lone = dataclasses.replace(state, candidates=(nodes[-1],))
    assert plan_disruption(lone, at(600), strict).decisions == ()


def test_could_fit_sums_the_free_room_of_the_nodes_that_stay() -> None:
    """Two c4.large with one 1-CPU pod each leave 2 x 930m: one more 1-CPU pod fits in the sum
    (the simulation then finds it does not fit on either), two do not."""
    rooms = [free_room(n.to_node()) for n in one_cpu_nodes(2)]
    assert rooms[0]["cpu"] == 930
    assert could_fit([app_pod("x", 1000)], rooms)
    assert not could_fit([app_pod(f"x{i}", 1000) for i in range(2)], rooms)


def test_a_merge_with_no_cheaper_type_big_enough_is_refused_without_a_simulation() -> None:
    """Two full c4.2xlarge ($0.796/h), the c4 family only: no type saving 10 % has room for
    their 14 pods."""
    full = [
        candidate(
            f"b{i}", "c4.2xlarge", [CandidatePod(app_pod(f"b{i}-{j}", 1000)) for j in range(7)]
        )
        for i in range(2)
    ]
    c4_only = [t for t in CATALOG if t.name.startswith("c4.")]
    plan = plan_disruption(snapshot(full, [consolidating()], c4_only), at(600))
    assert plan.decisions == ()
    message = {b.node: b.message for b in plan.blocked}["b0"]
    assert "(2: would cost more: no node saving 10% on $0.7960/h has room for the pods" in message


# -- N -> M: several under-filled nodes replaced by fewer, cheaper ones --------------------------

# What the live 0 -> 5 -> 20 -> 40 scale-up of the default scenario ends with (each round packs
# its own batch: 5 pods, then 15, then 20): $0.2781/h, where `daiku plan` buys the 40 pods for
# $0.2491/h (c6g.4xlarge + 3 x m6g.large).
LIVE_40 = [
    *((f"m{i}", "c6gd.medium", 1) for i in range(4)),
    ("l0", "m6g.large", 3),
    ("l1", "m6g.large", 3),
    ("x0", "c6g.2xlarge", 15),
    ("x1", "c6g.2xlarge", 15),
]


def test_eight_nodes_of_three_rounds_are_replaced_by_the_plan_for_their_pods(
    tmp_path: Path,
) -> None:
    """No one node holds 40 pods for less, so Karpenter's one-node merge finds nothing; the
    N -> M merge replaces all eight by the four nodes `daiku plan` buys (saves 10.4 %)."""
    _, state = _default_pool_cluster(tmp_path, LIVE_40)
    (decision,) = plan_disruption(state, at(600)).decisions
    assert decision.old_price_per_hour == pytest.approx(0.2781, abs=1e-4)
    assert sorted(decision.nodes) == sorted(name for name, _, _ in LIVE_40)
    assert sorted(c.instance_type for c in decision.replacements) == [
        "c6g.4xlarge",
        "m6g.large",
        "m6g.large",
        "m6g.large",
    ]
    assert decision.new_price_per_hour == pytest.approx(0.2491, abs=1e-4)
    assert decision.message.startswith(
        "Underutilized: replace m0, m1, m2, m3, l0, l1, x0, x1 ($0.2781/h) by 4 nodes "
        "($0.2491/h): c6g.4xlarge (spot, $0.1789/h)"
    )
    assert decision.message.endswith("saves $0.0290/h")
    assert validate(decision, state, at(615)).is_valid


def test_every_fallback_offering_keeps_the_merge_saving(tmp_path: Path) -> None:
    """The actuator may launch any offering a claim lists: together the dearest ones still
    cost at most 90 % of the nodes replaced (and $0.01/h less)."""
    _, state = _default_pool_cluster(tmp_path, LIVE_40)
    (decision,) = plan_disruption(state, at(600)).decisions
    dearest = sum(max(o.price_per_hour for o in c.offerings) for c in decision.replacements)
    assert dearest <= 0.9 * decision.old_price_per_hour + 1e-12


def test_a_half_budget_repairs_the_packing_in_two_merges(tmp_path: Path) -> None:
    """With nodes: 50 % (4 of 8 at a time) the one-pod nodes go first: 4 x c6gd.medium -> 2
    nodes, then the leftovers -> 2 nodes, ending within 5 % of the plan's $0.2491/h."""
    _, state = _default_pool_cluster(tmp_path, LIVE_40, Budget(percent=50))
    (first,) = plan_disruption(state, at(600)).decisions
    assert sorted(first.nodes) == ["m0", "m1", "m2", "m3"]
    assert len(first.replacements) == 2
    assert "by 2 nodes" in first.message
    after_first = 0.2781 - first.savings_per_hour
    layout = [row for row in LIVE_40 if row[0] not in first.nodes]
    layout += [(f"r{i}", c.instance_type, len(c.pods)) for i, c in enumerate(first.replacements)]
    _, state = _default_pool_cluster(tmp_path, layout, Budget(percent=50))
    (second,) = plan_disruption(state, at(600)).decisions
    assert len(second.replacements) < len(second.nodes)
    assert after_first - second.savings_per_hour <= 1.05 * 0.2491


def test_one_node_wins_unless_several_save_the_threshold_on_it(tmp_path: Path) -> None:
    """make up's five one-pod nodes: three nodes ($0.0467/h) are cheaper than one c6gd.xlarge
    ($0.0470/h) by less than the threshold, so the one node is bought (fewer nodes, and no
    later pass would split it)."""
    _, state = _make_up_cluster(tmp_path)
    (decision,) = plan_disruption(state, at(600)).decisions
    assert [c.instance_type for c in decision.replacements] == ["c6gd.xlarge"]


def test_a_merge_into_as_many_nodes_is_refused(tmp_path: Path) -> None:
    """Two full c6g.2xlarge: the cheapest nodes for their 30 pods are one c6g.4xlarge, which
    saves 3 %; never two other nodes as a 'merge'."""
    _, state = _default_pool_cluster(
        tmp_path, [("x0", "c6g.2xlarge", 15), ("x1", "c6g.2xlarge", 15)]
    )
    assert plan_disruption(state, at(600)).decisions == ()


def test_the_capacity_floor_prices_the_shortfall_at_the_cheapest_unit() -> None:
    """Four 1-CPU pods, one c4.large's free room staying (930m): the new nodes need 3,070m of
    cpu at least, at the catalog's lowest price per allocatable millicore, and four whole pods,
    at the lowest price per pod, the higher of the two; infinite when the allowed number of
    the largest type cannot hold that much."""
    c4 = [t for t in CATALOG if t.name.startswith("c4.")]
    pods = [app_pod(f"p{i}", ONE_CPU) for i in range(4)]
    rooms = [free_room(n.to_node()) for n in one_cpu_nodes(1)]
    per_milli = min(
        min(o.price_per_hour for o in t.offerings) / t.allocatable.cpu_millis for t in c4
    )
    per_pod = min(
        min(o.price_per_hour for o in t.offerings) / (t.allocatable.cpu_millis // ONE_CPU)
        for t in c4
    )
    # No whole pod fits in 930m: four pods at the best price per whole pod (c4.2xlarge, 7).
    assert capacity_price_floor(pods, c4, rooms, 3) == pytest.approx(4 * per_pod)
    assert 4 * per_pod > 3070 * per_milli
    large = [t for t in c4 if t.name == "c4.large"]
    assert capacity_price_floor(pods, large, rooms, 1) == float("inf")


def test_a_do_not_disrupt_pod_keeps_its_node_out_of_the_n_to_m_merge(tmp_path: Path) -> None:
    """A do-not-disrupt pod on one c6g.2xlarge: that node is blocked and never part of the
    merge; the other seven still merge into fewer nodes."""
    nodes, state = _default_pool_cluster(tmp_path, LIVE_40)
    held = dataclasses.replace(nodes[-1].pods[0], do_not_disrupt=True)
    pinned = dataclasses.replace(nodes[-1], pods=(held, *nodes[-1].pods[1:]))
    state = dataclasses.replace(state, candidates=(*nodes[:-1], pinned))
    plan = plan_disruption(state, at(600))
    (decision,) = plan.decisions
    assert "x1" not in decision.nodes
    assert len(decision.replacements) < len(decision.nodes)
    assert "do-not-disrupt" in {b.node: b.message for b in plan.blocked}["x1"]


def test_the_floor_counts_whole_pods_per_node_for_one_shape() -> None:
    """Four 1-CPU pods, no room staying: a c4.large (1,930m) holds one whole pod, so the floor
    is four of its $0.10/h (a per-millicore floor would price them at about $0.21/h)."""
    large = [t for t in CATALOG if t.name == "c4.large"]
    pods = [app_pod(f"p{i}", ONE_CPU) for i in range(4)]
    assert capacity_price_floor(pods, large, [], 4) == pytest.approx(0.40)


def test_admitted_types_keep_what_the_node_pools_may_launch() -> None:
    """The floor prices only what a NodePool may launch: a pool of two c4 types leaves the
    others out, a spot-only pool every on-demand offering."""
    two = NodePool(
        "two",
        requirements=(
            Requirement("node.kubernetes.io/instance-type", Operator.IN, ("c4.large", "c4.xlarge")),
        ),
    )
    assert [t.name for t in admitted_types(CATALOG, [two])] == ["c4.large", "c4.xlarge"]
    spot = NodePool(
        "spot", requirements=(Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),)
    )
    assert admitted_types(CATALOG, [spot]) == ()
    assert admitted_types(CATALOG, [NodePool("any")]) == CATALOG
