"""Errors of the local Kubernetes API, each one a real `Status` object on the wire.

    ApiError                 (code, reason, message, details) -> Status
    ├── BadRequest           400 BadRequest
    ├── Unauthorized         401 Unauthorized
    ├── Forbidden            403 Forbidden
    ├── NotFound             404 NotFound
    ├── MethodNotAllowed     405 MethodNotAllowed
    ├── Conflict             409 Conflict        (stale resourceVersion, already bound)
    ├── AlreadyExists        409 AlreadyExists   (create of an existing name)
    ├── Gone                 410 Expired         (watch/list from a resourceVersion too old)
    ├── UnsupportedMediaType 415 UnsupportedMediaType
    ├── Invalid              422 Invalid
    ├── TooManyRequests      429 TooManyRequests (eviction blocked by a PodDisruptionBudget)
    ├── InternalError        500 InternalError
    └── Timeout              504 Timeout         (watch from a resourceVersion not reached yet)

The store raises these; the HTTP layer turns any of them into the Status JSON that
kubernetes_asyncio's `ApiException` and kubectl's error printer parse.
"""

from __future__ import annotations

# ruff: noqa: N818 - the classes carry the apiserver's own reason names (NotFound, Conflict, ...)
from typing import Any

JsonObject = dict[str, Any]


class ApiError(Exception):
    """A failed API call; `to_status()` is the body the real apiserver would send."""

    code = 500
    reason = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        group: str = "",
        causes: list[JsonObject] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = causes or []

    def to_status(self) -> JsonObject:
        details: JsonObject = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        status: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            status["details"] = details
        return status


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(ApiError):
    code = 406
    reason = "NotAcceptable"


class Conflict(ApiError):
    code = 409
    reason = "Conflict"


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"


class Gone(ApiError):
    code = 410
    reason = "Expired"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(ApiError):
    code = 422
    reason = "Invalid"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    code = 500
    reason = "InternalError"


class Timeout(ApiError):
    code = 504
    reason = "Timeout"


def not_found(resource: str, name: str, group: str = "") -> NotFound:
    """The apiserver's wording: `pods "web-1" not found` (`deployments.apps "x" not found`)."""
    qualified = f"{resource}.{group}" if group else resource
    return NotFound(f'{qualified} "{name}" not found', kind=resource, name=name, group=group)
