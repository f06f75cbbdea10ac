"""Readiness summaries, status shapes and the AMI pinning of launches."""

from __future__ import annotations

from typing import Any

from scheduler_svc.actuator_client import (
    NodeClassResolution,
    ResolvedAmi,
    ResolvedSecurityGroup,
    ResolvedSubnet,
)
from scheduler_svc.core.nodeclass import AmiTerm, NodeClassSpec
from scheduler_svc.nodeclass import (
    NODECLASS_READINESS,
    NODEPOOL_READINESS,
    first_unresolved,
    ready_of,
    status_from_resolution,
)
from scheduler_svc.nodeclass.pinning import pin_amis, resolved_ami_ids


def cond(kind: str, status: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "message": message}


def test_ready_is_false_with_the_first_false_condition_it_summarizes() -> None:
    """Ready is False with the message of the first False summarized condition, True when
    none is False (absent ones do not count), and ignores conditions it does not summarize."""
    conditions = [
        cond("ValidationSucceeded", "True"),
        cond("AMIsReady", "False", "no AMI"),
        cond("SubnetsReady", "False", "no subnet"),
        cond("Drifted", "False"),
    ]
    assert ready_of(conditions, NODECLASS_READINESS) == ("False", "NotReady", "no subnet")
    assert ready_of(conditions[:1], NODECLASS_READINESS) == ("True", "Ready", "")
    assert ready_of([], NODEPOOL_READINESS) == ("True", "Ready", "")
    assert ready_of([cond("NodeClassReady", "False", "x")], NODEPOOL_READINESS)[0] == "False"
    assert first_unresolved(conditions) == conditions[2]
    assert first_unresolved(conditions[:1]) is None


def test_the_resolution_is_written_in_karpenter_status_shapes() -> None:
    """Subnets carry id, zone and zoneID; groups id and name; AMIs id, name and requirements
    as node selector requirements; empty optional fields are left out."""
    resolution = NodeClassResolution(
        subnets=(ResolvedSubnet("subnet-1", "us-east-1a", "use1-az1"),),
        security_groups=(ResolvedSecurityGroup("sg-1", ""),),
        amis=(ResolvedAmi("ami-1", "al2023", (("kubernetes.io/arch", "In", ("amd64",)),)),),
    )
    assert status_from_resolution(resolution) == {
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1"}],
        "amis": [
            {
                "id": "ami-1",
                "name": "al2023",
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                ],
            }
        ],
    }


def node_class(*, amis_ready: str = "True", observed: int = 3, generation: int = 3) -> Any:
    return {
        "metadata": {"name": "default", "generation": generation},
        "status": {
            "amis": [{"id": "ami-new"}, {"id": "ami-arm"}],
            "conditions": [
                {"type": "AMIsReady", "status": amis_ready, "observedGeneration": observed}
            ],
        },
    }


def test_launches_are_pinned_to_the_current_status_amis() -> None:
    """A launch's AMI terms become the status's ids when AMIsReady is True at the class's
    generation; a stale or unready status leaves the terms as written."""
    proto = NodeClassSpec(name="default", ami_terms=(AmiTerm(alias="al2023@latest"),))
    pinned = pin_amis(proto, node_class())
    assert [t.id for t in pinned.ami_terms] == ["ami-new", "ami-arm"]
    assert not any(t.alias for t in pinned.ami_terms)
    assert [t.alias for t in proto.ami_terms] == ["al2023@latest"]  # not mutated
    assert resolved_ami_ids(node_class(observed=2)) == ()
    assert resolved_ami_ids(node_class(amis_ready="False")) == ()
    assert pin_amis(proto, node_class(observed=2)) is proto
