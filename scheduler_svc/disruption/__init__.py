"""The disruption controller: acts on `scheduler_svc.core.disruption`'s decisions (leader only),
and the snapshot builder `daiku explain node` shares with it."""

from scheduler_svc.disruption.controller import DisruptionController, DisruptionControllerSettings
from scheduler_svc.disruption.snapshot import build_snapshot, nodeclass_state, pdb_from_k8s

__all__ = [
    "DisruptionController",
    "DisruptionControllerSettings",
    "build_snapshot",
    "nodeclass_state",
    "pdb_from_k8s",
]
