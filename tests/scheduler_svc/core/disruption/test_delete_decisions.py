"""Underutilized deletes: a merge whose pods all fit on the nodes that stay names every node
and NodeClaim it disrupts; and a node another decision of the same pass takes is not room the
pods can go to, not even in the price floor."""

from __future__ import annotations

from scheduler_svc.core.disruption import CandidatePod, DisruptionReason, plan_disruption
from tests.scheduler_svc.core.builders import instance_type
from tests.scheduler_svc.core.disruption.builders import (
    app_pod,
    at,
    blocked_messages,
    candidate,
    consolidating,
    pods,
    snapshot,
)


def test_a_two_node_delete_names_both_nodes_and_their_node_claims() -> None:
    """Two c4.large of one 500m pod each fit on a roomy t3a.2xlarge that stays: both go, no
    replacement, the message naming both."""
    small = [candidate(f"s{i}", "c4.large", pods(f"s{i}", 1), created=0) for i in range(2)]
    roomy = candidate("roomy", "t3a.2xlarge", pods("r", 2), created=0, last_event=590)
    (decision,) = plan_disruption(snapshot([*small, roomy], [consolidating()]), at(600)).decisions
    assert (decision.reason, decision.replacements) == (DisruptionReason.UNDERUTILIZED, ())
    assert decision.nodes == ("s0", "s1")
    assert decision.nodeclaims == ("default-s0", "default-s1")
    assert decision.message == ("Underutilized: pods of s0, s1 fit on other nodes; saves $0.2000/h")


def test_an_empty_node_going_in_the_same_pass_is_no_room_for_a_merge() -> None:
    """e, empty, goes as Empty. n0, n1 and n2 ($0.10/h each, one 1-CPU pod) could put a pod in
    e's room, but e is going: their merge is priced as if e were not there, three pods on two
    x.large ($0.285/h at least, short of a 10 % saving on $0.30/h)."""
    x_large = instance_type("x.large", 2.0, 8.0, 0.19)
    empty = candidate("e", "c4.large", created=0)
    busy = [
        candidate(f"n{i}", "c4.large", (CandidatePod(app_pod(f"p{i}", 1000)),), last_event=1)
        for i in range(3)
    ]
    plan = plan_disruption(snapshot([empty, *busy], [consolidating()], [x_large]), at(600))
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(DisruptionReason.EMPTY, ("e",))]
    assert blocked_messages(plan)["n0"].endswith(
        "(3: would cost more: no node saving 10% on $0.3000/h has room for the pods of 3 nodes "
        "(fewer would cost at least $0.2850/h))"
    )
