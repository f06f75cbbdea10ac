"""What replaces a node that must go (node repair here; rebalancing shares it): the pods are
simulated onto every node that stays, daiku's or not, with the DaemonSets' share counted, and
the decision says what is launched, for which claim, at what price."""

from __future__ import annotations

from scheduler_svc.core import Node, Resources
from scheduler_svc.core.disruption import CandidatePod, NodeCondition, plan_repair
from tests.scheduler_svc.core.builders import GIB
from tests.scheduler_svc.core.disruption.builders import app_pod, at, candidate, pods, snapshot

BROKEN = (NodeCondition("Ready", "False", at(0)),)
READY = (NodeCondition("Ready", "True", at(0)),)
UNHEALTHY = "Unhealthy: Ready False for 30m (toleration 30m)"
# Four healthy c4.large with 1500m of 1930m taken: no room for another 500m pod.
FULL = [candidate(f"ok{i}", "c4.large", pods(f"o{i}", 3), conditions=READY) for i in range(4)]


def test_a_broken_node_with_no_pods_goes_with_nothing_launched() -> None:
    node = candidate("e", "c4.xlarge", (), conditions=BROKEN)
    (decision,) = plan_repair(snapshot([node, *FULL]), at(1800)).decisions
    assert decision.message == f"{UNHEALTHY}; no pods to move"
    assert decision.nodeclaims == ("default-e",)
    assert decision.replacements == ()
    assert (decision.old_price_per_hour, decision.new_price_per_hour) == (0.199, 0.0)


def test_pods_move_to_a_node_daiku_did_not_launch() -> None:
    node = candidate("s", "c4.xlarge", pods("s", 2), conditions=BROKEN)
    other = Node(
        "other",
        labels={"kubernetes.io/hostname": "other"},
        allocatable=Resources(4000, 8 * GIB, 110, 20 * GIB),
    )
    state = snapshot([node, *FULL], other_nodes=(other,))
    (decision,) = plan_repair(state, at(1800)).decisions
    assert decision.message == f"{UNHEALTHY}; its pods fit on other nodes"
    assert decision.replacements == ()


def test_several_replacements_are_named_and_priced_together() -> None:
    """Two 6-CPU pods need a node each: two t3a.2xlarge, $0.6016/h together."""
    big = tuple(CandidatePod(app_pod(f"b{i}", 6000)) for i in range(2))
    node = candidate("b", "c4.xlarge", big, conditions=BROKEN)
    (decision,) = plan_repair(snapshot([node, *FULL]), at(1800)).decisions
    assert decision.message == f"{UNHEALTHY}; replaced by t3a.2xlarge, t3a.2xlarge"
    assert decision.nodeclaims == ("default-b",)
    assert decision.new_price_per_hour == 0.6016


def test_the_replacement_has_room_for_the_daemonsets_too() -> None:
    """Three 500m pods fit a c4.large (1930m) alone, not beside a 500m DaemonSet pod."""
    node = candidate("t", "c4.xlarge", pods("t", 3), conditions=BROKEN)
    (alone,) = plan_repair(snapshot([node, *FULL]), at(1800)).decisions
    assert alone.message == f"{UNHEALTHY}; replaced by c4.large"
    daemonset = app_pod("ds", 500, 0)
    (beside,) = plan_repair(snapshot([node, *FULL], daemonsets=(daemonset,)), at(1800)).decisions
    assert beside.message == f"{UNHEALTHY}; replaced by c4.xlarge"


def test_a_pod_nothing_can_hold_waits_and_is_not_said_to_fit_elsewhere() -> None:
    """A 20-CPU pod fits no node and no instance type: the node is still repaired, and the
    Event says the pod will wait and why, not that its pods fit on other nodes."""
    huge = (CandidatePod(app_pod("huge", 20000)),)
    node = candidate("h", "c4.xlarge", huge, conditions=BROKEN)
    (decision,) = plan_repair(snapshot([node, *FULL]), at(1800)).decisions
    assert decision.message == (
        f"{UNHEALTHY}; 1 pod(s) will wait: no instance type has 20 cpu allocatable under "
        "NodePool default"
    )
    assert decision.replacements == ()
