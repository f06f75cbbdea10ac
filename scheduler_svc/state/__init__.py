"""The in-memory cluster mirror fed by the watches, and its snapshot for the solver."""

from scheduler_svc.state.cluster import (
    MIRRORED_RESOURCES,
    Change,
    ChangeListener,
    ClusterMirror,
    ClusterSnapshot,
    is_pending_pod,
    is_provisionable_pod,
    pod_node_name,
)
from scheduler_svc.state.core_snapshot import CoreSnapshot, CoreSnapshotter

__all__ = [
    "MIRRORED_RESOURCES",
    "Change",
    "ChangeListener",
    "ClusterMirror",
    "ClusterSnapshot",
    "CoreSnapshot",
    "CoreSnapshotter",
    "is_pending_pod",
    "is_provisionable_pod",
    "pod_node_name",
]
