"""A pod whose required node affinity ORs two terms shares a new claim that meets its second
term though its first conflicts with the claim (``InstanceFit._static_claim`` tries every term,
as kube-scheduler matches a node against each). The NodePool launches only in zone-b; pod b
asks for zone-a OR zone-b; the 2-cpu pod a opens the claim first, on a 4-cpu type."""

from __future__ import annotations

from scheduler_svc.core import NodePool, Operator, Requirement
from scheduler_svc.core.requirements import LABEL_ZONE
from tests.scheduler_svc.core.builders import instance_type, pod, run


def test_a_pod_shares_a_claim_through_its_second_term() -> None:
    pool = NodePool("default", requirements=(Requirement(LABEL_ZONE, Operator.IN, ("zone-b",)),))
    terms = (
        (Requirement(LABEL_ZONE, Operator.IN, ("zone-a",)),),
        (Requirement(LABEL_ZONE, Operator.IN, ("zone-b",)),),
    )
    pods = [pod("a", 2, 1), pod("b", 1, 1, required_node_affinity=terms)]
    result = run(pods, [instance_type("t", 4, 16, 0.10)], [pool])
    assert result.unschedulable == ()
    [claim] = result.new_claims
    assert set(claim.pods) == {"default/a", "default/b"}
    # Through its second term as written: not by dropping the first (a relaxation).
    assert result.relaxed == ()
