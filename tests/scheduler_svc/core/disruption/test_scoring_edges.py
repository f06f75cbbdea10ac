"""The small pure pieces a decision's figures and words come from: a pod's share of a node's
Balanced disruption cost, which reasons a do-not-disrupt grace period cuts short, how the
slack of an N -> M merge is shared between its claims' fallback offerings, and the message
text of a replacement."""

from __future__ import annotations

from scheduler_svc.core import Resources
from scheduler_svc.core.disruption import CandidatePod, DisruptionReason
from scheduler_svc.core.disruption.balanced import disruption_cost
from scheduler_svc.core.disruption.grace import grace_ends_at
from scheduler_svc.core.disruption.multi_node import several_message, shared_offerings
from scheduler_svc.core.disruption.replacement import where_pods_go
from scheduler_svc.core.model import (
    NodeClaimPlan,
    OfferingOption,
    SchedulingResult,
    UnschedulablePod,
)
from tests.scheduler_svc.core.disruption.builders import app_pod, at, candidate, pool, snapshot


def claim(type_name: str, *prices: float, capacity_type: str = "spot") -> NodeClaimPlan:
    """A claim of ``type_name`` whose offerings cost ``prices`` (cheapest first)."""
    offerings = tuple(
        OfferingOption(type_name, f"zone-{i}", capacity_type, price)
        for i, price in enumerate(prices)
    )
    return NodeClaimPlan("default", (), ("default/p",), Resources(1000, 1 << 30), offerings)


def test_a_pod_cheaper_to_evict_than_the_default_adds_less_than_one() -> None:
    """A pod-deletion-cost of -2^26 makes a pod's eviction cost 0.5: the node costs 1.5 to
    disrupt, not 2 (only negative eviction costs are clamped, to 0)."""
    cheap = CandidatePod(app_pod("cheap"), deletion_cost=-(2**26))
    negative = CandidatePod(app_pod("negative"), deletion_cost=-(2**30))
    node = candidate("n", "c4.large", (cheap, negative))
    assert disruption_cost(node) == 1.5


def test_the_grace_period_ends_only_expiry_and_drift() -> None:
    """A drifted node in a NodePool with a one-hour grace period: the period ends an hour after
    the drift for Drifted, and there is none for Underutilized or Empty."""
    drifted = candidate("n", "c4.large", drifted_since=at(0))
    graced = snapshot([drifted], [pool(do_not_disrupt_grace_period_seconds=3600.0)])
    assert grace_ends_at(drifted, graced, DisruptionReason.DRIFTED) == at(3600)
    assert grace_ends_at(drifted, graced, DisruptionReason.UNDERUTILIZED) is None
    assert grace_ends_at(drifted, graced, DisruptionReason.EMPTY) is None


def test_the_slack_is_shared_in_proportion_to_each_claims_cheapest_offering() -> None:
    """Two claims at $0.10 and $0.20 under a ceiling of $0.45 (1.5 times $0.30): each may fall
    back to offerings up to 1.5 times its own cheapest, $0.15 and $0.30."""
    small = claim("m6g.large", 0.10, 0.15, 0.151)
    large = claim("m6g.xlarge", 0.20, 0.30, 0.31)
    kept = shared_offerings([small, large], 0.45)
    assert [[o.price_per_hour for o in offerings] for offerings in kept] == [
        [0.10, 0.15],
        [0.20, 0.30],
    ]


def test_without_slack_each_claim_keeps_its_cheapest_offering() -> None:
    """A ceiling equal to the cheapest total leaves no fallback dearer than the cheapest, but
    never drops the cheapest itself (nor one of the same price)."""
    only = claim("m6g.large", 0.10, 0.10, 0.11)
    (kept,) = shared_offerings([only], 0.10)
    assert [o.price_per_hour for o in kept] == [0.10, 0.10]


def test_free_claims_keep_only_free_offerings() -> None:
    """Claims whose cheapest offerings cost nothing (a reservation already paid for) share no
    slack and raise no division by zero: each keeps only its free offerings."""
    reserved = claim("m6g.large", 0.0, 0.0, 0.05, capacity_type="reserved")
    (kept,) = shared_offerings([reserved], 0.20)
    assert [o.price_per_hour for o in kept] == [0.0, 0.0]


def test_a_several_node_message_lists_each_new_node_and_the_one_node_answer() -> None:
    claims = (claim("m6g.large", 0.10), claim("c6g.large", 0.08, capacity_type="on-demand"))
    message = several_message(["a", "b", "c"], 0.30, claims, "one node would be x at $0.2500/h")
    assert message == (
        "Underutilized: replace a, b, c ($0.3000/h) by 2 nodes ($0.1800/h): "
        "m6g.large (spot, $0.1000/h), c6g.large (on-demand, $0.0800/h); saves $0.1200/h; "
        "one node would be x at $0.2500/h"
    )
    assert several_message(["a", "b"], 0.30, claims, "").endswith("; saves $0.1200/h")


def test_a_replacement_message_names_the_new_node_and_the_pods_that_will_wait() -> None:
    """Both are said: the replacement launched, then how many pods wait and why."""
    node = candidate("n", "c4.large", (CandidatePod(app_pod("p")),))
    result = SchedulingResult(
        new_claims=(claim("c4.large", 0.10),),
        existing_placements=(),
        unschedulable=(UnschedulablePod("default/big", "no instance type has 64 CPUs"),),
    )
    assert where_pods_go(node, result) == (
        "; replaced by c4.large; 1 pod(s) will wait: no instance type has 64 CPUs"
    )
