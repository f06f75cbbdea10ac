"""What an Expired (or Drifted) decision says about the node's pods: that they fit on other
nodes only when the simulation put some there (it said so whenever nothing was launched, even
for a pod nothing can hold; the repair decision had the same fault, fixed in 6206688)."""

from __future__ import annotations

from scheduler_svc.core.disruption import CandidatePod, plan_disruption
from tests.scheduler_svc.core.disruption.builders import app_pod, at, pods
from tests.scheduler_svc.core.disruption.test_methods import expired_state


def test_pods_that_move_to_the_nodes_that_stay_are_said_to_fit_there() -> None:
    (decision,) = plan_disruption(expired_state(*pods("w", 2)), at(3600)).decisions
    assert decision.reason == "Expired"
    assert decision.replacements == ()
    assert decision.message.endswith("; its pods fit on other nodes")


def test_a_pod_nothing_can_hold_waits_and_is_not_said_to_fit_elsewhere() -> None:
    """A 20-CPU pod fits no node and no instance type: the node still goes (expiry is not
    held by pods that cannot move), and the Event says the pod will wait and why."""
    huge = CandidatePod(app_pod("huge", 20000))
    (decision,) = plan_disruption(expired_state(huge), at(3600)).decisions
    assert decision.reason == "Expired"
    assert "fit on other nodes" not in decision.message
    assert "; 1 pod(s) will wait: no instance type has 20 cpu" in decision.message
