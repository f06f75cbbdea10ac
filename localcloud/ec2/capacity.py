"""Controllable realism: capacity pools, injected API faults and injected CreateFleet answers.

Both are shared between the HTTP server's worker threads and whoever drives the emulator (a
test in another thread, or the admin endpoints), so every access takes the object's lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

CAPACITY_TYPES = ("on-demand", "spot")
INSUFFICIENT_CAPACITY = "InsufficientInstanceCapacity"

# HTTP status EC2 answers each error code with; everything else is a 400 client error.
_ERROR_HTTP_STATUS = {
    "RequestLimitExceeded": 503,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "InternalError": 500,
    "InsufficientInstanceCapacity": 500,
}


def http_status_for(error_code: str) -> int:
    """HTTP status EC2 uses for a whole-request error with `error_code`."""
    return _ERROR_HTTP_STATUS.get(error_code, 400)


@dataclass(frozen=True)
class PoolKey:
    """One capacity pool: an instance type in a zone, bought on-demand or as spot."""

    instance_type: str
    zone: str
    capacity_type: str

    def __post_init__(self) -> None:
        if self.capacity_type not in CAPACITY_TYPES:
            raise ValueError(
                f"capacity_type must be one of {CAPACITY_TYPES}, got {self.capacity_type!r}"
            )

    def to_json(self) -> dict[str, str]:
        return {
            "instance_type": self.instance_type,
            "zone": self.zone,
            "capacity_type": self.capacity_type,
        }


class CapacityPools:
    """Which pools are out of capacity (all have capacity unless marked), and with which error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unavailable: dict[PoolKey, str] = {}

    def set(
        self, pool: PoolKey, *, available: bool, error_code: str = INSUFFICIENT_CAPACITY
    ) -> None:
        with self._lock:
            if available:
                self._unavailable.pop(pool, None)
            else:
                self._unavailable[pool] = error_code

    def error_for(self, pool: PoolKey) -> str | None:
        """The error code a launch into `pool` fails with, or None when it has capacity."""
        with self._lock:
            return self._unavailable.get(pool)

    def unavailable(self) -> dict[PoolKey, str]:
        with self._lock:
            return dict(self._unavailable)

    def reset(self) -> None:
        with self._lock:
            self._unavailable.clear()


@dataclass(frozen=True)
class InjectedFault:
    """The error the next call(s) of an EC2 action fail with."""

    action: str
    error_code: str
    http_status: int
    message: str


class FaultInjector:
    """Counts down injected faults per EC2 action (`*` matches every action)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[InjectedFault, int]] = []

    def inject(
        self,
        *,
        action: str,
        error_code: str,
        count: int = 1,
        http_status: int | None = None,
        message: str | None = None,
    ) -> InjectedFault:
        if count < 1:
            raise ValueError(f"fault count for {action} must be at least 1, got {count}")
        fault = InjectedFault(
            action=action,
            error_code=error_code,
            http_status=http_status if http_status is not None else http_status_for(error_code),
            message=message or _default_message(error_code),
        )
        with self._lock:
            self._pending.append((fault, count))
        return fault

    def take(self, action: str) -> InjectedFault | None:
        """The fault this call of `action` must fail with (consuming one count), if any."""
        with self._lock:
            for index, (fault, remaining) in enumerate(self._pending):
                if fault.action in (action, "*"):
                    if remaining <= 1:
                        del self._pending[index]
                    else:
                        self._pending[index] = (fault, remaining - 1)
                    return fault
        return None

    def pending(self) -> list[tuple[InjectedFault, int]]:
        with self._lock:
            return list(self._pending)

    def reset(self) -> None:
        with self._lock:
            self._pending.clear()


FLEET_ANSWER_KINDS = ("empty", "unattributed-error")


@dataclass(frozen=True)
class InjectedFleetAnswer:
    """An instant CreateFleet answer EC2 gives and capacity pools cannot produce: `empty` (no
    instance and no error) or `unattributed-error` (one error naming no override)."""

    kind: str
    error_code: str = ""
    message: str = ""

    def errors(self) -> list[dict[str, Any]]:
        if self.kind == "empty":
            return []
        return [{"ErrorCode": self.error_code, "ErrorMessage": self.message}]


class FleetAnswers:
    """Counts down injected CreateFleet answers (the next calls get them, in order)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[InjectedFleetAnswer, int]] = []

    def inject(
        self, *, kind: str, count: int = 1, error_code: str | None = None
    ) -> InjectedFleetAnswer:
        if kind not in FLEET_ANSWER_KINDS:
            raise ValueError(f"kind must be one of {FLEET_ANSWER_KINDS}, got {kind!r}")
        if count < 1:
            raise ValueError(f"fleet answer count must be at least 1, got {count}")
        code = error_code or ("UnfulfillableCapacity" if kind == "unattributed-error" else "")
        answer = InjectedFleetAnswer(kind, code, _default_message(code) if code else "")
        with self._lock:
            self._pending.append((answer, count))
        return answer

    def take(self) -> InjectedFleetAnswer | None:
        with self._lock:
            if not self._pending:
                return None
            answer, remaining = self._pending[0]
            if remaining <= 1:
                del self._pending[0]
            else:
                self._pending[0] = (answer, remaining - 1)
            return answer

    def pending(self) -> list[tuple[InjectedFleetAnswer, int]]:
        with self._lock:
            return list(self._pending)

    def reset(self) -> None:
        with self._lock:
            self._pending.clear()


def _default_message(error_code: str) -> str:
    if error_code == "RequestLimitExceeded":
        return "Request limit exceeded."
    if error_code == INSUFFICIENT_CAPACITY:
        return "We currently do not have sufficient capacity to fulfill your request."
    return f"Injected fault: {error_code}."
