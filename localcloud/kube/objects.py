"""JSON-like Kubernetes objects: the type the store holds, copying and timestamps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

JsonObject = dict[str, Any]
Clock = Callable[[], datetime]


def copy_json(value: Any) -> Any:
    """Deep copy of a JSON-like value, several times faster than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> datetime:
    return datetime.now(UTC)
