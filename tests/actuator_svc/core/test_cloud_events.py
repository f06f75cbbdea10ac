"""EventBridge messages parse into cloud events; unknown ones are refused with a reason."""

import json

import pytest

from actuator_svc.core.cloud_events import CloudEventError, CloudEventKind, parse_cloud_events


def test_spot_interruption_warning_has_a_two_minute_deadline() -> None:
    """A spot interruption warning names the instance and is due two minutes later."""
    body = json.dumps({
        "id": "e1", "detail-type": "EC2 Spot Instance Interruption Warning",
        "time": "2026-01-01T00:00:00Z",
        "detail": {"instance-id": "i-123", "instance-action": "terminate"},
    })  # fmt: skip
    (event,) = parse_cloud_events(body)
    assert event.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING
    assert event.instance_id == "i-123"
    assert event.time is not None
    assert event.deadline is not None
    assert (event.deadline - event.time).total_seconds() == 120


def test_state_change_carries_the_state() -> None:
    """A state-change notification carries the new state."""
    body = json.dumps({
        "id": "e2", "detail-type": "EC2 Instance State-change Notification",
        "time": "2026-01-01T00:00:00Z", "detail": {"instance-id": "i-9", "state": "stopping"},
    })  # fmt: skip
    (event,) = parse_cloud_events(body)
    assert event.kind is CloudEventKind.INSTANCE_STATE_CHANGE
    assert event.instance_state == "stopping"


@pytest.mark.parametrize("body", ["not json", "[]", json.dumps({"detail-type": "Other"})])
def test_unknown_messages_are_refused(body: str) -> None:
    """Bodies that are not a known EC2 event raise CloudEventError."""
    with pytest.raises(CloudEventError):
        parse_cloud_events(body)
