"""Errors of the scheduler service.

    SchedulerError
    ├── InvalidObjectError        a Kubernetes object we cannot use; names kind, name and field
    ├── KubeApiError              a Kubernetes API call failed (`status`, `reason`)
    │   ├── KubeNotFoundError           404
    │   ├── KubeConflictError           409: stale resourceVersion or failed precondition
    │   │   └── KubeAlreadyExistsError  409 AlreadyExists: the name is taken
    │   ├── KubeInvalidError            422: the object failed validation
    │   └── KubeTooManyRequestsError    429: throttled, or an eviction a PDB blocks
    └── ActuatorError             a failed call to the actuator, one class per gRPC status
        ├── InvalidArgumentError        the request was malformed (a bug on our side)
        ├── NotFoundError               no instance is tagged with the NodeClaim (treat as done
        │                               when terminating)
        ├── ResourceExhaustedError      every offering of a launch failed; carries each attempt
        ├── UnavailableError            the actuator or EC2 is unavailable; safe to retry
        │   └── DeadlineExceededError   the call outlived its deadline; safe to retry
        ├── FailedPreconditionError     a permanent cloud error (unauthorized, bad parameters)
        └── UnauthenticatedError        missing or wrong bearer token

`ActuatorError.code` is the gRPC status code name ("NOT_FOUND", ...); an unexpected status
(INTERNAL, UNKNOWN, ...) is raised as a plain `ActuatorError`.
"""

from __future__ import annotations

from dataclasses import dataclass


class SchedulerError(Exception):
    """Root of the scheduler service's errors."""


class InvalidObjectError(SchedulerError, ValueError):
    """A Kubernetes object that cannot be used, e.g. a bad quantity or a missing field.

    The message reads `<Kind> <namespace/name>: <field>: <reason>`, so an operator can find the
    object and fix it.
    """

    def __init__(self, *, kind: str, name: str | None, field: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.reason = reason
        super().__init__(f"{kind} {name or '<unnamed>'}: {field}: {reason}")


class KubeApiError(SchedulerError):
    """A Kubernetes API call answered with HTTP `status` (and the Status `reason`)."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class KubeNotFoundError(KubeApiError):
    """404: the object does not exist."""


class KubeConflictError(KubeApiError):
    """409: the object changed since it was read (or a precondition failed): re-read, retry."""


class KubeAlreadyExistsError(KubeConflictError):
    """409 AlreadyExists: an object with this name exists."""


class KubeInvalidError(KubeApiError):
    """422: the object failed validation; the message says which field."""


class KubeTooManyRequestsError(KubeApiError):
    """429: throttled, or an eviction a PodDisruptionBudget blocks; retry after
    `retry_after_seconds` when the server said."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        reason: str = "",
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.retry_after_seconds = retry_after_seconds


class ActuatorError(SchedulerError):
    """A call to the actuator failed with gRPC status `code` (its name, e.g. "NOT_FOUND")."""

    def __init__(self, message: str, *, code: str, method: str) -> None:
        super().__init__(f"{method}: {code}: {message}")
        self.message = message
        self.code = code
        self.method = method


class InvalidArgumentError(ActuatorError):
    """INVALID_ARGUMENT: the request was malformed; the message names the field."""


class NotFoundError(ActuatorError):
    """NOT_FOUND: no instance is tagged with the NodeClaim."""


@dataclass(frozen=True, slots=True)
class FailedOffering:
    """One offering a launch tried and the EC2 error it got (e.g. InsufficientInstanceCapacity)."""

    instance_type: str
    zone: str
    capacity_type: str
    error_code: str
    message: str


class ResourceExhaustedError(ActuatorError):
    """RESOURCE_EXHAUSTED: every offering of a launch failed.

    `failed_offerings` lists every offering tried and its error, in the order tried, decoded
    from the LaunchNodeClaimFailure status detail (empty if the actuator sent none).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        method: str,
        nodeclaim_name: str = "",
        failed_offerings: tuple[FailedOffering, ...] = (),
    ) -> None:
        super().__init__(message, code=code, method=method)
        self.nodeclaim_name = nodeclaim_name
        self.failed_offerings = failed_offerings


class UnavailableError(ActuatorError):
    """UNAVAILABLE: the actuator is unreachable or EC2 kept failing; safe to retry."""


class DeadlineExceededError(UnavailableError):
    """DEADLINE_EXCEEDED: no answer within the call's deadline; safe to retry."""


class FailedPreconditionError(ActuatorError):
    """FAILED_PRECONDITION: a permanent cloud error; retrying the same request will not help."""


class UnauthenticatedError(ActuatorError):
    """UNAUTHENTICATED: the bearer token is missing or wrong."""
