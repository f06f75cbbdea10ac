"""N -> M consolidation (1 < M < N, decision 0019's addendum) on a small catalog: what the
decision launches and says, the fallback offerings each replacement keeps, and the refusal when
the M nodes save too little. Pure core, clock passed in (``at``)."""

from __future__ import annotations

from scheduler_svc.core.disruption import (
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionReason,
    plan_disruption,
)
from scheduler_svc.core.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_KARPENTER_NODEPOOL,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    Operator,
    Requirement,
)
from tests.scheduler_svc.core.builders import instance_type
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    snapshot,
)

# Two 1.5-CPU pods fit c5.xlarge, one fits c5.large, all three only c5.4xlarge.
SEVERAL_CATALOG = (
    instance_type("c5.large", 1.93, 3.0, 0.10),
    instance_type("c5.xlarge", 3.92, 6.4, 0.30, spot_price=0.14),
    instance_type("c5.4xlarge", 7.91, 16.0, 0.45),
)


def three_nodes(price: float | None = None) -> list[Candidate]:
    """n0, n1, n2: c4.large (at ``price``, else $0.10/h) holding one 1.5-CPU pod each."""
    return [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1500)),), price=price)
        for i in range(3)
    ]


def offerings(decision: DisruptionDecision) -> list[list[tuple[str, str, float]]]:
    """Per replacement, its (zone, capacity type, price) offerings."""
    return [
        [(o.zone, o.capacity_type, o.price_per_hour) for o in claim.offerings]
        for claim in decision.replacements
    ]


def test_several_nodes_replace_three_and_the_one_node_answer_is_named() -> None:
    """3 x $0.20/h -> c5.xlarge (spot $0.14/h) + c5.large ($0.10/h) = $0.24/h; the one node
    that holds every pod (c5.4xlarge, $0.45/h) saves less and is named in the message. Every
    node and NodeClaim goes now."""
    state = snapshot(three_nodes(0.20), [consolidating()], SEVERAL_CATALOG)
    (decision,) = plan_disruption(state, at(600)).decisions
    assert decision.reason is DisruptionReason.UNDERUTILIZED
    assert decision.nodes == ("n0", "n1", "n2")
    assert decision.nodeclaims == ("default-n0", "default-n1", "default-n2")
    assert decision.deferred == ()
    assert [c.instance_type for c in decision.replacements] == ["c5.xlarge", "c5.large"]
    assert decision.needs_validation
    assert decision.message == (
        "Underutilized: replace n0, n1, n2 ($0.6000/h) by 2 nodes ($0.2400/h): c5.xlarge "
        "(spot, $0.1400/h), c5.large (on-demand, $0.1000/h); saves $0.3600/h; one node would "
        "be c5.4xlarge at $0.4500/h"
    )
    # Default thresholds: the merge may cost up to $0.54/h, so c5.xlarge may fall back to
    # on-demand ($0.30/h; scaled share $0.315/h).
    zones = ("zone-a", "zone-b", "zone-c")
    assert offerings(decision) == [
        [(z, "spot", 0.14) for z in zones] + [(z, "on-demand", 0.30) for z in zones],
        [(z, "on-demand", 0.10) for z in zones],
    ]


def test_fallback_offerings_keep_the_minimum_saving_per_hour() -> None:
    """A $0.10/h minimum saving on $0.60/h (more than 10 % of it) caps the merge at $0.50/h:
    c5.xlarge's share is $0.2917/h, so its on-demand fallback ($0.30/h) is dropped."""
    state = snapshot(three_nodes(0.20), [consolidating()], SEVERAL_CATALOG)
    options = ConsolidationOptions(min_saving_per_hour=0.10)
    (decision,) = plan_disruption(state, at(600), options).decisions
    zones = ("zone-a", "zone-b", "zone-c")
    assert offerings(decision) == [
        [(z, "spot", 0.14) for z in zones],
        [(z, "on-demand", 0.10) for z in zones],
    ]
    assert decision.message.endswith("; one node would be c5.4xlarge at $0.4500/h")


def test_several_nodes_that_save_too_little_are_refused_and_priced() -> None:
    """3 x $0.10/h; c5.xlarge ($0.16/h) + c5.large ($0.11/h) = $0.27/h, no type holds all three
    pods. With a $0.05/h minimum saving, $0.03/h is too little: refused, both prices named."""
    catalog = (
        instance_type("c5.large", 1.93, 3.0, 0.11),
        instance_type("c5.xlarge", 3.92, 6.4, 0.16),
    )
    options = ConsolidationOptions(min_saving_per_hour=0.05)
    plan = plan_disruption(snapshot(three_nodes(), [consolidating()], catalog), at(600), options)
    assert plan.decisions == ()
    assert blocked_messages(plan)["n0"] == (
        "would cost more: no replacement saves 10% and $0.05/h on $0.1000/h; multi-node: "
        "merging the first 3, 2 candidates does not pay (3: would cost more: the cheapest 2 "
        "nodes for the pods cost $0.2700/h vs $0.3000/h (needs a saving of 10% and $0.05/h))"
    )


def test_a_narrowed_replacement_keeps_its_node_pool_and_launches_only_what_it_kept() -> None:
    """With its on-demand fallback dropped, c5.xlarge's claim requires spot in its three zones,
    and still names its NodePool."""
    state = snapshot(three_nodes(0.20), [consolidating()], SEVERAL_CATALOG)
    options = ConsolidationOptions(min_saving_per_hour=0.10)
    (decision,) = plan_disruption(state, at(600), options).decisions
    assert decision.replacements[0].requirements == (
        Requirement(LABEL_NODEPOOL, Operator.IN, ("default",)),
        Requirement(LABEL_KARPENTER_NODEPOOL, Operator.IN, ("default",)),
        Requirement(LABEL_INSTANCE_TYPE, Operator.IN, ("c5.xlarge",)),
        Requirement(LABEL_ZONE, Operator.IN, ("zone-a", "zone-b", "zone-c")),
        Requirement(LABEL_CAPACITY_TYPE, Operator.IN, ("spot",)),
    )
