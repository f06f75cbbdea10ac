"""`node_class_name_of`: the one reader of a NodeClaim's or NodePool's nodeClassRef (issue 12
item 1: the provisioner, the static pools, the disruption controller and the node class
controller each read it raw before, four ways)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.kube.convert import node_class_name_of

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        ({"kind": "NodeClaim", "spec": {"nodeClassRef": REF}}, "default"),
        ({"kind": "NodePool", "spec": {"template": {"spec": {"nodeClassRef": REF}}}}, "default"),
        # A NodePool read without its kind (a mirror's slimmed dict): its template says it.
        ({"spec": {"template": {"spec": {"nodeClassRef": REF}}}}, "default"),
        ({"kind": "NodeClaim", "spec": {}}, None),
        ({"kind": "NodeClaim", "spec": {"nodeClassRef": {"name": ""}}}, None),
        ({"kind": "NodeClaim", "spec": {"nodeClassRef": "default"}}, None),
        ({"kind": "NodePool", "spec": {"template": "x"}}, None),
        ({"kind": "NodePool"}, None),
    ],
)
def test_reads_the_reference_or_none(obj: dict[str, Any], name: str | None) -> None:
    assert node_class_name_of(obj) == name
