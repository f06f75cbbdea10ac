"""NodePool disruption settings and budgets (Karpenter v1 meaning)."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    Budget,
    ConsolidationPolicy,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
    parse_duration,
)
from tests.scheduler_svc.core.disruption.builders import at


def test_defaults_follow_the_crd() -> None:
    """An empty spec means WhenEmptyOrUnderutilized, consolidateAfter 0s, expireAfter 720h and
    one budget of 10 %."""
    settings = DisruptionSettings.from_spec("default", {})
    assert settings == DisruptionSettings(
        ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED, 0.0, 720 * 3600.0, None, (Budget(),)
    )
    assert settings.budgets[0].describe() == "nodes: 10%"


def test_a_full_spec_is_read() -> None:
    """Every field of spec.disruption and the template's expiry/grace period is read."""
    spec = {
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "30s",
            "budgets": [
                {"nodes": "3"},
                {
                    "nodes": "0",
                    "schedule": "0 9 * * mon-fri",
                    "duration": "8h",
                    "reasons": ["Underutilized"],
                },
            ],
        },
        "template": {"spec": {"expireAfter": "Never", "terminationGracePeriod": "1h30m"}},
    }
    settings = DisruptionSettings.from_spec("web", spec)
    assert settings.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY
    assert settings.consolidate_after_seconds == 30.0
    assert settings.expire_after_seconds is None
    assert settings.termination_grace_period_seconds == 5400.0
    assert settings.budgets == (
        Budget(nodes=3, percent=None),
        Budget(
            nodes=0,
            percent=None,
            schedule="0 9 * * mon-fri",
            duration_seconds=8 * 3600.0,
            reasons=frozenset({DisruptionReason.UNDERUTILIZED}),
        ),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"disruption": {"consolidateAfter": "soon"}},
            "NodePool p: spec.disruption.consolidateAfter: 'soon' is not a duration",
        ),
        (
            {"disruption": {"consolidationPolicy": "Always"}},
            "spec.disruption.consolidationPolicy: 'Always' is not one of",
        ),
        (
            {"disruption": {"budgets": [{"nodes": "150%"}]}},
            "spec.disruption.budgets[0].nodes: '150%' is not a count",
        ),
        (
            {"disruption": {"budgets": [{"nodes": "1", "schedule": "@daily"}]}},
            "spec.disruption.budgets[0]: schedule must be set with duration",
        ),
        (
            {
                "disruption": {
                    "budgets": [{"nodes": "1", "schedule": "0 0 * * * *", "duration": "1h"}]
                }
            },
            "spec.disruption.budgets[0]: schedule '0 0 * * * *' is not a 5-field cron",
        ),
        (
            {"disruption": {"budgets": [{"nodes": "1", "reasons": ["Expired"]}]}},
            "spec.disruption.budgets[0].reasons: 'Expired' is not one of",
        ),
        (
            {"template": {"spec": {"terminationGracePeriod": "Never"}}},
            "spec.template.spec.terminationGracePeriod: 'Never' is not a duration like 1h30m",
        ),
    ],
)
def test_bad_settings_name_the_field(spec: dict[str, object], message: str) -> None:
    """A bad value is rejected with an error naming the NodePool and the field."""
    with pytest.raises(DisruptionSettingsError) as error:
        DisruptionSettings.from_spec("p", spec)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("30s", 30.0), ("1h30m", 5400.0), ("720h", 2592000.0), ("Never", None)],
)
def test_durations(text: str, seconds: float | None) -> None:
    """Go-style durations of h/m/s read as seconds; Never as None."""
    assert parse_duration(text, "f") == seconds


@pytest.mark.parametrize(
    ("percent", "total", "allowed"), [(10, 2, 1), (10, 0, 0), (10, 25, 3), (50, 3, 2), (0, 9, 0)]
)
def test_percentages_round_up(percent: int, total: int, allowed: int) -> None:
    """A percentage budget allows ceil(total x percent) nodes, as Karpenter rounds."""
    assert Budget(percent=percent).allowed(total) == allowed


@pytest.mark.parametrize(
    ("seconds_after_t0", "active"),
    [(-1, False), (0, True), (3600 * 8 - 1, True), (3600 * 8, False), (3600 * 24, True)],
)
def test_scheduled_budget_is_active_for_its_duration(seconds_after_t0: int, active: bool) -> None:
    """A budget scheduled at 09:00 on weekdays for 8h is active from 09:00 to 16:59:59."""
    budget = Budget(nodes=0, percent=None, schedule="0 9 * * 1-5", duration_seconds=8 * 3600.0)
    # T0 is Monday 09:00 UTC.
    assert budget.is_active(at(seconds_after_t0)) is active


def test_macro_schedules_are_accepted() -> None:
    """@daily is a schedule, active for its duration after midnight."""
    budget = Budget(nodes=0, percent=None, schedule="@daily", duration_seconds=3600.0)
    assert not budget.is_active(at(0))  # 09:00
    assert budget.is_active(at(15 * 3600 + 1800))  # 00:30 the next day
