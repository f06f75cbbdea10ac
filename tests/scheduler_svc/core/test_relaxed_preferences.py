"""The plan says which preferences it dropped to place a pod (issue 19: ``daiku plan --explain``
for placed pods).

Karpenter relaxes a pod's preferences one at a time when it cannot be scheduled with them and
logs each ("relaxing soft constraints for pod since it previously failed to schedule, removing:
..." — kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/preferences.go
``Relax``); daiku records the same in ``SchedulingResult.relaxed``.
"""

from __future__ import annotations

from scheduler_svc.core import (
    NodePool,
    Operator,
    Pod,
    PreferredNodeAffinityTerm,
    RelaxedPod,
    Requirement,
    Taint,
    TaintEffect,
)

from .builders import instance_type, pod, run

ZONE = "topology.kubernetes.io/zone"


def _preferring(name: str, *zones_and_weights: tuple[str, int], cpu: float = 1) -> Pod:
    return pod(
        name,
        cpu,
        1,
        preferred_node_affinity=tuple(
            PreferredNodeAffinityTerm(w, (Requirement(ZONE, Operator.IN, (z,)),))
            for z, w in zones_and_weights
        ),
    )


def test_a_dropped_preferred_node_term_is_listed_for_the_placed_pod() -> None:
    """The heaviest term (zone mars-1, which no offering has) is dropped, the next one is met:
    the result names the dropped term, and a pod whose preference held is not listed."""
    picky = _preferring("picky", ("mars-1", 100), ("zone-c", 50))
    content = _preferring("content", ("zone-b", 10))

    result = run([picky, content], [instance_type("m5.large", 2, 8, 0.096)])

    assert result.unschedulable == ()
    assert result.relaxed == (
        RelaxedPod("default/picky", (f"preferred node affinity (weight 100): {ZONE} In [mars-1]",)),
    )


def test_a_prefer_no_schedule_pool_used_last_is_a_relaxed_preference() -> None:
    """Only the PreferNoSchedule pool can hold the pod: it lands there after the last
    relaxation (Karpenter's toleratePreferNoSchedule), and the result says so."""
    tainted = NodePool("a-tainted", taints=(Taint("big", TaintEffect.PREFER_NO_SCHEDULE),))
    small_only = NodePool(
        "b-small",
        requirements=(Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.large",)),),
    )
    types = [instance_type("m5.large", 2, 8, 0.096), instance_type("m5.4xlarge", 16, 64, 0.768)]

    result = run([pod("big", 8, 8)], types, (tainted, small_only))

    assert [c.nodepool for c in result.new_claims] == ["a-tainted"]
    assert result.relaxed == (
        RelaxedPod("default/big", ("avoiding NodePools' PreferNoSchedule taints",)),
    )


def test_an_unschedulable_pod_is_not_listed_as_relaxed() -> None:
    """Every preference dropped and still no node: the pod is unschedulable, not relaxed."""
    huge = _preferring("huge", ("zone-a", 1), cpu=64)

    result = run([huge], [instance_type("m5.large", 2, 8, 0.096)])

    assert [u.pod for u in result.unschedulable] == ["default/huge"]
    assert result.relaxed == ()
