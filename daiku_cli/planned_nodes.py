"""A NodeClaim `daiku plan` has planned, as the in-flight Node a second solve can put pods on
(static pools' claims, and the claims holding real pods when headroom is solved after them)."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler_svc.core import InstanceType, Node, NodePool, OfferingOption, Pod
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_ZONE


def planned_node(
    name: str,
    instance_type: InstanceType,
    pool: NodePool,
    offering: OfferingOption,
    pods: Iterable[Pod] = (),
) -> Node:
    """The node `offering` of `instance_type` would become in `pool`, named `name`."""
    labels = {
        **instance_type.labels,
        **pool.node_labels(),
        LABEL_ZONE: offering.zone,
        LABEL_CAPACITY_TYPE: offering.capacity_type,
        LABEL_HOSTNAME: name,
    }
    return Node(
        name,
        labels=labels,
        taints=pool.taints,
        allocatable=instance_type.allocatable,
        capacity=instance_type.capacity,
        pods=tuple(pods),
        is_in_flight=True,
    )
