"""The second opinion's lower bound: groups whose greedy claims already cost what no packing
can go below skip the integer programs (and loading numpy and HiGHS), and the bound never
exceeds a real packing's cost, so no cheaper plan is ever skipped (issue 11, issue 12's memory:
bench.reaction --rss pins 10,000 pods to one instance type)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_svc.core import NodePool, PackingSettings
from scheduler_svc.core import repacking as repacking_module
from scheduler_svc.core.integer_packing import (
    NodeOption,
    cheapest_packing,
    cost_lower_bound,
    packing_cost,
)
from scheduler_svc.core.requirements import Operator, Requirement
from tests.scheduler_svc.core.builders import instance_type, pod, run

ONE_TYPE = NodePool(
    "default",
    requirements=(Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.xlarge",)),),
)
TYPES = (instance_type("m5.xlarge", 4, 16, 0.192), instance_type("m5.2xlarge", 8, 32, 0.384))


def test_one_type_one_shape_costs_whole_nodes() -> None:
    """23 pods, 10 to a node: no packing costs less than 3 nodes."""
    options = [NodeOption((4000, 16), 0.2)]
    assert cost_lower_bound([(380, 1)], [23], options) == pytest.approx(0.6)


def test_one_shape_costs_at_least_its_cheapest_price_per_pod() -> None:
    """A node of 10 pods at $1 and one of 4 at $0.5: 20 pods cost at least 20 x $0.10."""
    options = [NodeOption((100,), 1.0), NodeOption((40,), 0.5)]
    assert cost_lower_bound([(10,)], [20], options) == pytest.approx(2.0)


def test_a_pod_no_option_holds_gives_no_bound() -> None:
    assert cost_lower_bound([(10,), (500,)], [1, 1], [NodeOption((100,), 1.0)]) == 0.0


def test_pods_on_one_instance_type_skip_the_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.reaction --rss's shape: pods pinned to one type fill whole nodes greedily, which
    the bound proves cheapest; the programs are not run (they were, on every round)."""

    def no_program(*_: object) -> list[object]:
        raise AssertionError("the integer program ran")

    monkeypatch.setattr(repacking_module, "cheapest_packing", no_program)
    pods = [pod(f"p-{i}", cpu=0.38, memory_gib=0.125) for i in range(583)]
    result = run(pods, TYPES, pools=(ONE_TYPE,))
    assert len(result.new_claims) == 59
    assert not result.unschedulable


def test_groups_the_bound_cannot_settle_still_get_the_second_opinion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pods of 3 and 2 cores on 4- and 8-core types: the bound (5 cores' worth, $0.24) is below
    any two-pod packing ($0.384), so it proves nothing and the program runs."""
    calls: list[int] = []

    def counting(*args: object) -> object:
        calls.append(1)
        return cheapest_packing(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(repacking_module, "cheapest_packing", counting)
    run([pod("big", cpu=3.0, memory_gib=1), pod("small", cpu=2.0, memory_gib=1)], TYPES)
    assert calls


def test_a_solve_on_one_type_does_not_import_numpy() -> None:
    """Loading numpy and HiGHS costs the scheduler ~28 MB; a group the bound settles needs
    neither (checked in a fresh interpreter)."""
    code = (
        "import sys\n"
        "from tests.scheduler_svc.core.builders import pod, run\n"
        "from tests.scheduler_svc.core.test_packing_bound import ONE_TYPE, TYPES\n"
        "run([pod(f'p-{i}', cpu=0.38, memory_gib=0.125) for i in range(583)], TYPES,"
        " pools=(ONE_TYPE,))\n"
        "print(sorted(m for m in ('numpy', 'highspy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


shapes_strategy = st.lists(
    st.tuples(st.integers(1, 60), st.integers(0, 60)), min_size=1, max_size=3
)
options_strategy = st.lists(
    st.builds(
        NodeOption,
        st.tuples(st.integers(20, 120), st.integers(20, 120)),
        st.floats(0.05, 2.0),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(shapes_strategy, st.data(), options_strategy)
def test_the_bound_never_exceeds_a_packing(
    shapes: list[tuple[int, int]], data: st.DataObject, options: list[NodeOption]
) -> None:
    """Whatever nodes the program finds cost at least the bound (it is a relaxation)."""
    counts = data.draw(st.lists(st.integers(1, 12), min_size=len(shapes), max_size=len(shapes)))
    nodes = cheapest_packing(shapes, counts, options, PackingSettings())
    if nodes:
        assert cost_lower_bound(shapes, counts, options) <= packing_cost(nodes, options) + 1e-9
