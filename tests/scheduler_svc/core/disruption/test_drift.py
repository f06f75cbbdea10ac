"""Launch-relevant hashes: what changes them (drift) and what does not (behaviour)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler_svc.core.disruption import nodeclass_hash, nodepool_hash

NODEPOOL: dict[str, Any] = {
    "weight": 10,
    "limits": {"cpu": "100"},
    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
    "template": {
        "metadata": {"labels": {"team": "a"}},
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ],
            "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}],
            "expireAfter": "720h",
        },
    },
}


def changed(path: tuple[str, ...], value: object) -> dict[str, Any]:
    spec = copy.deepcopy(NODEPOOL)
    target = spec
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return spec


@pytest.mark.parametrize(
    ("path", "value", "drifts"),
    [
        (("template", "metadata", "labels"), {"team": "b"}, True),
        (("template", "metadata", "annotations"), {"x": "y"}, True),
        (("template", "spec", "startupTaints"), [{"key": "s", "effect": "NoSchedule"}], True),
        (("template", "spec", "kubelet"), {"maxPods": 50}, True),
        (
            ("template", "spec", "taints"),
            [{"key": "b", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}],
            False,
        ),
        (("weight",), 50, False),
        (("limits",), {"cpu": "1000"}, False),
        (("disruption",), {"consolidationPolicy": "WhenEmptyOrUnderutilized"}, False),
        (("template", "spec", "expireAfter"), "24h", False),
        (("template", "spec", "terminationGracePeriod"), "1h", False),
        # Requirements drift by label check, not by hash (widening replaces nothing).
        (("template", "spec", "requirements"), [], False),
    ],
)
def test_nodepool_hash(path: tuple[str, ...], value: object, drifts: bool) -> None:
    """Launch fields change the NodePool hash; behaviour, taint order and requirements do not."""
    assert (nodepool_hash(changed(path, value)) != nodepool_hash(NODEPOOL)) is drifts


def test_nodeclass_hash() -> None:
    """Security groups (their terms, or the ids they resolve to when given), user data and tags
    change the EC2NodeClass hash; AMI and subnet selector terms and the order of resolved ids
    do not (drift compares AMIs and subnets with the node itself)."""
    spec = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
        "userData": "echo",
        "tags": {"a": "1"},
    }
    base = nodeclass_hash(spec)
    other_amis = {**spec, "amiSelectorTerms": [{"id": "ami-1"}, {"id": "ami-2"}]}
    assert nodeclass_hash(other_amis) == base
    assert nodeclass_hash({**spec, "subnetSelectorTerms": [{"id": "subnet-1"}]}) == base
    assert nodeclass_hash({**spec, "securityGroupSelectorTerms": [{"id": "sg-9"}]}) != base
    assert nodeclass_hash({**spec, "userData": "echo 2"}) != base
    assert nodeclass_hash({**spec, "tags": {"a": "2"}}) != base
    resolved = nodeclass_hash(spec, security_group_ids=["sg-1", "sg-2"])
    assert nodeclass_hash(spec, security_group_ids=["sg-2", "sg-1"]) == resolved
    assert nodeclass_hash(spec, security_group_ids=["sg-3"]) != resolved
    assert len(base) == 64


def test_a_node_drifts_when_its_subnet_is_no_longer_selected() -> None:
    """A node in a subnet the EC2NodeClass no longer resolves drifts; adding subnets does not."""
    import dataclasses

    from scheduler_svc.core.disruption import NodeClassState, drift_reason
    from tests.scheduler_svc.core.disruption.builders import candidate, pool, snapshot

    node = candidate("n1", "c4.large", (), subnet_id="subnet-1")
    nodepool = dataclasses.replace(pool(), nodeclass="default")
    wider = NodeClassState("default", subnet_ids=frozenset({"subnet-1", "subnet-2"}))
    moved = NodeClassState("default", subnet_ids=frozenset({"subnet-2"}))
    assert drift_reason(node, snapshot([node], [nodepool], nodeclasses=(wider,))) is None
    assert drift_reason(node, snapshot([node], [nodepool], nodeclasses=(moved,))) == (
        "subnet subnet-1 is no longer selected by EC2NodeClass default"
    )
