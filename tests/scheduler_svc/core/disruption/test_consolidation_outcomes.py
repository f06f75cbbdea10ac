"""What one consolidation decides or refuses, exactly as a user reads it: a one-node replacement
priced by its cheapest kept offering, the refusals naming the cheapest replacement or why no
cheaper node holds the pods, the choice between one node and several (N -> M), and the saving
thresholds at their edges. Pure core on small hand-made catalogs, clock passed in (``at``)."""

from __future__ import annotations

from scheduler_svc.core import InstanceType, LabelSelector, Node, PodAffinityTerm, Resources
from scheduler_svc.core.disruption import (
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionReason,
    plan_disruption,
)
from scheduler_svc.core.requirements import LABEL_HOSTNAME
from tests.scheduler_svc.core.builders import GIB, instance_type
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    snapshot,
)

ZONE_A = ("zone-a",)

# 2 CPUs for $0.30/h and 4 CPUs for $0.90/h, in one zone (one offering each).
SMALL_AND_BIG = (
    instance_type("s.large", 2.0, 4.0, 0.30, zones=ZONE_A),
    instance_type("b.xlarge", 4.0, 8.0, 0.90, zones=ZONE_A),
)


def one_pod_node(
    name: str, price: float, cpu_millis: int = 1500, capacity_type: str = "on-demand"
) -> Candidate:
    """A c4.2xlarge ``name`` at ``price`` holding one ``cpu_millis`` pod named ``<name>-pod``."""
    pod = CandidatePod(app_pod(f"{name}-pod", cpu_millis))
    return candidate(name, "c4.2xlarge", (pod,), price=price, capacity_type=capacity_type)


def offerings(decision: DisruptionDecision) -> list[list[tuple[str, str, float]]]:
    """Per replacement, its (instance type, capacity type, price) offerings."""
    return [
        [(o.instance_type, o.capacity_type, o.price_per_hour) for o in claim.offerings]
        for claim in decision.replacements
    ]


def decide(
    nodes: list[Candidate],
    catalog: tuple[InstanceType, ...],
    options: ConsolidationOptions | None = None,
    other_nodes: tuple[Node, ...] = (),
) -> DisruptionPlan:
    """One pass, ten minutes after T0, of ``nodes`` in one consolidating NodePool."""
    state = snapshot(nodes, [consolidating()], catalog, other_nodes=other_nodes)
    return plan_disruption(state, at(600), options)


# -- One node replaced by one ----------------------------------------------------------------


def test_a_replacement_is_priced_and_named_by_its_cheapest_kept_offering() -> None:
    """$0.40/h on-demand -> r.large, whose spot ($0.10/h) and on-demand ($0.30/h) offerings both
    save enough: both are kept as fallbacks, the cheapest first, and the message, the new price
    and the saving are the spot one's. The node and its NodeClaim go."""
    catalog = (instance_type("r.large", 2.5, 6.0, 0.30, spot_price=0.10, zones=ZONE_A),)
    (decision,) = decide([one_pod_node("n1", 0.40)], catalog).decisions
    assert decision.reason is DisruptionReason.UNDERUTILIZED
    assert decision.nodes == ("n1",)
    assert decision.nodeclaims == ("default-n1",)
    assert decision.message == (
        "Underutilized: replace n1 ($0.4000/h) by r.large (spot, $0.1000/h); saves $0.3000/h"
    )
    assert (decision.old_price_per_hour, decision.new_price_per_hour) == (0.40, 0.10)
    assert offerings(decision) == [[("r.large", "spot", 0.10), ("r.large", "on-demand", 0.30)]]


def test_a_saving_of_exactly_the_minimum_fraction_is_enough() -> None:
    """$2.00/h -> $1.75/h saves $0.25/h, exactly 12.5 % (all binary-exact): replaced."""
    catalog = (instance_type("m.large", 2.5, 6.0, 1.75, zones=ZONE_A),)
    options = ConsolidationOptions(min_saving_fraction=0.125)
    (decision,) = decide([one_pod_node("n1", 2.00)], catalog, options).decisions
    assert decision.message == (
        "Underutilized: replace n1 ($2.0000/h) by m.large (on-demand, $1.7500/h); saves $0.2500/h"
    )


def test_a_saving_of_exactly_the_minimum_per_hour_is_enough() -> None:
    """$2.00/h -> $1.50/h saves $0.50/h, exactly the minimum of $0.50/h asked: replaced."""
    catalog = (instance_type("m.large", 2.5, 6.0, 1.50, zones=ZONE_A),)
    options = ConsolidationOptions(min_saving_fraction=0.0, min_saving_per_hour=0.5)
    (decision,) = decide([one_pod_node("n1", 2.00)], catalog, options).decisions
    assert decision.new_price_per_hour == 1.50


def test_an_equal_price_replacement_is_no_saving_even_with_zero_thresholds() -> None:
    """With no minimum saving at all, a replacement at the node's own price ($0.30/h) still
    saves nothing: the node stays."""
    catalog = (instance_type("m.large", 2.5, 6.0, 0.30, zones=ZONE_A),)
    options = ConsolidationOptions(min_saving_fraction=0.0, min_saving_per_hour=0.0)
    plan = decide([one_pod_node("n1", 0.30)], catalog, options)
    assert plan.decisions == ()
    assert blocked_messages(plan)["n1"] == (
        "would cost more: no replacement saves 0% and $0.00/h on $0.3000/h"
    )


