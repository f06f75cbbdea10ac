"""The `Disrupting` Event's text."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler_svc.core.disruption import DisruptionDecision, DisruptionReason
from scheduler_svc.disruption.controller import disrupting_message


def decision(reason: DisruptionReason, message: str) -> DisruptionDecision:
    return DisruptionDecision(
        reason=reason,
        nodes=("node-a",),
        nodeclaims=("default-a",),
        replacements=(),
        message=message,
        decided_at=datetime(2026, 1, 1, tzinfo=UTC),
        old_price_per_hour=0.17,
        new_price_per_hour=0.0,
    )


def test_the_reason_is_not_repeated_when_the_message_starts_with_it() -> None:
    """A core message already saying "Expired: ..." keeps one prefix (was "Expired: Expired:")
    and gets the replacement NodeClaims appended."""
    text = disrupting_message(
        decision(DisruptionReason.EXPIRED, "Expired: 30m1s old (expireAfter 30m)"),
        ["default-b"],
    )
    assert text == "Expired: 30m1s old (expireAfter 30m); replaced by default-b"


def test_a_message_without_its_reason_gets_it_in_front() -> None:
    """A message that does not start with the reason is prefixed with it."""
    text = disrupting_message(decision(DisruptionReason.EMPTY, "no pods for 31s"), [])
    assert text == "Empty: no pods for 31s"
