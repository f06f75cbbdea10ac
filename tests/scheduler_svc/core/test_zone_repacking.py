"""The second opinion for claims holding zone-spread pods (``core/zone_repacking``): spread pods
keep their zone, share nodes with pods that only need room, and the plan never gets dearer.

Types: small 2 cpu $0.10, medium 4 cpu $0.18, large 16 cpu $0.64 (cheaper per cpu as they
grow), offered in three zones. The greedy pass lets each spread pod pin the claim it joins to
a zone, so a batch ends one claim per zone, each sized for what reached it first."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from scheduler_svc.core import NodePool, Pod, SchedulingInput, SchedulingResult, solve
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import (
    LabelSelector,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from scheduler_svc.core.requirements import LABEL_HOSTNAME, LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, zone_of

TYPES = (
    instance_type("small", 2, 8, 0.10),
    instance_type("medium", 4, 16, 0.18),
    instance_type("large", 16, 64, 0.64),
)
GREEDY_ONLY = PackingSettings(max_pods=0)


def _zone_spread() -> TopologySpreadConstraint:
    return TopologySpreadConstraint(LABEL_ZONE, 1, label_selector=LabelSelector.of({"app": "web"}))


def _workload(web: int, workers: int, api: int) -> list[Pod]:
    """``web`` pods of 250m spread over zones, ``workers`` of 2 cpu, ``api`` of 1 cpu."""
    spread = (_zone_spread(),)
    return [
        *(pod(f"web-{i}", 0.25, 0.5, labels={"app": "web"}, topology_spread=spread)
          for i in range(web)),
        *(pod(f"worker-{i}", 2, 4) for i in range(workers)),
        *(pod(f"api-{i}", 1, 2) for i in range(api)),
    ]  # fmt: skip


def _solve(
    pods: list[Pod],
    pool: NodePool | None = None,
    packing: PackingSettings | None = None,
) -> SchedulingResult:
    problem = SchedulingInput(tuple(pods), (pool or NodePool("default"),), TYPES)
    result = solve(problem) if packing is None else solve(problem, packing=packing)
    assert not result.unschedulable
    return result


def _web_per_zone(result: SchedulingResult, pods: list[Pod]) -> Counter[str]:
    return Counter(zone_of(result, p.key) for p in pods if p.labels.get("app") == "web")


def test_spread_pods_share_nodes_with_other_pods_instead_of_a_claim_per_zone() -> None:
    """6 web pods over 3 zones, 2 workers and 3 api pods (8.5 cpu): one node per zone is
    forced, and medium + medium + small ($0.46/h, 10 cpu) is the cheapest such set (two
    mediums and a small are the only three nodes with room for 8.5 cpu under $0.84). The
    greedy pass alone buys $0.78/h."""
    pods = _workload(web=6, workers=2, api=3)
    greedy = _solve(pods, packing=GREEDY_ONLY)
    result = _solve(pods)
    assert greedy.total_price_per_hour == pytest.approx(0.78)
    assert result.total_price_per_hour == pytest.approx(0.46)
    assert sorted(c.instance_type for c in result.new_claims) == ["medium", "medium", "small"]
    assert _web_per_zone(result, pods) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


@pytest.mark.parametrize(
    ("web", "workers", "api"), list(itertools.product((3, 6, 9), (2, 4, 6), (0, 3, 6)))
)
def test_spread_pods_keep_their_zone_and_the_plan_never_gets_dearer(
    web: int, workers: int, api: int
) -> None:
    """Whatever the mix: every spread pod's zone count is the greedy pass's (so the spread
    holds as the greedy pass made it hold), and the plan costs no more than the greedy one."""
    pods = _workload(web, workers, api)
    greedy = _solve(pods, packing=GREEDY_ONLY)
    result = _solve(pods)
    assert _web_per_zone(result, pods) == _web_per_zone(greedy, pods)
    assert result.total_price_per_hour <= greedy.total_price_per_hour + 1e-9


def test_claims_of_pods_with_a_hostname_term_are_left_to_the_greedy_pass() -> None:
    """Pods with a hostname anti-affinity (a term on another key than the zone) may not move:
    each stays alone on its node, however much cheaper sharing would be."""
    anti = PodAffinityTerm(LABEL_HOSTNAME, LabelSelector.of({"app": "cache"}))
    pods = [
        *_workload(web=6, workers=2, api=3),
        *(pod(f"cache-{i}", 1, 2, labels={"app": "cache"}, pod_anti_affinity=(anti,))
          for i in range(3)),
    ]  # fmt: skip
    result = _solve(pods)
    hosts = Counter(
        index
        for index, claim in enumerate(result.new_claims)
        for key in claim.pods
        if key.startswith("default/cache-")
    )
    assert len(hosts) == 3
    assert set(hosts.values()) == {1}
    greedy = _solve(pods, packing=GREEDY_ONLY)
    assert _web_per_zone(result, pods) == _web_per_zone(greedy, pods)


def test_pods_whose_own_node_affinity_names_zones_are_not_moved_across_zones() -> None:
    """An api pod that asks for zone-a by node affinity is never placed outside zone-a."""
    pinned_api = pod("api-a", 1, 2, node_selector={LABEL_ZONE: "zone-a"})
    pods = [*_workload(web=6, workers=2, api=2), pinned_api]
    result = _solve(pods)
    assert zone_of(result, pinned_api.key) == "zone-a"
