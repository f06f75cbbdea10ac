"""A topology spread counts the domains of nodes that match any of the pod's ORed required
node-affinity terms (kube-scheduler's nodeAffinityPolicy Honor; Karpenter's topology filter
takes every term), not only the first term's. The spread is on a custom label,
example.com/tier, that only some instance types carry."""

from __future__ import annotations

from scheduler_svc.core import LabelSelector, Operator, Pod, Requirement, TopologySpreadConstraint
from scheduler_svc.core.requirements import LABEL_INSTANCE_TYPE
from tests.scheduler_svc.core.builders import instance_type, pod, run

TIER = "example.com/tier"
_SPREAD = TopologySpreadConstraint(TIER, 1, label_selector=LabelSelector.of({"app": "c"}))


def _spread_pods(count: int, *type_names: str) -> list[Pod]:
    """Pods spread on the tier, whose required node affinity is one term per type name."""
    terms = tuple((Requirement(LABEL_INSTANCE_TYPE, Operator.IN, (name,)),) for name in type_names)
    return [
        pod(
            f"c{i}",
            1,
            1,
            labels={"app": "c"},
            topology_spread=(_SPREAD,),
            required_node_affinity=terms,
        )
        for i in range(count)
    ]


def test_each_ored_terms_domain_takes_a_spread_pod() -> None:
    """Terms gold OR silver: the tiers gold and silver both count, so two pods with maxSkew 1
    go one to each (both on gold would be skew 2 against silver's 0). New nodes take the first
    term; the second pod gets its silver node once its gold term is dropped, as Karpenter's
    removeRequiredNodeAffinityTerm does, and the plan says so."""
    types = [
        instance_type("gold", 8, 16, 0.10, labels={TIER: "gold"}),
        instance_type("silver", 8, 16, 0.20, labels={TIER: "silver"}),
    ]
    result = run(_spread_pods(2, "gold", "silver"), types)
    assert not result.unschedulable
    assert sorted(c.instance_type for c in result.new_claims) == ["gold", "silver"]
    [relaxed] = result.relaxed
    assert relaxed.pod == "default/c1"
    assert relaxed.preferences == (
        "required node affinity term node.kubernetes.io/instance-type In [gold] "
        "(a later term applies)",
    )


def test_a_later_terms_domain_holds_the_spread_when_the_first_term_has_none() -> None:
    """Terms plain OR gold, where only gold carries the tier label: gold is the one domain, so
    the second pod joins the first on the gold node (skew 0), instead of being refused."""
    types = [
        instance_type("plain", 8, 16, 0.10),
        instance_type("gold", 8, 16, 0.20, labels={TIER: "gold"}),
    ]
    result = run(
        [
            pod("h", 3, 1, node_selector={LABEL_INSTANCE_TYPE: "gold"}),
            *_spread_pods(2, "plain", "gold"),
        ],
        types,
    )
    assert not result.unschedulable
    [claim] = result.new_claims
    assert claim.instance_type == "gold"
    assert set(claim.pods) == {"default/h", "default/c0", "default/c1"}
