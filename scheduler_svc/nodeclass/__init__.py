"""EC2NodeClass status: what each class's selector terms resolve to (subnets, security groups,
AMIs) and its readiness, from the actuator's ResolveNodeClass (leader only).

    NodeClassStatusController   resolves and writes status (controller.py)
    ready_of, NODECLASS_READINESS, NODEPOOL_READINESS   what `Ready` summarizes (readiness.py)
"""

from scheduler_svc.nodeclass.controller import (
    NodeClassStatusController,
    NodeClassStatusSettings,
    status_from_resolution,
)
from scheduler_svc.nodeclass.readiness import (
    NODECLASS_READINESS,
    NODECLASS_READY,
    NODEPOOL_READINESS,
    first_unresolved,
    ready_of,
)

__all__ = [
    "NODECLASS_READINESS",
    "NODECLASS_READY",
    "NODEPOOL_READINESS",
    "NodeClassStatusController",
    "NodeClassStatusSettings",
    "first_unresolved",
    "ready_of",
    "status_from_resolution",
]
