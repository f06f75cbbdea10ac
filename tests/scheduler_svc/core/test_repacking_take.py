"""How a first-fit-decreasing claim takes pods (``Repacking._take``): as many of one shape at
once as the types still holding them all keep minValues, no more, so the claim can still buy
a type of every family the NodePool asks for; its requests are those of the pods it took."""

from __future__ import annotations

import pytest

from scheduler_svc.core import NodePool, Operator, Requirement, SchedulingResult
from scheduler_svc.core.model import InstanceType
from tests.scheduler_svc.core.builders import instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
# Every claim must keep types of both families.
POOL = NodePool("default", requirements=(Requirement(FAMILY, Operator.IN, ("a", "b"), 2),))


def _type(name: str, cpu: float, price: float) -> InstanceType:
    return instance_type(name, cpu, 4 * cpu, price, labels={FAMILY: name.split(".", maxsplit=1)[0]})


def _claims(result: SchedulingResult) -> list[tuple[str, int]]:
    """(type bought, pods) per claim, in a stable order."""
    return sorted((c.instance_type, len(c.pods)) for c in result.new_claims)


# Per cpu the 2-cpu types are cheapest, and b.2xlarge is the only 8-cpu type.
TYPES = [
    _type("a.large", 2, 0.09),
    _type("b.large", 2, 0.095),
    _type("a.xlarge", 4, 0.20),
    _type("b.xlarge", 4, 0.21),
    _type("b.2xlarge", 8, 0.30),
]


def test_a_claim_takes_as_many_pods_as_types_of_both_families_hold() -> None:
    """Ten 1.2-cpu pods. The greedy pass buys seven one-pod a.large and an a.xlarge with three
    ($0.83/h). The program's packing puts six on a b.2xlarge, a claim that would keep one
    family. First-fit-decreasing takes three per claim (3.6 cpu: both xlarge hold them; four
    or more would leave b.2xlarge alone), so three a.xlarge with three pods and an a.large
    with the tenth: $0.69/h."""
    pods = [pod(f"web-{i}", 1.2, 1) for i in range(10)]

    result = run(pods, TYPES, [POOL])

    assert _claims(result) == [("a.large", 1), ("a.xlarge", 3), ("a.xlarge", 3), ("a.xlarge", 3)]
    assert result.total_price_per_hour == pytest.approx(3 * 0.20 + 0.09)
    assert all(c.requests.cpu_millis == 1200 * len(c.pods) for c in result.new_claims)
