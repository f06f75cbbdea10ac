"""Property: on any valid input the solver answers with a plan, never an exception (issue 19).

Inputs mix everything the solver knows at once: extended resources (GPUs, Neuron, EFA) on some
types and in some pods, host ports (also on DaemonSets and running pods), node selectors with
current and deprecated label keys, every requirement operator, pod (anti-)affinity with
namespaces and namespace selectors, topology spreads with every policy, taints of every effect
on NodePools and nodes, tolerations, init containers, overhead, volume zones, limits, existing
nodes and exhausted offerings. The answer must account for every pod exactly once: placed, or
unschedulable with a reason a person can read.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler_svc.core import (
    HostPort,
    InitContainer,
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    SchedulingInput,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    UnavailableOffering,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
    solve,
)
from tests.scheduler_svc.core.test_properties import ARCH, GIB, HOST, ZONE, ZONES

CPU_LABEL = "karpenter.k8s.aws/instance-cpu"
ACCELERATOR = "karpenter.k8s.aws/instance-accelerator-name"
DEVICES = ("nvidia.com/gpu", "aws.amazon.com/neuron", "vpc.amazonaws.com/efa")
# Keys a requirement may name: instance labels, offering labels, a deprecated alias, a NodePool
# label, a label nobody sets.
KEYS = (
    ZONE,
    ARCH,
    CPU_LABEL,
    ACCELERATOR,
    "karpenter.sh/capacity-type",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "team",
    "nobody-sets-this",
)
VALUES = ("z1", "z2", "amd64", "arm64", "2", "8", "inferentia", "spot", "on-demand", "ml")
APPS = ("web", "db", "cache")
NAMESPACES = ("default", "data")


def _requirement(draw: st.DrawFn) -> Requirement:
    key = draw(st.sampled_from(KEYS))
    operator = draw(st.sampled_from(list(Operator)))
    if operator in (Operator.IN, Operator.NOT_IN):
        values = tuple(draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)))
    elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        values = ()
    else:
        values = (str(draw(st.integers(-1, 16))),)
    return Requirement(key, operator, values)


def _resources(draw: st.DrawFn, *, devices: bool) -> Resources:
    extended: tuple[tuple[str, int], ...] = ()
    if devices and draw(st.integers(0, 2)):
        extended = ((draw(st.sampled_from(DEVICES)), draw(st.integers(1, 2))),)
    return Resources(
        draw(st.integers(0, 40)) * 100, draw(st.integers(0, 40)) * GIB // 4, 0, 0, extended
    )


def _taint(draw: st.DrawFn) -> Taint:
    return Taint(
        draw(st.sampled_from(["team", "dedicated"])),
        draw(st.sampled_from(list(TaintEffect))),
        draw(st.sampled_from(["", "ml"])),
    )


def _toleration(draw: st.DrawFn) -> Toleration:
    if draw(st.booleans()):
        return Toleration(draw(st.sampled_from(["", "team"])), "Exists")
    effect = draw(st.none() | st.sampled_from(list(TaintEffect)))
    return Toleration(draw(st.sampled_from(["team", "dedicated"])), "Equal", "ml", effect)


def _selector(draw: st.DrawFn) -> LabelSelector:
    return LabelSelector.of({"app": draw(st.sampled_from(APPS))})


def _affinity_term(draw: st.DrawFn) -> PodAffinityTerm:
    namespace_selector = draw(
        st.sampled_from(
            [None, LabelSelector(), LabelSelector.of({"kubernetes.io/metadata.name": "data"})]
        )
    )
    namespaces = tuple(draw(st.lists(st.sampled_from(NAMESPACES), max_size=2)))
    return PodAffinityTerm(
        draw(st.sampled_from([HOST, ZONE, "team"])),
        _selector(draw),
        namespaces,
        namespace_selector,
    )


def _spread(draw: st.DrawFn) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        draw(st.sampled_from([HOST, ZONE, ARCH, "team"])),
        draw(st.integers(1, 3)),
        draw(st.sampled_from(list(WhenUnsatisfiable))),
        draw(st.none() | st.just(_selector(draw))),
        draw(st.none() | st.integers(1, 4)),
        draw(st.booleans()),
        draw(st.booleans()),
        tuple(draw(st.lists(st.sampled_from(["app", "version"]), max_size=1))),
    )


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[InstanceType, ...]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        cpu = draw(st.integers(1, 16))
        extended: tuple[tuple[str, int], ...] = ()
        if draw(st.integers(0, 2)):
            extended = ((draw(st.sampled_from(DEVICES)), draw(st.integers(1, 8))),)
        capacity = Resources(cpu * 1000, draw(st.integers(1, 64)) * GIB, 110, 20 * GIB, extended)
        allocatable = Resources(
            capacity.cpu_millis - draw(st.integers(0, 500)),
            capacity.memory_bytes - GIB // 2,
            draw(st.integers(1, 110)),
            17 * GIB,
            extended,
        )
        labels = {ARCH: draw(st.sampled_from(["amd64", "arm64"])), CPU_LABEL: str(cpu)}
        if extended and extended[0][0] == "aws.amazon.com/neuron":
            labels[ACCELERATOR] = "inferentia"
        offerings = tuple(
            Offering(zone, capacity_type, draw(st.integers(1, 100)) / 100, draw(st.booleans()))
            for zone in draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
            for capacity_type in draw(
                st.lists(st.sampled_from(["spot", "on-demand"]), min_size=1, unique=True)
            )
        )
        out.append(InstanceType(f"t{i}.large", capacity, allocatable, labels, offerings))
    return tuple(out)


@st.composite
def nodepools(draw: st.DrawFn) -> tuple[NodePool, ...]:
    out = []
    for i in range(draw(st.integers(1, 3))):
        requirements = tuple(_requirement(draw) for _ in range(_some(draw, 2)))
        out.append(
            NodePool(
                f"pool{i}",
                requirements=requirements,
                labels={"team": "ml"} if draw(st.booleans()) else {},
                taints=tuple(_taint(draw) for _ in range(_some(draw, 2))),
                weight=draw(st.integers(0, 2)),
                limits=NodePoolLimits(
                    cpu_millis=draw(st.none() | st.integers(1, 40).map(lambda c: c * 1000))
                    if _some(draw, 1)
                    else None,
                    nodes=draw(st.integers(0, 5)) if _some(draw, 1) else None,
                ),
            )
        )
    return tuple(out)


def _some(draw: st.DrawFn, most: int) -> int:
    """How many of one constraint a pod gets: none for about three pods in four."""
    return draw(st.integers(1, most)) if draw(st.integers(0, 3)) == 0 else 0


def _pod(draw: st.DrawFn, name: str, *, bound: bool = False) -> Pod:
    soft = not bound and draw(st.booleans())
    return Pod(
        name,
        namespace=draw(st.sampled_from(NAMESPACES)),
        labels={"app": draw(st.sampled_from(APPS)), "version": draw(st.sampled_from("ab"))},
        containers=(_resources(draw, devices=True),),
        init_containers=tuple(
            InitContainer(_resources(draw, devices=False), draw(st.booleans()))
            for _ in range(draw(st.integers(0, 1)))
        ),
        overhead=_resources(draw, devices=False) if draw(st.booleans()) else Resources(),
        node_selector={
            draw(st.sampled_from(KEYS)): draw(st.sampled_from(VALUES))
            for _ in range(_some(draw, 1))
        },
        required_node_affinity=tuple(
            tuple(_requirement(draw) for _ in range(draw(st.integers(1, 2))))
            for _ in range(_some(draw, 2))
        ),
        preferred_node_affinity=tuple(
            PreferredNodeAffinityTerm(draw(st.integers(1, 100)), (_requirement(draw),))
            for _ in range(draw(st.integers(0, 2)) if soft else 0)
        ),
        tolerations=tuple(_toleration(draw) for _ in range(draw(st.integers(0, 2)))),
        topology_spread=tuple(_spread(draw) for _ in range(_some(draw, 2))),
        pod_affinity=tuple(_affinity_term(draw) for _ in range(_some(draw, 1))),
        pod_anti_affinity=tuple(_affinity_term(draw) for _ in range(_some(draw, 1))),
        preferred_pod_affinity=tuple(
            WeightedPodAffinityTerm(draw(st.integers(1, 100)), _affinity_term(draw))
            for _ in range(draw(st.integers(0, 1)) if soft else 0)
        ),
        preferred_pod_anti_affinity=tuple(
            WeightedPodAffinityTerm(draw(st.integers(1, 100)), _affinity_term(draw))
            for _ in range(draw(st.integers(0, 1)) if soft else 0)
        ),
        host_ports=tuple(
            HostPort(draw(st.sampled_from([80, 8080, 9100])), draw(st.sampled_from(["TCP", "UDP"])))
            for _ in range(_some(draw, 1))
        ),
        volume_zones=tuple(
            draw(st.lists(st.sampled_from(ZONES), max_size=_some(draw, 2), unique=True))
        ),
    )


@st.composite
def problems(draw: st.DrawFn) -> SchedulingInput:
    catalog = draw(catalogs())
    pending = tuple(_pod(draw, f"p{i}") for i in range(draw(st.integers(1, 25))))
    nodes = tuple(
        Node(
            f"n{i}",
            {HOST: f"n{i}", ZONE: draw(st.sampled_from(ZONES)), ARCH: "amd64"},
            taints=tuple(_taint(draw) for _ in range(draw(st.integers(0, 1)))),
            allocatable=Resources(4000, 16 * GIB, 20, 20 * GIB, ((DEVICES[0], 1),)),
            pods=tuple(
                _pod(draw, f"running-{i}-{j}", bound=True) for j in range(draw(st.integers(0, 2)))
            ),
            is_in_flight=draw(st.booleans()),
        )
        for i in range(draw(st.integers(0, 2)))
    )
    daemonsets = tuple(_pod(draw, f"ds{i}", bound=True) for i in range(draw(st.integers(0, 2))))
    exhausted = frozenset(
        UnavailableOffering(t.name, o.zone, o.capacity_type)
        for t in catalog
        for o in t.offerings
        if draw(st.integers(0, 4)) == 0
    )
    return SchedulingInput(pending, draw(nodepools()), catalog, nodes, daemonsets, exhausted)


def _device_type(name: str, device: str) -> InstanceType:
    size = Resources(8000, 32 * GIB, 110, 20 * GIB, ((device, 4),))
    return InstanceType(name, size, size, {ARCH: "amd64"}, (Offering("z1", "on-demand", 1.0),))


# Found by this test: two pods needing devices no single type has, and a plain pod, crashed the
# solver (`ValueError: negative shift count`: no type held the batch's demand, target -1).
DEVICES_NO_TYPE_HAS_TOGETHER = SchedulingInput(
    (
        Pod("gpu", containers=(Resources(500, GIB, 0, 0, ((DEVICES[0], 1),)),)),
        Pod("neuron", containers=(Resources(500, GIB, 0, 0, ((DEVICES[1], 1),)),)),
        Pod("plain", containers=(Resources(500, GIB),)),
    ),
    (NodePool("default"),),
    (_device_type("g.large", DEVICES[0]), _device_type("inf.large", DEVICES[1])),
)


@example(DEVICES_NO_TYPE_HAS_TOGETHER)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_the_solver_answers_every_valid_input_with_a_plan(problem: SchedulingInput) -> None:
    """Any mix of pods, NodePools, DaemonSets, nodes and catalog gets a plan where every pod is
    placed once or unschedulable with a reason; no exception escapes."""
    result = solve(problem)

    placed = [p for c in result.new_claims for p in c.pods]
    placed += [p for e in result.existing_placements for p in e.pods]
    refused = [u.pod for u in result.unschedulable]
    assert Counter(placed + refused) == Counter(p.key for p in problem.pods)
    assert all(u.reason.strip() for u in result.unschedulable)
    assert all(c.offerings for c in result.new_claims)
