"""Both second opinions in one solve (decision 0002): claims whose pods only need room
(``repacking``) and claims holding zone-spread pods (``zone_repacking``) are each repacked,
one after the other, over the same list of bins."""

from __future__ import annotations

import pytest

from scheduler_svc.core import NodePool, Pod, SchedulingInput, SchedulingResult, solve
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import LabelSelector, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_ZONE
from scheduler_svc.core.taints import Taint, TaintEffect, Toleration
from tests.scheduler_svc.core.builders import instance_type, pod

# small 2 cpu $0.10, medium 4 cpu $0.18, large 16 cpu $0.64.
TYPES = (
    instance_type("small", 2, 8, 0.10),
    instance_type("medium", 4, 16, 0.18),
    instance_type("large", 16, 64, 0.64),
)
BATCH = NodePool(
    "batch", labels={"team": "batch"}, taints=(Taint("team", TaintEffect.NO_SCHEDULE, "batch"),)
)


def _default_pool_pods() -> list[Pod]:
    """Six 250m web pods spread over zones, two 2-cpu workers and three 1-cpu api pods."""
    spread = (
        TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "web"})),
    )
    web = [
        pod(f"web-{i}", 0.25, 0.5, labels={"app": "web"}, topology_spread=spread) for i in range(6)
    ]
    return [
        *web,
        *(pod(f"worker-{i}", 2, 4) for i in range(2)),
        *(pod(f"api-{i}", 1, 2) for i in range(3)),
    ]


def _cost_by_pool(packing: PackingSettings | None) -> dict[str, float]:
    batch = [
        pod(
            f"batch-{i}",
            1.5,
            1,
            node_selector={"team": "batch"},
            tolerations=(Toleration("team", "Equal", "batch"),),
        )
        for i in range(4)
    ]
    pods = [*_default_pool_pods(), *batch]
    problem = SchedulingInput(tuple(pods), (NodePool("default"), BATCH), TYPES)
    result: SchedulingResult = (
        solve(problem) if packing is None else solve(problem, packing=packing)
    )
    assert result.unschedulable == ()
    costs: dict[str, float] = {}
    for claim in result.new_claims:
        costs[claim.nodepool] = costs.get(claim.nodepool, 0.0) + claim.offerings[0].price_per_hour
    return costs


def test_room_only_and_zone_spread_claims_are_both_repacked_in_one_solve() -> None:
    """The batch pool's four 1.5-cpu pods: the greedy pass buys a medium and two smalls
    ($0.38/h), two mediums hold them for $0.36/h. The default pool's web pods spread over
    three zones beside workers and api pods: $0.78/h greedy, $0.46/h repacked (as
    ``test_zone_repacking`` derives). The zone pass runs after the room-only one has
    replaced claims, and both savings reach the plan."""
    greedy = _cost_by_pool(PackingSettings(max_pods=0))
    assert greedy == {"batch": pytest.approx(0.38), "default": pytest.approx(0.78)}

    assert _cost_by_pool(None) == {"batch": pytest.approx(0.36), "default": pytest.approx(0.46)}
