"""A pod spread over zones opens one claim per zone (``Packing._open_bins``); when the
NodePool's limits cannot hold a claim in every zone, the pod still gets one claim in a single
zone, as any zone meets the spread for a first pod. Three zones, types of 4 CPUs."""

from __future__ import annotations

from scheduler_svc.core import LabelSelector, NodePool, NodePoolLimits, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, run

_SPREAD = TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "x"}))
_TYPES = [instance_type("t", 4, 16, 0.10)]


def _one_spread_pod_under(limits: NodePoolLimits) -> tuple[int, tuple[str, ...]]:
    result = run(
        [pod("x-0", 1, 1, labels={"app": "x"}, topology_spread=(_SPREAD,))],
        _TYPES,
        [NodePool("default", limits=limits)],
    )
    return len(result.new_claims), tuple(u.reason for u in result.unschedulable)


def test_a_spread_pod_gets_the_one_node_a_nodes_limit_allows() -> None:
    """limits.nodes 1: three zone claims would pass it, one does not."""
    assert _one_spread_pod_under(NodePoolLimits(nodes=1)) == (1, ())


def test_a_spread_pod_gets_the_one_node_a_cpu_limit_allows() -> None:
    """limits.cpu 4: a third of it per zone holds no type, the whole of it holds one t."""
    assert _one_spread_pod_under(NodePoolLimits(cpu_millis=4000)) == (1, ())


def test_a_spread_pod_past_the_limit_is_refused_naming_it() -> None:
    """limits.nodes 0: not even one claim; the pod's reason names the limit."""
    count, reasons = _one_spread_pod_under(NodePoolLimits(nodes=0))
    assert count == 0
    assert reasons == ("NodePool default limit nodes=0 reached",)
