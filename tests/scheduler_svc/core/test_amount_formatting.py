"""How the solver spells amounts in reasons (``format_amount``: ``1.5 cpu``, ``0.5 GiB``) and
limits as a NodePool writes them (``format_limit``: ``cpu=100``, ``memory=2Ti``), and a
relaxed multi-requirement node preference as the pod spells it."""

from __future__ import annotations

import pytest

from scheduler_svc.core import Operator, PreferredNodeAffinityTerm, RelaxedPod, Requirement
from scheduler_svc.core.solver_state import format_amount, format_limit

from .builders import GIB, MIB, instance_type, pod, run

TIB = 1024 * GIB
ZONE = "topology.kubernetes.io/zone"
ARCH = "kubernetes.io/arch"


@pytest.mark.parametrize(
    ("dimension", "amount", "shown"),
    [
        ("cpu", 1500, "1.5 cpu"),
        ("cpu", 8000, "8 cpu"),
        ("memory", GIB // 2, "0.5 GiB"),  # under 10 GiB: three significant digits
        ("memory", int(10.5 * GIB), "10 GiB"),  # from 10 GiB: whole GiB
        ("memory", 1536 * GIB, "1536 GiB"),
        ("ephemeral-storage", 20 * GIB, "20 GiB ephemeral-storage"),
        ("pods", 110, "110 pods"),
        ("nvidia.com/gpu", 1, "1 nvidia.com/gpu"),
    ],
)
def test_an_amount_is_shown_in_the_unit_a_person_reads(
    dimension: str, amount: int, shown: str
) -> None:
    """cpu in cores, memory and ephemeral storage in GiB, pods and extended resources as
    counts with their name."""
    assert format_amount(dimension, amount) == shown


@pytest.mark.parametrize(
    ("dimension", "amount", "written"),
    [
        ("cpu", 100_000, "cpu=100"),
        ("cpu", 1500, "cpu=1500m"),
        ("memory", 2 * TIB, "memory=2Ti"),
        ("memory", 1000 * GIB, "memory=1000Gi"),
        ("memory", 512 * MIB, "memory=512Mi"),
        ("memory", 1536 * MIB, "memory=1536Mi"),
        ("memory", 1000, "memory=1000"),
        ("nodes", 3, "nodes=3"),
    ],
)
def test_a_limit_is_written_as_a_nodepool_would(dimension: str, amount: int, written: str) -> None:
    """Whole cores or millicores; memory in the largest binary unit that divides it exactly
    (Ti, Gi, Mi), else bytes; other limits as plain counts."""
    assert format_limit(dimension, amount) == written


def test_a_relaxed_node_preference_lists_each_of_its_requirements() -> None:
    """A preferred node term with two requirements (one no offering meets) is dropped, and the
    result spells both, comma separated."""
    both = (Requirement(ZONE, Operator.IN, ("mars-1",)), Requirement(ARCH, Operator.IN, ("amd64",)))
    p = pod("p", 1, 1, preferred_node_affinity=(PreferredNodeAffinityTerm(10, both),))

    result = run([p], [instance_type("m", 2, 4, 0.1)])

    assert result.relaxed == (
        RelaxedPod(
            "default/p",
            (f"preferred node affinity (weight 10): {ARCH} In [amd64], {ZONE} In [mars-1]",),
        ),
    )