# -- Refusals --------------------------------------------------------------------------------


def test_a_spot_node_refused_for_too_few_spot_types_names_the_cheapest_replacement() -> None:
    """A $0.40/h spot node: only the spot offerings of x1 ($0.05/h) and x2 ($0.06/h) save
    enough, two spot types where spot->spot needs 15. The refusal names the cheapest of the
    replacement's offerings, x1."""
    catalog = (
        instance_type("x1.large", 2.5, 6.0, 0.50, spot_price=0.05, zones=ZONE_A),
        instance_type("x2.large", 2.5, 6.0, 0.50, spot_price=0.06, zones=ZONE_A),
    )
    plan = decide([one_pod_node("n1", 0.40, capacity_type="spot")], catalog)
    assert plan.decisions == ()
    assert blocked_messages(plan)["n1"] == (
        "would cost more: cheapest replacement x1.large (spot) $0.0500/h vs $0.4000/h (needs a "
        "saving of 10% and $0.01/h; spot->spot needs 15 cheaper spot types)"
    )


def test_pods_no_cheaper_type_can_hold_are_refused_with_the_solver_reason() -> None:
    """A 3-CPU pod on a $0.398/h node; the only cheaper type has 1.93 CPUs: no cheaper node
    holds the pods, said with the thresholds and the scheduler's reason."""
    catalog = (instance_type("c4.large", 1.93, 3.0, 0.10),)
    plan = decide([one_pod_node("n1", 0.398, cpu_millis=3000)], catalog)
    assert plan.decisions == ()
    assert blocked_messages(plan)["n1"] == (
        "no cheaper node holds the pods (would cost more: no replacement saves 10% and "
        "$0.01/h on $0.3980/h): no instance type has 3 cpu allocatable under NodePool default"
    )


# -- One node or several ---------------------------------------------------------------------


def test_two_nodes_merge_into_one_node_not_into_two_cheaper_ones() -> None:
    """Two $1.00/h nodes, a 1.5-CPU pod each: two s.large ($0.60/h) would cost less than one
    b.xlarge ($0.90/h), but two nodes replaced by two is no merge: the one node is taken."""
    nodes = [one_pod_node("n0", 1.00), one_pod_node("n1", 1.00)]
    (decision,) = decide(nodes, SMALL_AND_BIG).decisions
    assert decision.nodes == ("n0", "n1")
    assert decision.message == (
        "Underutilized: replace n0, n1 ($2.0000/h) by b.xlarge (on-demand, $0.9000/h); "
        "saves $1.1000/h"
    )
    assert offerings(decision) == [[("b.xlarge", "on-demand", 0.90)]]


def test_two_nodes_whose_pods_need_one_new_node_get_the_cheapest_one() -> None:
    """Two $1.00/h nodes, a 1.5-CPU pod each; a node daiku does not manage has room for one of
    the pods. The other needs one new node: s.large ($0.30/h), with b.xlarge as a fallback,
    not b.xlarge (the one type that could hold both pods)."""
    nodes = [one_pod_node("n0", 1.00), one_pod_node("n1", 1.00)]
    other = Node(
        "static",
        labels={LABEL_HOSTNAME: "static"},
        allocatable=Resources(1600, 4 * GIB, 110, 20 * GIB),
    )
    (decision,) = decide(nodes, SMALL_AND_BIG, other_nodes=(other,)).decisions
    assert decision.nodes == ("n0", "n1")
    assert decision.message == (
        "Underutilized: replace n0, n1 ($2.0000/h) by s.large (on-demand, $0.3000/h); "
        "saves $1.7000/h"
    )
    assert offerings(decision) == [
        [("s.large", "on-demand", 0.30), ("b.xlarge", "on-demand", 0.90)]
    ]


def test_three_nodes_merge_into_two_when_anti_affinity_rules_out_one() -> None:
    """Three $0.40/h nodes; two of the pods repel each other per host, so even types that
    could hold all three pods need two nodes: 3 -> 2 s.large ($0.60/h) is taken, and no
    one-node answer is named."""
    repel = (PodAffinityTerm(LABEL_HOSTNAME, LabelSelector.of({"app": "db"})),)
    members = [
        CandidatePod(app_pod("a", 500, labels={"app": "db"}, pod_anti_affinity=repel)),
        CandidatePod(app_pod("b", 500, labels={"app": "db"}, pod_anti_affinity=repel)),
        CandidatePod(app_pod("c", 500)),
    ]
    nodes = [candidate(f"n{i}", "c4.large", (m,), price=0.40) for i, m in enumerate(members)]
    (decision,) = decide(nodes, SMALL_AND_BIG).decisions
    assert decision.nodes == ("n0", "n1", "n2")
    assert decision.message == (
        "Underutilized: replace n0, n1, n2 ($1.2000/h) by 2 nodes ($0.6000/h): s.large "
        "(on-demand, $0.3000/h), s.large (on-demand, $0.3000/h); saves $0.6000/h"
    )
    assert [claim.pods for claim in decision.replacements] == [
        ("default/a", "default/c"),
        ("default/b",),
    ]
