"""The snapshot's view of EC2NodeClasses (resolved ids from status, accepted hashes) and of
the subnet and security groups a claim's launch recorded."""

from __future__ import annotations

from typing import Any

from scheduler_svc.core.disruption import accepted_nodeclass_hashes, nodeclass_hash
from scheduler_svc.disruption.snapshot import nodeclass_state, recorded_security_group_ids

SPEC: dict[str, Any] = {
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "daiku"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "daiku"}}],
    "role": "KarpenterNodeRole",
}


def test_nodeclass_state_reads_resolved_ids_from_status() -> None:
    """Subnet, security group and AMI ids come from status.subnets/securityGroups/amis, with
    the current hash and the version-2 hash it accepts."""
    obj = {
        "metadata": {"name": "default"},
        "spec": SPEC,
        "status": {
            "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
            "securityGroups": [{"id": "sg-1", "name": "nodes"}, {"id": "sg-2", "name": "extra"}],
            "amis": [{"id": "ami-1", "name": "al2023"}],
        },
    }
    state = nodeclass_state(obj)
    assert state.name == "default"
    assert state.subnet_ids == frozenset({"subnet-1"})
    assert state.security_group_ids == frozenset({"sg-1", "sg-2"})
    assert state.ami_ids == frozenset({"ami-1"})
    assert state.nodeclass_hash == nodeclass_hash(SPEC)
    assert state.accepted_nodeclass_hashes == accepted_nodeclass_hashes(SPEC)


def test_nodeclass_state_without_status_has_nothing_resolved() -> None:
    """A class with no status (or empty lists) resolves nothing: None, so nothing drifts."""
    state = nodeclass_state({"metadata": {"name": "default"}, "spec": SPEC, "status": {}})
    assert (state.subnet_ids, state.security_group_ids, state.ami_ids) == (None, None, None)


def test_recorded_security_group_ids_parse_the_annotation() -> None:
    """The comma-separated annotation becomes a set; absent or empty is None (not recorded)."""
    assert recorded_security_group_ids(
        {"daiku.dev/security-group-ids": "sg-2, sg-1,,"}
    ) == frozenset({"sg-1", "sg-2"})
    assert recorded_security_group_ids({"daiku.dev/security-group-ids": ""}) is None
    assert recorded_security_group_ids({}) is None
