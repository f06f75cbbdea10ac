"""Launch-relevant hashes of NodePools and EC2NodeClasses, and drift detection.

The controller stamps ``nodepool_hash(spec)`` and ``nodeclass_hash(spec)`` on each
NodeClaim at launch (annotations ``daiku.dev/nodepool-hash``, ``daiku.dev/ec2nodeclass-hash``).
A node drifts when the hash of today's objects differs from the stamp.

What counts (launch-relevant): the NodePool template's labels, annotations, taints,
startupTaints, kubelet and nodeClassRef; the EC2NodeClass's tags, userData,
blockDeviceMappings, metadataOptions, role/instanceProfile, amiFamily, kubelet and the other
launch fields. What does not: weight, limits, disruption, expireAfter, terminationGracePeriod
(behaviour, not what a node is), AMI, subnet and security-group selector terms and status.

Four deliberate departures from "hash everything", as Karpenter does, to avoid churn:
NodePool requirements are not hashed — a node drifts on requirements only when its labels no
longer satisfy them (widening a NodePool replaces nothing); subnets are not hashed — a node
drifts only when its subnet (recorded at launch) left the resolved set (adding a subnet
replaces nothing); security groups are not hashed — a node drifts when its instance's
security group ids (recorded at launch) differ from the class's resolved ones
(``status.securityGroups``), so a new group matching the same tags drifts it and a rewritten
selector that selects the same groups does not; AMIs are not hashed — a node drifts when the
AMI it runs (its NodeClaim's ``status.imageID``) is not among the class's resolved AMIs
(``status.amis``), so a newer image published under the same selector drifts the nodes of
that architecture and no other, and changing the selector to one that still selects the
node's image replaces nothing. A node whose subnet, groups or image are not recorded (launched
before daiku recorded them) never drifts for lack of them.

Hash versions: 2 hashed the security-group selector terms; 3 (now) leaves them out. A claim
stamped by version 2 is accepted while its stamp equals the version-2 hash of today's spec
(``accepted_nodeclass_hashes``), so upgrading replaces no node; such a claim carries no
recorded groups, and its stamp still drifts it when the selector terms change.
Canonical form: JSON with sorted keys, no whitespace, lists of taints sorted; sha256 hex.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_svc.core.disruption.model import Candidate, DisruptionSnapshot
from scheduler_svc.core.requirements import Requirements

_NODEPOOL_TEMPLATE_SPEC_FIELDS = ("taints", "startupTaints", "kubelet", "nodeClassRef")
_NODECLASS_IGNORED_FIELDS = frozenset(
    {"amiSelectorTerms", "subnetSelectorTerms", "securityGroupSelectorTerms"}
)
# Bumped when what the EC2NodeClass hash covers changes (2: AMIs left it for imageID checks;
# 3: security groups left it for a check of the instance's group ids).
NODECLASS_HASH_VERSION = 3
# Earlier versions whose stamps are still accepted (see the module docstring).
_ACCEPTED_NODECLASS_HASH_VERSIONS = (2,)


def canonical_json(value: object) -> str:
    """Deterministic JSON: sorted keys, no whitespace (the same object, the same text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(value: object) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _sorted_list(items: object) -> list[Any]:
    # Taints are a set in meaning; their written order must not cause drift.
    if not isinstance(items, list):
        return []
    return sorted(items, key=canonical_json)


def nodepool_hash(spec: Mapping[str, Any]) -> str:
    """The launch-relevant hash of a NodePool ``spec`` (see the module docstring)."""
    template = spec.get("template") or {}
    metadata = template.get("metadata") or {}
    template_spec = template.get("spec") or {}
    relevant: dict[str, Any] = {
        "labels": dict(metadata.get("labels") or {}),
        "annotations": dict(metadata.get("annotations") or {}),
    }
    for name in _NODEPOOL_TEMPLATE_SPEC_FIELDS:
        value = template_spec.get(name)
        if name in ("taints", "startupTaints"):
            value = _sorted_list(value)
        if value:
            relevant[name] = value
    return _digest(relevant)


def nodeclass_hash(spec: Mapping[str, Any], *, version: int = NODECLASS_HASH_VERSION) -> str:
    """The launch-relevant hash of an EC2NodeClass ``spec``: AMI, subnet and security-group
    selector terms left out (drift checks them against the node). ``version=2`` gives the
    earlier hash, which covered the security-group selector terms."""
    if version not in (NODECLASS_HASH_VERSION, *_ACCEPTED_NODECLASS_HASH_VERSIONS):
        raise ValueError(f"unknown EC2NodeClass hash version {version}")
    relevant: dict[str, Any] = {k: v for k, v in spec.items() if k not in _NODECLASS_IGNORED_FIELDS}
    if version == 2:  # the version that hashed the selector terms
        relevant["securityGroupSelectorTerms"] = spec.get("securityGroupSelectorTerms") or []
    relevant["hashVersion"] = version
    return _digest(relevant)


def accepted_nodeclass_hashes(spec: Mapping[str, Any]) -> frozenset[str]:
    """The earlier versions' hashes of ``spec`` that a claim's stamp may equal without
    drifting (claims stamped before an upgrade)."""
    return frozenset(nodeclass_hash(spec, version=v) for v in _ACCEPTED_NODECLASS_HASH_VERSIONS)


def _id_list(ids: Iterable[str]) -> str:
    return "[" + ", ".join(sorted(ids)) + "]"


def drift_reason(  # noqa: PLR0911 - one exit per kind of drift
    candidate: Candidate, snapshot: DisruptionSnapshot
) -> str | None:
    """Why ``candidate`` no longer matches its NodePool/EC2NodeClass (None: it matches)."""
    pool = snapshot.nodepool(candidate.nodepool)
    if pool is None:
        return None
    if (
        pool.nodepool_hash is not None
        and candidate.nodepool_hash is not None
        and pool.nodepool_hash != candidate.nodepool_hash
    ):
        return f"NodePool {pool.name} changed since launch (nodepool-hash differs)"
    unmet = Requirements.of(pool.nodepool.requirements).first_unmet(candidate.labels)
    if unmet is not None:
        return f"NodePool {pool.name} now requires {unmet}"
    nodeclass = snapshot.nodeclass(pool.nodeclass)
    if nodeclass is None:
        return None
    if (
        nodeclass.nodeclass_hash is not None
        and candidate.nodeclass_hash is not None
        and candidate.nodeclass_hash != nodeclass.nodeclass_hash
        and candidate.nodeclass_hash not in nodeclass.accepted_nodeclass_hashes
    ):
        return f"EC2NodeClass {nodeclass.name} changed since launch (ec2nodeclass-hash differs)"
    if (
        nodeclass.subnet_ids is not None
        and candidate.subnet_id is not None
        and candidate.subnet_id not in nodeclass.subnet_ids
    ):
        return (
            f"subnet {candidate.subnet_id} is no longer selected by EC2NodeClass {nodeclass.name}"
        )
    if (
        nodeclass.security_group_ids is not None
        and candidate.security_group_ids is not None
        and candidate.security_group_ids != nodeclass.security_group_ids
    ):
        return (
            f"security groups {_id_list(candidate.security_group_ids)} differ from "
            f"EC2NodeClass {nodeclass.name}'s {_id_list(nodeclass.security_group_ids)}"
        )
    if (
        nodeclass.ami_ids is not None
        and candidate.image_id
        and candidate.image_id not in nodeclass.ami_ids
    ):
        return f"AMI {candidate.image_id} is no longer selected by EC2NodeClass {nodeclass.name}"
    return None
