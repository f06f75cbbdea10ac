"""NodeClaim lifecycle: launch (and relaunch after a restart), registration, initialization,
launch/registration timeouts, termination (minimal; the drain is the disruption work's) and
garbage collection of orphaned instances and instance-less claims.

    LifecycleController  reconciles every NodeClaim from the mirror (see controller.py)
"""

from scheduler_svc.lifecycle.controller import LifecycleController, LifecycleSettings

__all__ = [
    "LifecycleController",
    "LifecycleSettings",
]
