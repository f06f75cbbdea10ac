"""Table-driven scheduling cases: one line of input, the plan's shape as the expectation."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler_svc.core import (
    InitContainer,
    NodePool,
    Operator,
    Pod,
    Requirement,
    Resources,
)
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run

FAMILY = "karpenter.k8s.aws/instance-family"
CPU = "karpenter.k8s.aws/instance-cpu"
ARCH = "kubernetes.io/arch"
CT = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
TYPE = "node.kubernetes.io/instance-type"

CATALOG = (
    instance_type("c.large", 2, 4, 0.085, spot_price=0.03, labels={FAMILY: "c", CPU: "2"}),
    instance_type("m.large", 2, 8, 0.096, spot_price=0.04, labels={FAMILY: "m", CPU: "2"}),
    instance_type("r.large", 2, 16, 0.126, spot_price=0.05, labels={FAMILY: "r", CPU: "2"}),
    instance_type("m.xlarge", 4, 16, 0.192, spot_price=0.08, labels={FAMILY: "m", CPU: "4"}),
    instance_type("m.4xlarge", 16, 64, 0.768, spot_price=0.3, labels={FAMILY: "m", CPU: "16"}),
    instance_type(
        "g.large", 2, 8, 0.070, labels={FAMILY: "g", CPU: "2", ARCH: "arm64"}, zones=("zone-a",)
    ),
    instance_type("tiny.pods", 8, 32, 0.2, pods=2, labels={FAMILY: "t", CPU: "8"}),
)


def req(key: str, op: Operator, *values: str) -> Requirement:
    return Requirement(key, op, values)


def pool(*requirements: Requirement, name: str = "default", **kwargs: object) -> NodePool:
    return NodePool(name, requirements=requirements, **kwargs)  # type: ignore[arg-type]


@dataclass
class Case:
    id: str
    pods: list[Pod]
    pools: list[NodePool] = field(default_factory=lambda: [pool()])
    types: list[str] | None = None  # chosen instance type per claim, in order
    capacity_types: list[str] | None = None
    zones: list[str] | None = None
    reason: str | None = None  # substring of the first unschedulable pod's reason


ON_DEMAND = req(CT, Operator.IN, "on-demand")
CASES = [
    Case(
        "spot c.large is the cheapest offering",
        [pod("p", 1, 1)],
        types=["c.large"],
        capacity_types=["spot"],
    ),
    Case(
        "on-demand only: cheapest on-demand is g.large",
        [pod("p", 1, 1)],
        [pool(ON_DEMAND)],
        types=["g.large"],
    ),
    Case(
        "amd64 only",
        [pod("p", 1, 1, node_selector={ARCH: "amd64"})],
        [pool(ON_DEMAND)],
        types=["c.large"],
    ),
    Case(
        "instance-cpu Gt 2",
        [pod("p", 1, 1)],
        [pool(ON_DEMAND, req(CPU, Operator.GT, "2"))],
        types=["m.xlarge"],
    ),
    Case(
        "instance-cpu Lt 4 and family m",
        [pod("p", 1, 1)],
        [pool(ON_DEMAND, req(CPU, Operator.LT, "4"), req(FAMILY, Operator.IN, "m"))],
        types=["m.large"],
    ),
    Case(
        "family NotIn c,g",
        [pod("p", 1, 1)],
        [pool(ON_DEMAND, req(FAMILY, Operator.NOT_IN, "c", "g"))],
        types=["m.large"],
    ),
    Case(
        "instance type In list",
        [pod("p", 1, 1)],
        [pool(req(TYPE, Operator.IN, "r.large", "m.xlarge"))],
        types=["r.large"],
    ),
    Case("memory 10Gi needs r.large", [pod("p", 1, 10)], [pool(ON_DEMAND)], types=["r.large"]),
    Case(
        "memory 20Gi: tiny.pods is cheaper than m.4xlarge",
        [pod("p", 1, 20)],
        [pool(ON_DEMAND)],
        types=["tiny.pods"],
    ),
    Case(
        "memory 96Gi fits nothing",
        [pod("p", 1, 96)],
        reason="no instance type has 96 GiB allocatable under NodePool default",
    ),
    Case(
        "arm64 only in zone-a",
        [pod("p", 1, 1, node_selector={ARCH: "arm64"})],
        zones=["zone-a"],
        types=["g.large"],
    ),
    Case(
        "arm64 in zone-b impossible",
        [pod("p", 1, 1, node_selector={ARCH: "arm64", ZONE: "zone-b"})],
        reason="no instance type with an available offering",
    ),
    Case(
        "zone NotIn a,b",
        [
            pod(
                "p",
                1,
                1,
                required_node_affinity=((req(ZONE, Operator.NOT_IN, "zone-a", "zone-b"),),),
            )
        ],
        zones=["zone-c"],
    ),
    Case(
        "custom label Exists needs pool label",
        [pod("p", 1, 1, required_node_affinity=((req("team", Operator.EXISTS),),))],
        [pool(name="plain"), pool(name="teams", labels={"team": "x"})],
        types=["c.large"],
    ),
    Case(
        "custom label DoesNotExist avoids labelled pool",
        [pod("p", 1, 1, required_node_affinity=((req("team", Operator.DOES_NOT_EXIST),),))],
        [pool(name="teams", labels={"team": "x"}, weight=10)],
        reason="team DoesNotExist",
    ),
    Case("spot only", [pod("p", 1, 1, node_selector={CT: "spot"})], capacity_types=["spot"]),
    Case(
        "init container 3 cpu",
        [
            Pod(
                "p",
                containers=(Resources(cpu_millis=100),),
                init_containers=(InitContainer(Resources(cpu_millis=3000)),),
            )
        ],
        [pool(ON_DEMAND)],
        types=["m.xlarge"],
    ),
    Case(
        "overhead counts",
        [Pod("p", containers=(Resources(cpu_millis=1900),), overhead=Resources(cpu_millis=200))],
        [pool(ON_DEMAND)],
        types=["m.xlarge"],
    ),
    Case(
        "ephemeral storage beyond every type",
        [Pod("p", containers=(Resources(ephemeral_storage_bytes=30 * GIB),))],
        reason="ephemeral-storage",
    ),
    Case(
        "pods capacity limits a type",
        [pod(f"p{i}", 0.1, 0.1) for i in range(3)],
        [pool(req(TYPE, Operator.IN, "tiny.pods"))],
        types=["tiny.pods", "tiny.pods"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scheduling_case(case: Case) -> None:
    """Each case's plan has the expected instance types, capacity types, zones or reason."""
    result = run(case.pods, CATALOG, case.pools)
    if case.types is not None:
        assert [c.instance_type for c in result.new_claims] == case.types
    if case.capacity_types is not None:
        assert [c.offerings[0].capacity_type for c in result.new_claims] == case.capacity_types
    if case.zones is not None:
        assert [c.offerings[0].zone for c in result.new_claims] == case.zones
    if case.reason is not None:
        assert result.unschedulable, "expected an unschedulable pod"
        assert case.reason in result.unschedulable[0].reason
    else:
        assert result.unschedulable == ()
