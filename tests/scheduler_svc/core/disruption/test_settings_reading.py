"""Reading what users write: a NodePool's budgets (counts, percentages, schedules), the
do-not-disrupt annotation's Go durations, and the errors that name the field at fault."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    Budget,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
)
from scheduler_svc.core.disruption.settings import parse_go_duration


def budgets(*items: object) -> tuple[Budget, ...]:
    return DisruptionSettings.from_spec("p", {"disruption": {"budgets": list(items)}}).budgets


def error(*items: object) -> str:
    with pytest.raises(DisruptionSettingsError) as raised:
        budgets(*items)
    return str(raised.value)


def test_a_percentage_budget_is_read_as_a_percentage() -> None:
    assert budgets({"nodes": "50%"}) == (Budget(percent=50),)
    assert budgets({"nodes": "100%"}, {"nodes": "0%"}) == (Budget(percent=100), Budget(percent=0))


def test_a_budget_without_nodes_allows_ten_percent() -> None:
    """Karpenter's CRD default for a budget's nodes is 10 %."""
    assert budgets({"reasons": ["Empty"]}) == (
        Budget(percent=10, reasons=frozenset({DisruptionReason.EMPTY})),
    )


def test_a_budget_that_is_not_an_object_is_refused_by_index() -> None:
    assert (
        error({"nodes": "1"}, "3") == "NodePool p: spec.disruption.budgets[1]: expected an object"
    )


def test_a_bad_budget_duration_names_the_budget_field() -> None:
    assert error({"nodes": "1", "schedule": "@daily", "duration": "soon"}) == (
        "NodePool p: spec.disruption.budgets[0].duration: 'soon' is not a duration like 1h30m"
    )


def test_a_bad_duration_that_may_be_never_says_so() -> None:
    """consolidateAfter takes Never too, and its error offers it."""
    with pytest.raises(DisruptionSettingsError) as raised:
        DisruptionSettings.from_spec("p", {"disruption": {"consolidateAfter": "soon"}})
    assert str(raised.value) == (
        "NodePool p: spec.disruption.consolidateAfter: 'soon' is not a duration like 1h30m or Never"
    )


def test_a_budget_duration_cannot_be_never() -> None:
    """A scheduled budget is active for a finite window: Never is not a duration there."""
    assert error({"nodes": "1", "schedule": "@daily", "duration": "Never"}) == (
        "NodePool p: spec.disruption.budgets[0].duration: 'Never' is not a duration like 1h30m"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("4h", 4 * 3600.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("90s", 90.0),
        ("300ms", 0.3),
        (".5s", 0.5),
        ("2.s", 2.0),
        ("1500us", 0.0015),
        ("1500µs", 0.0015),
        ("7ns", 7e-9),
        ("0", 0.0),
        ("+5m", 300.0),
        ("-1h", -3600.0),
        ("-0", 0.0),
    ],
)
def test_go_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    """``karpenter.sh/do-not-disrupt: "4h"`` holds a pod for Go's time.ParseDuration of it."""
    assert parse_go_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize(
    "text", ["", "true", "4", "h", "1d", "X1h", "4h ", " 4h", "1h-30m", "+", "--1h"]
)
def test_what_go_does_not_read_as_a_duration_is_none(text: str) -> None:
    assert parse_go_duration(text) is None
