"""`Ready` of NodePools and EC2NodeClasses: True unless one of the conditions it summarizes is
False (Karpenter's root condition). Conditions not written yet do not hold it back, so a class
is provisioned from before its first resolution (as before the status controller existed) and
an actuator without ResolveNodeClass blocks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

# What EC2NodeClass `Ready` summarizes: the provisioner's validation and the resolutions.
SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
AMIS_READY = "AMIsReady"
RESOLUTION_CONDITIONS = (SUBNETS_READY, SECURITY_GROUPS_READY, AMIS_READY)
NODECLASS_READINESS = ("ValidationSucceeded", *RESOLUTION_CONDITIONS)
# What NodePool `Ready` summarizes: its validation and its EC2NodeClass's readiness.
NODECLASS_READY = "NodeClassReady"
NODEPOOL_READINESS = ("ValidationSucceeded", NODECLASS_READY)

Status = Literal["True", "False", "Unknown"]


def ready_of(
    conditions: Sequence[Mapping[str, Any]], summarized: Sequence[str]
) -> tuple[Status, str, str]:
    """(status, reason, message) of `Ready` over `conditions`: False with the message of the
    first False one of `summarized` (in that order), else True."""
    by_type = {str(c.get("type")): c for c in conditions}
    for condition_type in summarized:
        current = by_type.get(condition_type)
        if current is not None and current.get("status") == "False":
            return "False", "NotReady", str(current.get("message") or condition_type)
    return "True", "Ready", ""


def first_unresolved(conditions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first of the EC2NodeClass's resolution conditions that is False (None: none is)."""
    by_type = {str(c.get("type")): c for c in conditions}
    for condition_type in RESOLUTION_CONDITIONS:
        current = by_type.get(condition_type)
        if current is not None and current.get("status") == "False":
            return current
    return None
