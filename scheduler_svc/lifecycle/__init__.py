"""NodeClaim lifecycle: launch (and relaunch after a restart), registration, initialization,
launch/registration timeouts, termination (cordon, drain honouring PDBs and do-not-disrupt,
terminationGracePeriod, instance, finalizers), interruption handling (cloud events ->
cordon and delete) and garbage collection of orphaned instances and instance-less claims.

    LifecycleController     reconciles every NodeClaim from the mirror (see controller.py)
    Terminator              takes one deleted claim and its Node down (termination.py)
    InterruptionController  acts on the actuator's cloud events (interruption.py)
"""

from scheduler_svc.lifecycle.controller import LifecycleController, LifecycleSettings
from scheduler_svc.lifecycle.interruption import InterruptionController, InterruptionSettings
from scheduler_svc.lifecycle.termination import TerminationSettings, Terminator

__all__ = [
    "InterruptionController",
    "InterruptionSettings",
    "LifecycleController",
    "LifecycleSettings",
    "TerminationSettings",
    "Terminator",
]
