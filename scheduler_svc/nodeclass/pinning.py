"""Launches use the AMIs the EC2NodeClass's status shows, as Karpenter's launches do.

Drift compares a node's AMI with `status.amis`; if launches resolved the selector themselves,
a launch between a new AMI's publication and the next status refresh would start a node the
status does not list yet, drifted from birth. So a launch's AMI selector terms are replaced
by the ids in `status.amis` while that status is current: `AMIsReady` True and observed at the
class's generation (a spec changed since is resolved from its own terms until the status
catches up). Subnets and security groups are left to the terms: drift does not compare them
with resolved ids.
"""

from __future__ import annotations

from daiku.actuator.v1 import actuator_pb2
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import condition
from scheduler_svc.nodeclass.readiness import AMIS_READY


def resolved_ami_ids(node_class: KubeObject) -> tuple[str, ...]:
    """The AMI ids of a current `status.amis` (empty: none, or not current)."""
    ready = condition(node_class, AMIS_READY)
    if ready is None or ready.get("status") != "True":
        return ()
    generation = (node_class.get("metadata") or {}).get("generation")
    observed = ready.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed != generation:
        return ()
    status = node_class.get("status")
    amis = status.get("amis") if isinstance(status, dict) else None
    return tuple(
        str(a["id"]) for a in amis or () if isinstance(a, dict) and isinstance(a.get("id"), str)
    )


def pin_amis(proto: actuator_pb2.NodeClass, node_class: KubeObject) -> actuator_pb2.NodeClass:
    """`proto` with its AMI selector terms replaced by the resolved ids (unchanged when the
    status is not current)."""
    ids = resolved_ami_ids(node_class)
    if not ids:
        return proto
    pinned = actuator_pb2.NodeClass()
    pinned.CopyFrom(proto)
    del pinned.ami_selector_terms[:]
    pinned.ami_selector_terms.extend(actuator_pb2.AmiSelectorTerm(id=i) for i in ids)
    return pinned
