"""Errors of the actuator, each mapped to one gRPC status code by the rpc layer.

ActuatorError
├── InvalidRequestError          INVALID_ARGUMENT     malformed request; `field` names the field
│   └── NothingSelectedError     (FAILED_PRECONDITION from ResolveNodeClass) selector terms that
│                                match nothing in the cloud
├── NodeClaimNotFoundError       NOT_FOUND            no instance is tagged with the claim
├── OfferingsExhaustedError      RESOURCE_EXHAUSTED   every offering failed; carries the attempts
└── CloudError
    ├── CloudUnavailableError    UNAVAILABLE          throttling / 5xx outlasted the retries
    └── CloudPermanentError FAILED_PRECONDITION  unauthorized, invalid launch parameters
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actuator_svc.fleet_requests import SkippedOffering
    from actuator_svc.launcher import LaunchAttempt


class ActuatorError(Exception):
    """Base of every error the actuator reports to its callers."""


class InvalidRequestError(ActuatorError):
    """The request is malformed; the message starts with the field's path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NothingSelectedError(InvalidRequestError):
    """Selector terms match nothing in the cloud (no subnet, security group or AMI).

    LaunchNodeClaim reports it as INVALID_ARGUMENT (as it always has); ResolveNodeClass as
    FAILED_PRECONDITION: the request is well formed, the cloud does not hold what it names."""


class NodeClaimNotFoundError(ActuatorError):
    """No instance carries the tag daiku.dev/nodeclaim=<name>."""

    def __init__(self, nodeclaim_name: str) -> None:
        super().__init__(f"no instance is tagged daiku.dev/nodeclaim={nodeclaim_name}")
        self.nodeclaim_name = nodeclaim_name


class OfferingsExhaustedError(ActuatorError):
    """Every offering of a launch failed or was unavailable."""

    def __init__(
        self,
        nodeclaim_name: str,
        attempts: Sequence[LaunchAttempt],
        skipped: Sequence[SkippedOffering],
    ) -> None:
        reasons = sorted({e.code for a in attempts for e in a.errors} | {s.reason for s in skipped})
        super().__init__(
            f"nodeclaim {nodeclaim_name}: no offering could be launched after "
            f"{len(attempts)} CreateFleet call(s); reasons: {', '.join(reasons) or 'none'}"
        )
        self.nodeclaim_name = nodeclaim_name
        self.attempts = tuple(attempts)
        self.skipped = tuple(skipped)


class CloudError(ActuatorError):
    """An error from the cloud API itself."""

    def __init__(self, operation: str, code: str, message: str) -> None:
        super().__init__(f"{operation}: {code}: {message}")
        self.operation = operation
        self.code = code


class CloudUnavailableError(CloudError):
    """Throttling or server errors persisted through the bounded retries; safe to retry later."""


class CloudPermanentError(CloudError):
    """An error retrying cannot fix (unauthorized, invalid parameter, missing resource)."""
