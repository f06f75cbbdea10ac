"""Provisioning: pending pods -> batch window -> solve (mirror + in-flight NodeClaims) ->
NodeClaim objects -> launches through the actuator.

    Batcher                   idle/max windows over triggers (loop clock)
    Provisioner               one round per closed batch (see provisioner.py)
    ClaimLauncher             one LaunchNodeClaim, its outcome recorded on the claim (also used
                              by the lifecycle to relaunch claims left unlaunched)
    InstanceTypeCatalog       the actuator's instance types per EC2NodeClass kubelet settings
    UnavailableOfferingsCache offerings reported exhausted, kept out of solves for a TTL
    nodeclaim_from_plan       a solver plan as a daiku.dev/v1 NodeClaim; launch_request_of back
"""

from scheduler_svc.provisioning.batcher import Batcher, BatchWindow
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.provisioning.launch import ClaimLauncher, LaunchOutcome, LaunchResult
from scheduler_svc.provisioning.nodeclaim_template import (
    LaunchRequest,
    launch_request_of,
    nodeclaim_from_plan,
)
from scheduler_svc.provisioning.provisioner import Provisioner, RoundResult
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache

__all__ = [
    "BatchWindow",
    "Batcher",
    "ClaimLauncher",
    "InstanceTypeCatalog",
    "LaunchOutcome",
    "LaunchRequest",
    "LaunchResult",
    "Provisioner",
    "RoundResult",
    "UnavailableOfferingsCache",
    "launch_request_of",
    "nodeclaim_from_plan",
]
