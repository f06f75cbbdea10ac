"""EventBridge-shaped EC2 events, as AWS delivers them to an interruption SQS queue.

The shapes follow the events AWS documents (and Karpenter parses): the envelope's `detail-type`
and `source` name the event, `resources` holds the instance ARN, `detail` the specifics.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
INSTANCE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _envelope(
    *,
    detail_type: str,
    instance_id: str,
    region: str,
    account_id: str,
    now: datetime,
    detail: dict[str, Any],
) -> str:
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": account_id,
        "time": _iso(now),
        "region": region,
        "resources": [f"arn:aws:ec2:{region}:{account_id}:instance/{instance_id}"],
        "detail": detail,
    }
    return json.dumps(event)


def spot_interruption_warning(
    instance_id: str, *, region: str, account_id: str, now: datetime
) -> str:
    """The warning AWS sends two minutes before it terminates a spot instance."""
    return _envelope(
        detail_type=SPOT_INTERRUPTION,
        instance_id=instance_id,
        region=region,
        account_id=account_id,
        now=now,
        detail={"instance-id": instance_id, "instance-action": "terminate"},
    )


def rebalance_recommendation(
    instance_id: str, *, region: str, account_id: str, now: datetime
) -> str:
    """The signal that a spot instance is at elevated risk of interruption."""
    return _envelope(
        detail_type=REBALANCE_RECOMMENDATION,
        instance_id=instance_id,
        region=region,
        account_id=account_id,
        now=now,
        detail={"instance-id": instance_id},
    )


def instance_state_change(
    instance_id: str, state: str, *, region: str, account_id: str, now: datetime
) -> str:
    """The notification that an instance entered `state` (e.g. `terminated`)."""
    if state not in INSTANCE_STATES:
        raise ValueError(f"instance state must be one of {INSTANCE_STATES}, got {state!r}")
    return _envelope(
        detail_type=STATE_CHANGE,
        instance_id=instance_id,
        region=region,
        account_id=account_id,
        now=now,
        detail={"instance-id": instance_id, "state": state},
    )
