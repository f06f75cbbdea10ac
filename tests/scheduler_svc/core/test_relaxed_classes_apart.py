"""Pods whose preferences were relaxed form new classes; each is filled on its own. A class
ruled off a node by one of its constraints says nothing about another relaxed class (the
solver skips the rest of a *family*, classes that share constraints, when one of them is
blocked by a constraint: relaxed classes share it with no one)."""

from __future__ import annotations

from scheduler_svc.core import (
    Node,
    NodePool,
    Operator,
    Pod,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
)
from scheduler_svc.core.requirements import LABEL_ZONE

from .builders import GIB, instance_type, pod, run

# No offering is in this zone: a preference for it is dropped after the first round.
NOWHERE = PreferredNodeAffinityTerm(100, (Requirement(LABEL_ZONE, Operator.IN, ("mars-1",)),))


def _preferring_nowhere(name: str, cpu: float, **kwargs: object) -> Pod:
    return pod(name, cpu, 1, preferred_node_affinity=(NOWHERE,), **kwargs)


def test_a_relaxed_pod_lands_on_a_node_another_relaxed_class_is_ruled_off() -> None:
    """Both pods prefer a zone no node has, so both are relaxed and retried in one round. The
    larger one (tried first) requires zone-b and is ruled off the zone-a node by that
    requirement; the smaller one has no such requirement and takes the node's spare room
    instead of a new claim."""
    node = Node(
        "n1",
        {LABEL_ZONE: "zone-a", "kubernetes.io/hostname": "n1"},
        allocatable=Resources(4000, 8 * GIB, 110),
    )
    in_zone_b = _preferring_nowhere("in-zone-b", 2, node_selector={LABEL_ZONE: "zone-b"})
    anywhere = _preferring_nowhere("anywhere", 1)

    result = run(
        [in_zone_b, anywhere],
        [instance_type("m5.large", 2, 8, 0.096)],
        (NodePool("default"),),
        nodes=(node,),
    )

    assert result.unschedulable == ()
    assert [(p.node, p.pods) for p in result.existing_placements] == [("n1", ("default/anywhere",))]
    assert [c.pods for c in result.new_claims] == [("default/in-zone-b",)]
    assert {r.pod for r in result.relaxed} == {"default/anywhere", "default/in-zone-b"}
