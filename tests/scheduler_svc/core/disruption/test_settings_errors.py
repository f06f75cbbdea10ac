"""Every way a NodePool's disruption settings can be malformed is refused with the whole
error a person reads: the NodePool, the field's path, the value and what it may be. And a
static NodePool (``replicas``) is never consolidated, whatever its consolidateAfter says."""

from __future__ import annotations

import pytest

from scheduler_svc.core.disruption import (
    Budget,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"disruption": "often"},
            "NodePool p: spec.disruption: expected an object",
            id="disruption",
        ),
        pytest.param(
            {"template": "t"}, "NodePool p: spec.template: expected an object", id="template"
        ),
        pytest.param(
            {"template": {"spec": []}},
            "NodePool p: spec.template.spec: expected an object",
            id="template-spec",
        ),
        pytest.param(
            {"disruption": {"consolidationPolicy": "Sometimes"}},
            "NodePool p: spec.disruption.consolidationPolicy: 'Sometimes' is not one of "
            "WhenEmpty, WhenEmptyOrUnderutilized, Balanced",
            id="policy",
        ),
        pytest.param(
            {"disruption": {"consolidationThreshold": 2}},
            "NodePool p: spec.disruption.consolidationThreshold: only allowed with "
            "consolidationPolicy Balanced",
            id="threshold-without-balanced",
        ),
        pytest.param(
            {"template": {"spec": {"expireAfter": "soon"}}},
            "NodePool p: spec.template.spec.expireAfter: 'soon' is not a duration like 1h30m "
            "or Never",
            id="expire-after",
        ),
        pytest.param(
            {"disruption": {"budgets": {"nodes": "1"}}},
            "NodePool p: spec.disruption.budgets: expected a list",
            id="budgets",
        ),
        pytest.param(
            {"disruption": {"rebalanceRecommendationPolicy": "Sometimes"}},
            "NodePool p: spec.disruption.rebalanceRecommendationPolicy: 'Sometimes' is not one "
            "of Ignore, Replace",
            id="rebalance",
        ),
    ],
)
def test_a_malformed_setting_is_refused_with_its_whole_error(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(DisruptionSettingsError) as raised:
        DisruptionSettings.from_spec("p", spec)
    assert str(raised.value) == message


def test_a_static_node_pool_is_never_consolidated() -> None:
    """``replicas`` makes a NodePool static: its consolidateAfter is ignored (Never)."""
    spec = {"replicas": 3, "disruption": {"consolidateAfter": "30s"}}
    assert DisruptionSettings.from_spec("p", spec).consolidate_after_seconds is None
    dynamic = {"disruption": {"consolidateAfter": "30s"}}
    assert DisruptionSettings.from_spec("p", dynamic).consolidate_after_seconds == 30.0


def test_a_budget_with_both_nodes_and_percent_is_refused() -> None:
    with pytest.raises(DisruptionSettingsError) as raised:
        Budget(nodes=1, percent=10)
    assert str(raised.value) == "budget: exactly one of nodes and percent is set"


def test_a_percentage_budget_rounds_up_its_share() -> None:
    """10 % of 1,010 nodes is 101 exactly; of 11, 1.1 rounds up to 2."""
    assert Budget(percent=10).allowed(1010) == 101
    assert Budget(percent=10).allowed(11) == 2


def test_a_budget_names_each_of_its_reasons() -> None:
    reasons = frozenset({DisruptionReason.EMPTY, DisruptionReason.DRIFTED})
    assert Budget(nodes=1, percent=None, reasons=reasons).describe() == (
        "nodes: 1 for Drifted, Empty"
    )
