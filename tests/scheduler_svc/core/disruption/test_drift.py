"""Launch-relevant hashes: what changes them (drift) and what does not (behaviour)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from scheduler_svc.core.disruption import (
    Candidate,
    NodeClassState,
    accepted_nodeclass_hashes,
    drift_reason,
    nodeclass_hash,
    nodepool_hash,
)
from tests.scheduler_svc.core.disruption.builders import candidate, pool, snapshot

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


NODECLASS: dict[str, Any] = {
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"a": "b"}}],
    "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
    "userData": "echo",
    "tags": {"a": "1"},
}
# nodeclass_hash(NODECLASS) as the version-2 code computed it (commit 3e987f6), the stamp a
# claim launched before security groups left the hash carries.
NODECLASS_V2_HASH = "90ee0bf0bcd3c549958a5e4c26e08775e5f5c65c06e09635b95a58c120f8b888"


def test_nodeclass_hash() -> None:
    """User data and tags change the EC2NodeClass hash; AMI, subnet and security-group
    selector terms do not (drift compares AMIs, subnets and security groups with the node)."""
    spec = NODECLASS
    base = nodeclass_hash(spec)
    other_amis = {**spec, "amiSelectorTerms": [{"id": "ami-1"}, {"id": "ami-2"}]}
    assert nodeclass_hash(other_amis) == base
    assert nodeclass_hash({**spec, "subnetSelectorTerms": [{"id": "subnet-1"}]}) == base
    assert nodeclass_hash({**spec, "securityGroupSelectorTerms": [{"id": "sg-9"}]}) == base
    assert nodeclass_hash({**spec, "userData": "echo 2"}) != base
    assert nodeclass_hash({**spec, "tags": {"a": "2"}}) != base
    assert len(base) == 64


def test_version_2_hashes_are_reproduced_and_accepted() -> None:
    """The version-2 hash of a spec is what the version-2 code stamped, it differs from the
    current hash, and it is among the hashes the spec accepts; changing the security-group
    terms changes it."""
    assert nodeclass_hash(NODECLASS, version=2) == NODECLASS_V2_HASH
    assert nodeclass_hash(NODECLASS) != NODECLASS_V2_HASH
    assert accepted_nodeclass_hashes(NODECLASS) == {NODECLASS_V2_HASH}
    other_groups = {**NODECLASS, "securityGroupSelectorTerms": [{"id": "sg-9"}]}
    assert NODECLASS_V2_HASH not in accepted_nodeclass_hashes(other_groups)
    with pytest.raises(ValueError, match="unknown EC2NodeClass hash version 1"):
        nodeclass_hash(NODECLASS, version=1)


def _drift(node: Candidate, nodeclass: NodeClassState) -> str | None:
    nodepool = dataclasses.replace(pool(), nodeclass="default")
    return drift_reason(node, snapshot([node], [nodepool], nodeclasses=(nodeclass,)))


def _class_state(spec: dict[str, Any], **fields: Any) -> NodeClassState:
    return NodeClassState(
        "default",
        nodeclass_hash(spec),
        accepted_nodeclass_hashes=accepted_nodeclass_hashes(spec),
        **fields,
    )


def test_a_claim_stamped_by_version_2_does_not_drift_on_upgrade() -> None:
    """A node stamped with the version-2 hash of an unchanged spec does not drift; after its
    security-group terms or tags change, it does (it has no recorded groups to compare)."""
    node = candidate("n1", "c4.large", (), nodeclass_hash=NODECLASS_V2_HASH)
    assert _drift(node, _class_state(NODECLASS)) is None
    for changed_spec in (
        {**NODECLASS, "securityGroupSelectorTerms": [{"id": "sg-9"}]},
        {**NODECLASS, "tags": {"a": "2"}},
    ):
        assert _drift(node, _class_state(changed_spec)) == (
            "EC2NodeClass default changed since launch (ec2nodeclass-hash differs)"
        )


def test_a_node_drifts_when_its_subnet_is_no_longer_selected() -> None:
    """A node in a subnet the EC2NodeClass no longer resolves drifts; adding subnets, an
    unresolved class or an unknown subnet (launched before it was recorded) does not."""
    node = candidate("n1", "c4.large", (), subnet_id="subnet-1")
    wider = NodeClassState("default", subnet_ids=frozenset({"subnet-1", "subnet-2"}))
    moved = NodeClassState("default", subnet_ids=frozenset({"subnet-2"}))
    assert _drift(node, wider) is None
    assert _drift(node, NodeClassState("default")) is None
    assert _drift(node, moved) == "subnet subnet-1 is no longer selected by EC2NodeClass default"
    unknown = candidate("n1", "c4.large", ())
    assert _drift(unknown, moved) is None


def test_a_node_drifts_when_its_security_groups_differ_from_the_resolved_set() -> None:
    """A node whose instance's security groups differ from the class's resolved ones (a group
    added, removed or swapped) drifts with both lists named; the same set does not."""
    node = candidate("n1", "c4.large", (), security_group_ids=frozenset({"sg-1", "sg-2"}))
    same = NodeClassState("default", security_group_ids=frozenset({"sg-2", "sg-1"}))
    assert _drift(node, same) is None
    for resolved in ({"sg-1", "sg-2", "sg-3"}, {"sg-1"}, {"sg-1", "sg-9"}):
        state = NodeClassState("default", security_group_ids=frozenset(resolved))
        assert _drift(node, state) == (
            "security groups [sg-1, sg-2] differ from EC2NodeClass default's "
            f"[{', '.join(sorted(resolved))}]"
        )


def test_unknown_or_unresolved_security_groups_never_drift_a_node() -> None:
    """A node launched before its groups were recorded, or a class whose groups are not
    resolved yet, is not drifted for security groups."""
    resolved = NodeClassState("default", security_group_ids=frozenset({"sg-9"}))
    assert _drift(candidate("n1", "c4.large", ()), resolved) is None
    node = candidate("n1", "c4.large", (), security_group_ids=frozenset({"sg-1"}))
    assert _drift(node, NodeClassState("default")) is None
