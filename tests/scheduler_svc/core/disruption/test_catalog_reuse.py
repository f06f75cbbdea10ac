"""The disruption core's simulated solves reuse catalog indexes across passes."""

from __future__ import annotations

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption import plan_disruption, validate
from scheduler_svc.core.disruption.settings import ConsolidationPolicy
from tests.scheduler_svc.core.disruption.builders import at, candidate, pods, pool, snapshot


def test_a_second_pass_builds_no_catalog_index_and_plans_the_same() -> None:
    """With a CatalogCache, a pass plans exactly what a pass without one plans, and a second
    pass and the validation of its consolidation build no new catalog index."""
    nodes = [candidate(f"n{i}", "c4.xlarge", pods(f"p{i}", 2), created=0) for i in range(3)]
    consolidating = pool(
        consolidation_policy=ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED,
        consolidate_after_seconds=60.0,
        budgets=(),
        expire_after_seconds=None,
    )
    state = snapshot(nodes, [consolidating])
    uncached = plan_disruption(state, at(600))
    catalogs = CatalogCache()
    first = plan_disruption(state, at(600), catalogs=catalogs)
    built = catalogs.builds
    assert built >= 1
    assert first == uncached
    assert len(first.decisions) == 1
    assert first.decisions[0].replacements
    second = plan_disruption(state, at(600), catalogs=catalogs)
    assert second == first
    assert validate(first.decisions[0], state, at(630), catalogs=catalogs).is_valid
    assert catalogs.builds == built
