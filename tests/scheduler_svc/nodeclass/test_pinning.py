"""Launches pinned to the subnets and security groups of a current EC2NodeClass status."""

from __future__ import annotations

from typing import Any

from scheduler_svc.core.nodeclass import (
    AmiTerm,
    NodeClassSpec,
    SecurityGroupTerm,
    SubnetTerm,
    pairs,
)
from scheduler_svc.nodeclass.pinning import (
    pin_resolved,
    resolved_security_group_ids,
    resolved_subnet_ids,
)

DISCOVERY = {"karpenter.sh/discovery": "daiku"}


def node_class(*, subnets: str = "True", groups: str = "True", observed: int = 3) -> Any:
    return {
        "metadata": {"name": "default", "generation": 3},
        "status": {
            "subnets": [{"id": "subnet-a", "zone": "us-east-1a"}, {"id": "subnet-b"}],
            "securityGroups": [{"id": "sg-1", "name": "nodes"}, {"id": "sg-2"}],
            "conditions": [
                {"type": "SubnetsReady", "status": subnets, "observedGeneration": observed},
                {"type": "SecurityGroupsReady", "status": groups, "observedGeneration": observed},
            ],
        },
    }


def proto() -> NodeClassSpec:
    return NodeClassSpec(
        name="default",
        subnet_terms=(SubnetTerm(tags=pairs(DISCOVERY)),),
        security_group_terms=(SecurityGroupTerm(tags=pairs(DISCOVERY)),),
        ami_terms=(AmiTerm(alias="al2023@latest"),),
    )


def test_launches_are_pinned_to_the_current_status_subnets_and_groups() -> None:
    """With SubnetsReady and SecurityGroupsReady True at the class's generation, a launch's
    subnet and group terms become the status's ids; the AMI terms (no AMIsReady) and the
    original message are left as they were."""
    original = proto()
    pinned = pin_resolved(original, node_class())
    assert [(t.id, dict(t.tags)) for t in pinned.subnet_terms] == [
        ("subnet-a", {}),
        ("subnet-b", {}),
    ]
    assert [(t.id, dict(t.tags)) for t in pinned.security_group_terms] == [
        ("sg-1", {}),
        ("sg-2", {}),
    ]
    assert [t.alias for t in pinned.ami_terms] == ["al2023@latest"]
    assert [dict(t.tags) for t in original.subnet_terms] == [DISCOVERY]


def test_a_stale_or_unready_status_list_leaves_its_terms() -> None:
    """A status observed at an older generation pins nothing; an unready list is left to its
    terms while the other, current one is pinned."""
    original = proto()
    assert pin_resolved(original, node_class(observed=2)) is original
    assert resolved_subnet_ids(node_class(subnets="False")) == ()
    assert resolved_security_group_ids(node_class(subnets="False")) == ("sg-1", "sg-2")
    pinned = pin_resolved(original, node_class(subnets="False"))
    assert [dict(t.tags) for t in pinned.subnet_terms] == [DISCOVERY]
    assert [t.id for t in pinned.security_group_terms] == ["sg-1", "sg-2"]
