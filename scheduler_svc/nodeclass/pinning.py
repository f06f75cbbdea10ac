"""Launches use the AMIs, subnets and security groups the EC2NodeClass's status shows, as
Karpenter's launches do.

Drift compares a node's AMI, subnet and security groups with `status.amis`/`status.subnets`/
`status.securityGroups`; if launches resolved the selectors themselves, a launch between a
change in the cloud (a new AMI published, a subnet or group tagged) and the next status
refresh would start a node the status does not list yet, drifted from birth (and replaced, and
its replacement too, until the status caught up). So each of a launch's selector term lists is
replaced by the ids in its status list while that list is current: its condition (`AMIsReady`,
`SubnetsReady`, `SecurityGroupsReady`) True and observed at the class's generation (a spec
changed since is resolved from its own terms until the status catches up).
"""

from __future__ import annotations

from scheduler_svc.core.nodeclass import NodeClassSpec
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import condition
from scheduler_svc.nodeclass.readiness import AMIS_READY, SECURITY_GROUPS_READY, SUBNETS_READY


def _current_ids(node_class: KubeObject, condition_type: str, status_field: str) -> tuple[str, ...]:
    """The ids of `status.<status_field>` while `condition_type` says it is current."""
    ready = condition(node_class, condition_type)
    if ready is None or ready.get("status") != "True":
        return ()
    generation = (node_class.get("metadata") or {}).get("generation")
    observed = ready.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed != generation:
        return ()
    status = node_class.get("status")
    items = status.get(status_field) if isinstance(status, dict) else None
    return tuple(
        str(i["id"]) for i in items or () if isinstance(i, dict) and isinstance(i.get("id"), str)
    )


def resolved_ami_ids(node_class: KubeObject) -> tuple[str, ...]:
    """The AMI ids of a current `status.amis` (empty: none, or not current)."""
    return _current_ids(node_class, AMIS_READY, "amis")


def resolved_subnet_ids(node_class: KubeObject) -> tuple[str, ...]:
    """The subnet ids of a current `status.subnets` (empty: none, or not current)."""
    return _current_ids(node_class, SUBNETS_READY, "subnets")


def resolved_security_group_ids(node_class: KubeObject) -> tuple[str, ...]:
    """The security group ids of a current `status.securityGroups` (empty: none, or not
    current)."""
    return _current_ids(node_class, SECURITY_GROUPS_READY, "securityGroups")


def pin_amis(spec: NodeClassSpec, node_class: KubeObject) -> NodeClassSpec:
    """`spec` with its AMI selector terms replaced by the resolved ids (unchanged when the
    status is not current)."""
    return spec.pinned(ami_ids=resolved_ami_ids(node_class))


def pin_resolved(spec: NodeClassSpec, node_class: KubeObject) -> NodeClassSpec:
    """`spec` with its AMI, subnet and security-group selector terms each replaced by the
    resolved ids of a current status list (each list left as written when not current)."""
    return spec.pinned(
        ami_ids=resolved_ami_ids(node_class),
        subnet_ids=resolved_subnet_ids(node_class),
        security_group_ids=resolved_security_group_ids(node_class),
    )
