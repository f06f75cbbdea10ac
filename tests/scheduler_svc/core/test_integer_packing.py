"""The integer program's packings are real nodes: counts per type that split into nodes, whole
nodes as columns where they do not, and a budget counted in work, not time (issue 11)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from highspy._core import _Highs

from scheduler_svc.core import PackingSettings
from scheduler_svc.core.integer_packing import NodeOption, cheapest_packing, packing_cost
from scheduler_svc.core.pattern_packing import PatternBudget, maximal_patterns


def test_pods_large_in_different_resources_share_a_node() -> None:
    """A pod taking 60 % of the cpu and one taking 60 % of the memory fit one node together:
    one node at $1.00, not two smaller ones at $0.60 each (a row counting pods large in any
    resource together allowed one of them per node)."""
    shapes = [(60, 10), (10, 60)]
    options = [NodeOption((100, 100), 1.0), NodeOption((65, 65), 0.6)]
    nodes = cheapest_packing(shapes, [1, 1], options, PackingSettings())
    assert packing_cost(nodes, options) == pytest.approx(1.0)
    assert [(n.option, n.counts) for n in nodes] == [(0, (1, 1))]


def test_maximal_patterns_are_the_nodes_no_pending_pod_can_join() -> None:
    """On 100 units, pods of 60 and 45 (two of each pending): 60+(nothing else fits) and 45+45;
    60 alone with a 45 would not fit, and one 45 alone could take another."""
    budget = PatternBudget(patterns=10, visits=100)
    assert maximal_patterns([(60,), (45,)], [2, 2], [100], budget) == [(1, 0), (0, 2)]


def test_maximal_patterns_give_up_past_their_budget() -> None:
    """Too many patterns for the budget: None, and the budget is spent for later types."""
    budget = PatternBudget(patterns=3, visits=1000)
    shapes = [(1, 3), (2, 2), (3, 1)]
    assert maximal_patterns(shapes, [50, 50, 50], [60, 60], budget) is None
    assert budget.visits <= 0


class _RecordingHighs:
    """A HiGHS instance that records the options it is given."""

    options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self._solver = _Highs()

    def setOptionValue(self, name: str, value: Any) -> Any:
        _RecordingHighs.options[name] = value
        return self._solver.setOptionValue(name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._solver, name)


def test_the_default_budget_is_work_not_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default HiGHS gets a node budget and no time limit: a loaded machine cannot stop a
    program early, so the plan for an input is the same on any machine (it could with the
    former 1 s limit)."""
    import highspy._core

    monkeypatch.setattr(highspy._core, "_Highs", _RecordingHighs)
    _RecordingHighs.options = {}
    shapes = [(1500, 4), (250, 1), (1000, 6)]
    options = [NodeOption((3920, 7), 0.07), NodeOption((7910, 15), 0.13)]
    assert cheapest_packing(shapes, [14, 20, 1], options, PackingSettings())
    assert _RecordingHighs.options["mip_max_nodes"] == PackingSettings().max_branch_nodes
    assert "time_limit" not in _RecordingHighs.options


def test_a_deadline_is_passed_on_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller may still ask for a wall-clock limit."""
    import highspy._core

    monkeypatch.setattr(highspy._core, "_Highs", _RecordingHighs)
    _RecordingHighs.options = {}
    options = [NodeOption((100, 100), 1.0)]
    cheapest_packing([(60, 10)], [3], options, PackingSettings(deadline_seconds=2.0))
    assert _RecordingHighs.options["time_limit"] == 2.0


def test_a_single_pod_keeps_its_greedy_claim_without_a_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pod's greedy claim is already the cheapest type that holds it: no program runs
    (it cost a live round about 20 ms), and two pods still get one."""
    from scheduler_svc.core import NodePool, Pod, Resources, SchedulingInput, repacking, solve
    from tests.scheduler_svc.core.builders import instance_type

    calls: list[int] = []
    real = cheapest_packing

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(repacking, "cheapest_packing", counting)
    types = (instance_type("small", 2, 4, price=0.1), instance_type("large", 8, 16, price=0.3))
    for count, expected_calls in ((1, 0), (2, 1)):
        calls.clear()
        pods = tuple(Pod(f"p-{i}", containers=(Resources(500, 2**29),)) for i in range(count))
        result = solve(SchedulingInput(pods, (NodePool("default"),), types))
        assert sum(len(c.pods) for c in result.new_claims) == count
        assert len(calls) == expected_calls


def test_a_shape_with_no_pods_that_fits_no_type_is_ignored() -> None:
    """A shape counted 0 asks for nothing, even when no type holds one of it: the packing is
    the other shape's (its start point divided by that shape's zero fit before)."""
    shapes = [(30, 30), (500, 10)]
    options = [NodeOption((100, 100), 1.0)]
    nodes = cheapest_packing(shapes, [3, 0], options, PackingSettings())
    assert packing_cost(nodes, options) == pytest.approx(1.0)
    assert [n.counts for n in nodes] == [(3, 0)]
