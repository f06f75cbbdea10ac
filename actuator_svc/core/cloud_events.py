"""EventBridge messages from the SQS interruption queue -> cloud events.

Handles the four EC2 events Karpenter's interruption queue receives: spot interruption warning,
rebalance recommendation, AWS Health scheduled change, and instance state-change notification.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any


class CloudEventKind(Enum):
    """The kinds of events the actuator streams."""

    SPOT_INTERRUPTION_WARNING = "spot_interruption_warning"
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"
    SCHEDULED_CHANGE = "scheduled_change"
    INSTANCE_STATE_CHANGE = "instance_state_change"


_DETAIL_TYPES = {
    "EC2 Spot Instance Interruption Warning": CloudEventKind.SPOT_INTERRUPTION_WARNING,
    "EC2 Instance Rebalance Recommendation": CloudEventKind.REBALANCE_RECOMMENDATION,
    "AWS Health Event": CloudEventKind.SCHEDULED_CHANGE,
    "EC2 Instance State-change Notification": CloudEventKind.INSTANCE_STATE_CHANGE,
}


class CloudEventError(ValueError):
    """A queue message is not an EventBridge event this actuator understands."""


@dataclass(frozen=True)
class CloudEvent:
    """One event about one instance."""

    id: str
    kind: CloudEventKind
    instance_id: str
    time: datetime | None
    instance_state: str = ""
    deadline: datetime | None = None


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_cloud_events(body: str) -> list[CloudEvent]:
    """The events in one SQS message body (a health event may name several instances)."""
    try:
        message = json.loads(body)
    except json.JSONDecodeError as exc:
        raise CloudEventError(f"message body is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise CloudEventError("message body is not a JSON object")
    kind = _DETAIL_TYPES.get(str(message.get("detail-type", "")))
    if kind is None:
        raise CloudEventError(f"unsupported detail-type {message.get('detail-type')!r}")
    detail = message.get("detail") or {}
    event_id = str(message.get("id", ""))
    time = _time(message.get("time"))
    if kind is CloudEventKind.SCHEDULED_CHANGE:
        entities = detail.get("affectedEntities") or []
        return [
            CloudEvent(
                id=f"{event_id}/{e.get('entityValue', '')}",
                kind=kind,
                instance_id=str(e.get("entityValue", "")),
                time=time,
                deadline=_time(detail.get("startTime")),
            )
            for e in entities
            if str(e.get("entityValue", "")).startswith("i-")
        ]
    instance_id = str(detail.get("instance-id", ""))
    if not instance_id:
        raise CloudEventError(f"{kind.value} event {event_id!r} names no instance-id")
    deadline = None
    if kind is CloudEventKind.SPOT_INTERRUPTION_WARNING and time is not None:
        deadline = time + timedelta(minutes=2)
    return [
        CloudEvent(
            id=event_id,
            kind=kind,
            instance_id=instance_id,
            time=time,
            instance_state=str(detail.get("state", "")),
            deadline=deadline,
        )
    ]


MAX_ACK_TOKEN_BYTES = 2048  # an SQS receipt handle is at most 1024 characters


@dataclass(frozen=True)
class AckToken:
    """Which event of which received queue message an acknowledgement is for:
    `<index>/<count>/<receipt handle>` on the wire (opaque to subscribers)."""

    index: int
    count: int
    receipt_handle: str

    @property
    def is_last(self) -> bool:
        return self.index == self.count - 1

    def encode(self) -> str:
        return f"{self.index}/{self.count}/{self.receipt_handle}"

    @classmethod
    def decode(cls, text: str) -> AckToken:
        """The token `encode` made; CloudEventError naming what is wrong otherwise."""
        if len(text.encode()) > MAX_ACK_TOKEN_BYTES:
            raise CloudEventError(f"ack token longer than {MAX_ACK_TOKEN_BYTES} bytes")
        index_text, _, rest = text.partition("/")
        count_text, _, handle = rest.partition("/")
        # ASCII digits, bounded: int() of a long digit string costs quadratic time.
        if not all(t.isascii() and t.isdigit() and len(t) <= 4 for t in (index_text, count_text)):
            raise CloudEventError("ack token is not one WatchCloudEvents handed out")
        if not handle:
            raise CloudEventError("ack token is not one WatchCloudEvents handed out")
        index, count = int(index_text), int(count_text)
        if not index < count:
            raise CloudEventError("ack token is not one WatchCloudEvents handed out")
        return cls(index, count, handle)
