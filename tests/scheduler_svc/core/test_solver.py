"""Scheduling rules, one behaviour per test (the ground Karpenter's suite covers)."""

from __future__ import annotations

import pytest

from scheduler_svc.core import (
    HostPort,
    InitContainer,
    LabelSelector,
    Node,
    NodePool,
    NodePoolLimits,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    UnavailableOffering,
    WhenUnsatisfiable,
)
from tests.scheduler_svc.core.builders import GIB, ZONES, claim_of, instance_type, pod, run, zone_of

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
CT = "karpenter.sh/capacity-type"
SMALL = instance_type("small", 2, 4, 0.10, spot_price=0.04)
MEDIUM = instance_type("medium", 4, 8, 0.20, spot_price=0.08)
LARGE = instance_type("large", 8, 32, 0.50, spot_price=0.30)
CATALOG = (SMALL, MEDIUM, LARGE)


def test_cheapest_type_that_holds_the_pods_is_chosen() -> None:
    """Three 1-cpu pods need 3 cpu: medium (the cheapest that holds them) on spot, cheapest."""
    result = run([pod(f"p{i}", 1, 1) for i in range(3)], CATALOG)
    assert len(result.new_claims) == 1
    assert result.new_claims[0].instance_type == "medium"
    assert result.new_claims[0].offerings[0].capacity_type == "spot"


def test_offerings_are_the_full_ordered_fallback_list() -> None:
    """The claim lists every compatible offering cheapest first; types too small are absent."""
    result = run([pod("p", 3, 1)], CATALOG)
    offers = result.new_claims[0].offerings
    assert [o.price_per_hour for o in offers] == sorted(o.price_per_hour for o in offers)
    assert {o.instance_type for o in offers} == {"medium", "large"}
    # large's spot (0.30) costs more than medium on-demand (0.20): dropped.
    assert len(offers) == 3 * len(ZONES)
    assert ("large", "spot") not in {(o.instance_type, o.capacity_type) for o in offers}


def test_spot_pricier_than_cheapest_on_demand_is_dropped() -> None:
    """A spot offering above the cheapest compatible on-demand price is not in the list."""
    odd = instance_type("odd", 4, 8, 0.50, spot_price=0.45)
    cheap = instance_type("cheap", 4, 8, 0.30)
    result = run([pod("p", 3, 1)], [odd, cheap])
    offers = result.new_claims[0].offerings
    assert all(not (o.instance_type == "odd" and o.capacity_type == "spot") for o in offers)
    assert offers[0].instance_type == "cheap"


def test_unavailable_offerings_are_excluded() -> None:
    """Offerings the actuator reported exhausted are neither chosen nor listed."""
    gone = frozenset(UnavailableOffering("medium", z, "spot") for z in ZONES)
    result = run([pod("p", 3, 1)], CATALOG, unavailable_offerings=gone)
    offers = result.new_claims[0].offerings
    assert ("medium", "spot") not in {(o.instance_type, o.capacity_type) for o in offers}
    assert result.new_claims[0].offerings[0].instance_type == "medium"
    assert result.new_claims[0].offerings[0].capacity_type == "on-demand"


def test_on_demand_only_pool_never_lists_spot() -> None:
    """A NodePool limited to on-demand yields only on-demand offerings."""
    pool = NodePool("od", requirements=(Requirement(CT, Operator.IN, ("on-demand",)),))
    result = run([pod("p", 1, 1)], CATALOG, [pool])
    assert {o.capacity_type for o in result.new_claims[0].offerings} == {"on-demand"}


def test_existing_node_is_used_before_new_claims() -> None:
    """A pod that fits on an existing node goes there and no claim is created."""
    node = Node("n1", {ZONE: "zone-a"}, allocatable=Resources(4000, 8 * GIB, 110))
    result = run([pod("p", 1, 1)], CATALOG, nodes=(node,))
    assert result.new_claims == ()
    assert result.existing_placements[0].node == "n1"


def test_in_flight_claim_is_used_before_new_claims() -> None:
    """A pod that fits on an in-flight NodeClaim goes there."""
    node = Node(
        "claim-1", {ZONE: "zone-a"}, allocatable=Resources(4000, 8 * GIB, 110), is_in_flight=True
    )
    result = run([pod("p", 1, 1)], CATALOG, nodes=(node,))
    assert [p.node for p in result.existing_placements] == ["claim-1"]


def test_full_existing_node_overflows_to_new_claim() -> None:
    """Pods beyond an existing node's free room go to a new claim."""
    running = pod("old", 3, 1)
    node = Node("n1", {ZONE: "zone-a"}, allocatable=Resources(4000, 8 * GIB, 110), pods=(running,))
    result = run([pod("a", 1, 1), pod("b", 1, 1)], CATALOG, nodes=(node,))
    assert len(result.existing_placements[0].pods) == 1
    assert sum(len(c.pods) for c in result.new_claims) == 1


def test_tainted_node_is_skipped_unless_tolerated() -> None:
    """A NoSchedule-tainted node takes only pods that tolerate the taint."""
    taint = Taint("dedicated", TaintEffect.NO_SCHEDULE, "gpu")
    node = Node("n1", {}, (taint,), allocatable=Resources(8000, 16 * GIB, 110))
    tolerant = pod("t", 1, 1, tolerations=(Toleration("dedicated", "Equal", "gpu"),))
    result = run([pod("plain", 1, 1), tolerant], CATALOG, nodes=(node,))
    assert result.existing_placements[0].pods == ("default/t",)
    assert claim_of(result, "default/plain") == 0


def test_nodepool_taint_blocks_with_actionable_reason() -> None:
    """A pod tolerating no NodePool's taint is unschedulable and the reason names the taint."""
    pool = NodePool("ml", taints=(Taint("team", TaintEffect.NO_SCHEDULE, "ml"),))
    result = run([pod("p", 1, 1)], CATALOG, [pool])
    assert result.unschedulable[0].reason == "tolerates no NodePool's taint team=ml:NoSchedule"


def test_startup_taints_do_not_block() -> None:
    """StartupTaints are not considered when provisioning."""
    pool = NodePool("boot", startup_taints=(Taint("agent", TaintEffect.NO_SCHEDULE),))
    result = run([pod("p", 1, 1)], CATALOG, [pool])
    assert len(result.new_claims) == 1


def test_prefer_no_schedule_taint_does_not_block() -> None:
    """PreferNoSchedule only scores; it does not keep pods off."""
    pool = NodePool("soft", taints=(Taint("x", TaintEffect.PREFER_NO_SCHEDULE),))
    assert len(run([pod("p", 1, 1)], CATALOG, [pool]).new_claims) == 1


def test_higher_weight_nodepool_first() -> None:
    """NodePools are tried by weight, higher first."""
    low = NodePool("low", weight=1)
    high = NodePool("high", weight=50)
    result = run([pod("p", 1, 1)], CATALOG, [low, high])
    assert result.new_claims[0].nodepool == "high"


def test_lower_weight_pool_takes_what_higher_cannot() -> None:
    """A pod incompatible with the heavier pool lands in the lighter one."""
    high = NodePool(
        "high",
        weight=50,
        requirements=(Requirement("kubernetes.io/arch", Operator.IN, ("arm64",)),),
    )
    low = NodePool("low", weight=1)
    result = run([pod("p", 1, 1)], CATALOG, [high, low])
    assert result.new_claims[0].nodepool == "low"


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        (Operator.GT, "4", "large"),
        (Operator.LT, "4", "small"),
        (Operator.GTE, "4", "medium"),
        (Operator.LTE, "2", "small"),
    ],
)
def test_numeric_requirements_on_instance_labels(
    operator: Operator, value: str, expected: str
) -> None:
    """Gt/Lt/Gte/Lte on karpenter.k8s.aws/instance-cpu narrow the types."""
    key = "karpenter.k8s.aws/instance-cpu"
    types = [
        instance_type("small", 2, 4, 0.1, labels={key: "2"}),
        instance_type("medium", 4, 8, 0.2, labels={key: "4"}),
        instance_type("large", 8, 32, 0.5, labels={key: "8"}),
    ]
    pool = NodePool("default", requirements=(Requirement(key, operator, (value,)),))
    assert run([pod("p", 0.5, 0.5)], types, [pool]).new_claims[0].instance_type == expected


def test_pod_requirement_conflicting_with_pool_is_explained() -> None:
    """A pod requiring a zone the NodePool excludes gets a reason naming both sides."""
    pool = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-a",)),))
    p = pod("p", 1, 1, node_selector={ZONE: "zone-b"})
    reason = run([p], CATALOG, [pool]).unschedulable[0].reason
    assert "zone-b" in reason
    assert "zone-a" in reason


def test_custom_node_selector_needs_pool_label() -> None:
    """A nodeSelector on a custom label schedules only through a NodePool that sets it."""
    p = pod("p", 1, 1, node_selector={"team": "ml"})
    plain = NodePool("plain")
    ml = NodePool("ml", labels={"team": "ml"})
    assert run([p], CATALOG, [plain]).unschedulable
    assert run([p], CATALOG, [plain, ml]).new_claims[0].nodepool == "ml"


@pytest.mark.parametrize("label", ["daiku.dev/nodepool", "karpenter.sh/nodepool"])
def test_node_selector_on_the_nodepool_label_picks_that_pool(label: str) -> None:
    """A pod selecting a NodePool by daiku's or Karpenter's nodepool label lands only there."""
    p = pod("p", 1, 1, node_selector={label: "on-demand"})
    heavy = NodePool("default", weight=50)
    chosen = NodePool("on-demand")
    assert run([p], CATALOG, [heavy, chosen]).new_claims[0].nodepool == "on-demand"
    assert run([p], CATALOG, [heavy]).unschedulable


def test_too_big_pod_reason_names_the_amount() -> None:
    """A pod larger than every type gets 'no instance type has 96 GiB allocatable …'."""
    result = run([pod("p", 1, 96)], CATALOG)
    assert (
        result.unschedulable[0].reason
        == "no instance type has 96 GiB allocatable under NodePool default"
    )


def test_cpu_limit_schedules_what_fits_and_reports_rest() -> None:
    """With limits.cpu 8, pods beyond 8 cpu of capacity stay pending with the limit as reason."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=8000))
    result = run([pod(f"p{i}", 1.5, 1) for i in range(8)], CATALOG, [pool])
    launched = sum(c.requests.cpu_millis for c in result.new_claims)
    assert launched <= 8000
    assert result.unschedulable
    assert result.unschedulable[0].reason == "NodePool default limit cpu=8 reached"
    fallback_cpus = {o.instance_type for c in result.new_claims for o in c.offerings}
    assert (
        sum(
            max(
                {"small": 2, "medium": 4, "large": 8}[t]
                for t in {o.instance_type for o in c.offerings}
            )
            for c in result.new_claims
        )
        <= 8
    )
    assert fallback_cpus


def test_limit_counts_existing_nodes() -> None:
    """Existing nodes of the pool count against its limit."""
    busy = pod("busy", 3.5, 1)
    node = Node(
        "n1",
        {"daiku.dev/nodepool": "default"},
        allocatable=Resources(3900, 3 * GIB, 110),
        capacity=Resources(4000, 4 * GIB, 110),
        pods=(busy,),
    )
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=6000))
    result = run([pod("p", 3, 1)], CATALOG, [pool], nodes=(node,))
    assert result.unschedulable[0].reason == "NodePool default limit cpu=6 reached"


def test_nodes_limit() -> None:
    """limits.nodes caps the number of claims."""
    pool = NodePool("default", limits=NodePoolLimits(nodes=1))
    result = run([pod(f"p{i}", 6, 1) for i in range(2)], CATALOG, [pool])
    assert len(result.new_claims) == 1
    assert result.unschedulable[0].reason == "NodePool default limit nodes=1 reached"


@pytest.mark.parametrize("label", ["daiku.dev/nodepool", "karpenter.sh/nodepool"])
def test_nodes_limit_counts_existing_nodes(label: str) -> None:
    """Two full nodes of a NodePool with limits.nodes=2 leave no room for a third claim."""
    nodes = tuple(
        Node(
            f"n{i}",
            {label: "default"},
            allocatable=Resources(2000, 4 * GIB, 110),
            pods=(pod(f"busy{i}", 1.5, 1),),
        )
        for i in range(2)
    )
    pool = NodePool("default", limits=NodePoolLimits(nodes=2))
    result = run([pod("p", 1.5, 1)], CATALOG, [pool], nodes=nodes)
    assert result.new_claims == ()
    assert result.unschedulable[0].reason == "NodePool default limit nodes=2 reached"
    other = NodePool("default", limits=NodePoolLimits(nodes=3))
    assert len(run([pod("p", 1.5, 1)], CATALOG, [other], nodes=nodes).new_claims) == 1


def test_init_container_larger_than_containers_sets_request() -> None:
    """An init container asking 3 cpu makes a 1-cpu pod need 3 cpu (medium, not small)."""
    p = Pod(
        "p",
        containers=(Resources(cpu_millis=1000, memory_bytes=GIB),),
        init_containers=(InitContainer(Resources(cpu_millis=3000)),),
    )
    assert p.requests().cpu_millis == 3000
    assert run([p], CATALOG).new_claims[0].instance_type == "medium"


def test_sidecars_add_to_containers_and_to_later_inits() -> None:
    """Sidecars (restartPolicy Always) add to the running total and to later init containers."""
    p = Pod(
        "p",
        containers=(Resources(cpu_millis=1000),),
        init_containers=(
            InitContainer(Resources(cpu_millis=500), is_sidecar=True),
            InitContainer(Resources(cpu_millis=2000)),
        ),
        overhead=Resources(cpu_millis=100),
    )
    assert p.requests().cpu_millis == 2500 + 100


def test_host_port_conflict_spreads_pods() -> None:
    """Two pods binding the same host port never share a node."""
    pods = [pod(f"p{i}", 0.1, 0.1, host_ports=(HostPort(8080),)) for i in range(2)]
    result = run(pods, CATALOG)
    assert len(result.new_claims) == 2


def test_host_port_conflict_with_running_pod() -> None:
    """A pending pod's host port taken on an existing node sends it elsewhere."""
    running = pod("old", 0.1, 0.1, host_ports=(HostPort(8080),))
    node = Node("n1", {}, allocatable=Resources(4000, 8 * GIB, 110), pods=(running,))
    result = run([pod("p", 0.1, 0.1, host_ports=(HostPort(8080),))], CATALOG, nodes=(node,))
    assert result.existing_placements == ()
    assert len(result.new_claims) == 1


def test_daemonset_overhead_grows_the_node() -> None:
    """A DaemonSet asking 1 cpu makes a 1.5-cpu pod need medium instead of small."""
    daemon = pod("ds", 1, 0.5)
    result = run([pod("p", 1.5, 1)], CATALOG, daemonsets=(daemon,))
    assert result.new_claims[0].instance_type == "medium"
    assert result.new_claims[0].requests.cpu_millis == 2500 + 0


def test_daemonset_not_tolerating_pool_taint_adds_nothing() -> None:
    """A DaemonSet that cannot run on the pool's nodes does not count as overhead."""
    pool = NodePool("t", taints=(Taint("x", TaintEffect.NO_SCHEDULE),))
    daemon = pod("ds", 1, 0.5)
    p = pod("p", 1.5, 1, tolerations=(Toleration("x", "Exists"),))
    assert run([p], CATALOG, [pool], daemonsets=(daemon,)).new_claims[0].instance_type == "small"


def test_extended_resource_picks_gpu_type() -> None:
    """A pod asking one nvidia.com/gpu gets a GPU type."""
    gpu = instance_type("gpu", 8, 32, 3.0, gpus=1)
    p = Pod("p", containers=(Resources(cpu_millis=100, extended=(("nvidia.com/gpu", 1),)),))
    assert run([p], [*CATALOG, gpu]).new_claims[0].instance_type == "gpu"


def _spread(
    key: str,
    skew: int = 1,
    *,
    min_domains: int | None = None,
    when_unsatisfiable: WhenUnsatisfiable = WhenUnsatisfiable.DO_NOT_SCHEDULE,
    match_label_keys: tuple[str, ...] = (),
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        key,
        skew,
        when_unsatisfiable,
        LabelSelector.of({"app": "web"}),
        min_domains,
        match_label_keys=match_label_keys,
    )


def test_zone_spread_balances_pods() -> None:
    """Six pods with zone spread maxSkew 1 over three zones land two per zone."""
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(_spread(ZONE),))
        for i in range(6)
    ]
    result = run(pods, CATALOG)
    zones = [zone_of(result, p.key) for p in pods]
    assert sorted(zones.count(z) for z in ZONES) == [2, 2, 2]


def test_zone_spread_counts_running_pods() -> None:
    """Pods already running in zone-a push new ones to the other zones."""
    running = tuple(pod(f"old{i}", 0.1, 0.1, labels={"app": "web"}) for i in range(2))
    node = Node("n1", {ZONE: "zone-a"}, allocatable=Resources(400, GIB, 110), pods=running)
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(_spread(ZONE),))
        for i in range(4)
    ]
    result = run(pods, CATALOG, nodes=(node,))
    zones = [zone_of(result, p.key) for p in pods]
    assert zones.count("zone-a") == 0
    assert zones.count("zone-b") == 2
    assert zones.count("zone-c") == 2


def test_hostname_spread_one_per_node() -> None:
    """Three pods with hostname spread maxSkew 1 get three nodes."""
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(_spread(HOST),))
        for i in range(3)
    ]
    assert len(run(pods, CATALOG).new_claims) == 3


def test_capacity_type_spread() -> None:
    """Spread on capacity type puts pods on both spot and on-demand."""
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(_spread(CT),))
        for i in range(2)
    ]
    result = run(pods, CATALOG)
    assert {
        result.new_claims[claim_of(result, p.key)].offerings[0].capacity_type for p in pods
    } == {"spot", "on-demand"}


def test_min_domains_caps_pods_when_too_few_domains() -> None:
    """minDomains 3 with only two zones available: global minimum is 0, so one pod per zone."""
    pool = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-a", "zone-b")),))
    pods = [
        pod(
            f"p{i}",
            0.5,
            0.5,
            labels={"app": "web"},
            topology_spread=(_spread(ZONE, min_domains=3),),
        )
        for i in range(4)
    ]
    result = run(pods, CATALOG, [pool])
    assert sum(len(c.pods) for c in result.new_claims) == 2
    assert len(result.unschedulable) == 2
    assert "topology spread on topology.kubernetes.io/zone" in result.unschedulable[0].reason


def test_schedule_anyway_spread_is_relaxed() -> None:
    """A ScheduleAnyway spread that cannot hold is dropped rather than leaving pods pending."""
    pool = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ("zone-a",)),))
    s = _spread(ZONE, min_domains=3, when_unsatisfiable=WhenUnsatisfiable.SCHEDULE_ANYWAY)
    pods = [pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(s,)) for i in range(3)]
    assert run(pods, CATALOG, [pool]).unschedulable == ()


def test_match_label_keys_split_groups() -> None:
    """matchLabelKeys makes pods of different revisions spread independently."""
    pods = [
        pod(
            f"{rev}-{i}",
            0.5,
            0.5,
            labels={"app": "web", "rev": rev},
            topology_spread=(_spread(HOST, match_label_keys=("rev",)),),
        )
        for rev in ("r1", "r2")
        for i in range(2)
    ]
    result = run(pods, CATALOG)
    assert len(result.new_claims) == 2
    for claim in result.new_claims:
        assert {p.split("/")[1].split("-")[0] for p in claim.pods} == {"r1", "r2"}


def _anti(key: str) -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(key, LabelSelector.of({"app": "db"})),)


def test_anti_affinity_hostname_one_per_node() -> None:
    """Pods with anti-affinity to themselves on hostname never share a node."""
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "db"}, pod_anti_affinity=_anti(HOST))
        for i in range(3)
    ]
    result = run(pods, CATALOG)
    assert len(result.new_claims) == 3


def test_anti_affinity_zone_runs_out_of_zones() -> None:
    """Zone anti-affinity with three zones places three pods; the fourth gets a reason."""
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "db"}, pod_anti_affinity=_anti(ZONE))
        for i in range(4)
    ]
    result = run(pods, CATALOG)
    assert (
        len(
            {zone_of(result, p.key) for p in pods[:0]}
            | {c.offerings[0].zone for c in result.new_claims}
        )
        == 3
    )
    assert len(result.unschedulable) == 1
    assert "anti-affinity" in result.unschedulable[0].reason


def test_running_pods_anti_affinity_is_symmetric() -> None:
    """A running pod's anti-affinity keeps matching pending pods off its node."""
    guard = pod(
        "guard",
        0.1,
        0.1,
        labels={"app": "guard"},
        pod_anti_affinity=(PodAffinityTerm(HOST, LabelSelector.of({"app": "web"})),),
    )
    node = Node("n1", {}, allocatable=Resources(8000, 16 * GIB, 110), pods=(guard,))
    result = run(
        [pod("w", 0.5, 0.5, labels={"app": "web"}), pod("x", 0.5, 0.5)], CATALOG, nodes=(node,)
    )
    assert result.existing_placements[0].pods == ("default/x",)
    assert claim_of(result, "default/w") == 0


def test_pod_affinity_follows_running_pod_zone() -> None:
    """Required pod affinity on zone puts the pod in the zone of the matching running pod."""
    cache = pod("cache", 0.1, 0.1, labels={"app": "cache"})
    node = Node("n1", {ZONE: "zone-b"}, allocatable=Resources(200, GIB, 110), pods=(cache,))
    p = pod("p", 1, 1, pod_affinity=(PodAffinityTerm(ZONE, LabelSelector.of({"app": "cache"})),))
    result = run([p], CATALOG, nodes=(node,))
    assert zone_of(result, "default/p") == "zone-b"
    assert all(o.zone == "zone-b" for o in result.new_claims[0].offerings)


def test_pod_affinity_without_any_match_is_unschedulable() -> None:
    """Affinity to pods that run nowhere (and that the pod is not) cannot be met."""
    p = pod("p", 1, 1, pod_affinity=(PodAffinityTerm(ZONE, LabelSelector.of({"app": "none"})),))
    result = run([p], CATALOG)
    assert "pod affinity" in result.unschedulable[0].reason


def test_self_affinity_groups_in_one_zone() -> None:
    """Pods with affinity to their own label all land in one zone."""
    pods = [pod(f"p{i}", 1.5, 1, labels={"app": "db"}, pod_affinity=_anti(ZONE)) for i in range(6)]
    result = run(pods, CATALOG)
    assert len({zone_of(result, p.key) for p in pods}) == 1


def test_preferred_node_affinity_is_honoured_when_possible() -> None:
    """A preference for zone-c pins the claim to zone-c."""
    pref = (PreferredNodeAffinityTerm(10, (Requirement(ZONE, Operator.IN, ("zone-c",)),)),)
    result = run([pod("p", 1, 1, preferred_node_affinity=pref)], CATALOG)
    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-c"}


def test_preferred_node_affinity_is_relaxed_when_impossible() -> None:
    """A preference for a zone nobody offers is dropped and the pod still schedules."""
    pref = (PreferredNodeAffinityTerm(10, (Requirement(ZONE, Operator.IN, ("mars-1",)),)),)
    result = run([pod("p", 1, 1, preferred_node_affinity=pref)], CATALOG)
    assert result.unschedulable == ()
    assert len(result.new_claims) == 1


def test_required_node_affinity_terms_are_ored() -> None:
    """Node affinity terms are alternatives: an impossible first term does not block the second."""
    terms = (
        (Requirement(ZONE, Operator.IN, ("mars-1",)),),
        (Requirement(ZONE, Operator.IN, ("zone-b",)),),
    )
    result = run([pod("p", 1, 1, required_node_affinity=terms)], CATALOG)
    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-b"}


def test_volume_zone_pins_claim() -> None:
    """A pod whose volume lives in zone-c gets a zone-c claim."""
    result = run([pod("p", 1, 1, volume_zones=("zone-c",))], CATALOG)
    assert {o.zone for o in result.new_claims[0].offerings} == {"zone-c"}


def test_pods_pack_at_lowest_total_price() -> None:
    """Forty 0.25-cpu pods (10 cpu) cost what five full small spot nodes cost, the optimum."""
    result = run([pod(f"p{i}", 0.25, 0.5) for i in range(40)], CATALOG)
    assert len(result.new_claims) <= 5
    assert result.total_price_per_hour == pytest.approx(5 * 0.04)


def test_deterministic() -> None:
    """The same input yields the same plan."""
    pods = [
        pod(
            f"p{i}",
            0.25 * (i % 4 + 1),
            0.5,
            labels={"app": "web"},
            topology_spread=(_spread(ZONE),),
        )
        for i in range(30)
    ]
    assert run(pods, CATALOG) == run(list(reversed(pods)), CATALOG)


FAMILY = "karpenter.k8s.aws/instance-family"


@pytest.mark.parametrize(("cpu", "placed"), [(1.5, True), (6, False)])
def test_min_values_keeps_enough_instance_families(cpu: float, placed: bool) -> None:
    """minValues 2 on instance-family: a pod only one family can hold stays pending, with the
    reason; one that two families hold gets a claim listing both."""
    types = [
        instance_type("a.large", 2, 8, 0.1, labels={FAMILY: "a"}),
        instance_type("b.large", 2, 8, 0.12, labels={FAMILY: "b"}),
        instance_type("a.2xlarge", 8, 32, 0.4, labels={FAMILY: "a"}),
    ]
    pool = NodePool("default", requirements=(Requirement(FAMILY, Operator.IN, ("a", "b"), 2),))
    result = run([pod("p", cpu, 1)], types, [pool])
    if placed:
        families = {o.instance_type.split(".")[0] for o in result.new_claims[0].offerings}
        assert families == {"a", "b"}
    else:
        assert "minValues 2 for karpenter.k8s.aws/instance-family" in result.unschedulable[0].reason


def test_hostname_selector_only_matches_existing_nodes() -> None:
    """A pod selecting a hostname goes to that node if it exists and never to a new claim."""
    node = Node("n1", {HOST: "n1"}, allocatable=Resources(4000, 8 * GIB, 110))
    here = pod("here", 1, 1, node_selector={HOST: "n1"})
    nowhere = pod("nowhere", 1, 1, node_selector={HOST: "n9"})
    result = run([here, nowhere], CATALOG, nodes=(node,))
    assert result.existing_placements[0].pods == ("default/here",)
    assert result.new_claims == ()
    assert "which no new node can have" in result.unschedulable[0].reason


def test_running_pod_with_same_anti_term_blocks_pending_copies() -> None:
    """A running pod owning the same anti-affinity term as pending pods still repels them."""
    term = (PodAffinityTerm(HOST, LabelSelector.of({"app": "web"})),)
    guard = pod("guard", 0.1, 0.1, labels={"app": "guard"}, pod_anti_affinity=term)
    node = Node("n1", {}, allocatable=Resources(8000, 16 * GIB, 110), pods=(guard,))
    web = pod("web", 0.5, 0.5, labels={"app": "web"}, pod_anti_affinity=term)
    result = run([web], CATALOG, nodes=(node,))
    assert result.existing_placements == ()
    assert claim_of(result, "default/web") == 0


def test_anti_affinity_to_other_pending_pods_regardless_of_order() -> None:
    """A pod repelling app=b never shares a node with pending app=b pods, whichever comes first."""
    repel = (PodAffinityTerm(HOST, LabelSelector.of({"app": "b"})),)
    for big_first in (True, False):
        a = pod("a", 2 if big_first else 0.2, 1, labels={"app": "a"}, pod_anti_affinity=repel)
        b = pod("b", 0.2 if big_first else 2, 1, labels={"app": "b"})
        result = run([a, b], CATALOG)
        assert claim_of(result, "default/a") != claim_of(result, "default/b")


def test_schedule_anyway_spread_is_honoured_when_possible() -> None:
    """A ScheduleAnyway zone spread still spreads pods when it can."""
    s = _spread(ZONE, when_unsatisfiable=WhenUnsatisfiable.SCHEDULE_ANYWAY)
    pods = [pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(s,)) for i in range(3)]
    result = run(pods, CATALOG)
    assert {zone_of(result, p.key) for p in pods} == set(ZONES)


def test_preferred_anti_affinity_honoured_then_relaxed() -> None:
    """Preferred zone anti-affinity spreads three pods over three zones; a fourth still lands."""
    from scheduler_svc.core import WeightedPodAffinityTerm

    term = WeightedPodAffinityTerm(10, PodAffinityTerm(ZONE, LabelSelector.of({"app": "db"})))
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "db"}, preferred_pod_anti_affinity=(term,))
        for i in range(4)
    ]
    result = run(pods, CATALOG)
    assert result.unschedulable == ()
    assert {zone_of(result, p.key) for p in pods[:3]} == set(ZONES)


@pytest.mark.parametrize(("honor", "placed"), [(True, 4), (False, 2)])
def test_node_affinity_policy_decides_counted_zones(honor: bool, placed: int) -> None:
    """With nodeAffinityPolicy Honor only the pod's two allowed zones count; with Ignore the
    empty third zone holds the minimum at 0, so only one pod per allowed zone fits."""
    spread = TopologySpreadConstraint(
        ZONE, 1, label_selector=LabelSelector.of({"app": "web"}), node_affinity_policy_honor=honor
    )
    pods = [
        pod(
            f"p{i}",
            0.5,
            0.5,
            labels={"app": "web"},
            topology_spread=(spread,),
            required_node_affinity=((Requirement(ZONE, Operator.IN, ("zone-a", "zone-b")),),),
        )
        for i in range(4)
    ]
    result = run(pods, CATALOG)
    assert sum(len(c.pods) for c in result.new_claims) == placed


def test_in_flight_claim_counts_for_topology() -> None:
    """Pods on an in-flight claim in zone-a count for zone spread of new pods."""
    running = (pod("old", 0.1, 0.1, labels={"app": "web"}),)
    claim = Node(
        "claim-1",
        {ZONE: "zone-a"},
        allocatable=Resources(200, GIB, 110),
        pods=running,
        is_in_flight=True,
    )
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "web"}, topology_spread=(_spread(ZONE),))
        for i in range(2)
    ]
    result = run(pods, CATALOG, nodes=(claim,))
    assert {zone_of(result, p.key) for p in pods} == {"zone-b", "zone-c"}


def test_explain_counts_ruled_out_instance_types() -> None:
    """explain_pod says which NodePool is ruled out by a taint and how many types fit."""
    from scheduler_svc.core import SchedulingInput, explain_pod

    tainted = NodePool("gpu", taints=(Taint("gpu", TaintEffect.NO_SCHEDULE),))
    problem = SchedulingInput((pod("p", 3, 1),), (NodePool("default"), tainted), CATALOG)
    explanation = explain_pod(problem, "default/p")
    assert explanation.nodepools_ruled_out == 1
    assert any(
        "NodePool gpu: ruled out: does not tolerate taint gpu:NoSchedule" in line
        for line in explanation.lines
    )
    assert any(
        "2 of 3 instance types remain" in line and "1 by resources" in line
        for line in explanation.lines
    )


def test_zone_spread_deployment_packs_one_claim_per_zone() -> None:
    """Thirty zone-spread pods become three claims of ten (one per zone), not thirty nodes."""
    pods = [
        pod(f"p{i}", 0.25, 0.25, labels={"app": "web"}, topology_spread=(_spread(ZONE),))
        for i in range(30)
    ]
    result = run(pods, CATALOG)
    assert sorted(len(c.pods) for c in result.new_claims) == [10, 10, 10]
    assert sorted(c.offerings[0].zone for c in result.new_claims) == sorted(ZONES)


def test_zone_spread_under_cpu_limit_stays_balanced() -> None:
    """Under a cpu limit a zone-spread deployment schedules a balanced part and never exceeds it."""
    pool = NodePool("default", limits=NodePoolLimits(cpu_millis=12000))
    pods = [
        pod(f"p{i}", 0.5, 0.25, labels={"app": "web"}, topology_spread=(_spread(ZONE),))
        for i in range(60)
    ]
    result = run(pods, CATALOG, [pool])
    per_zone = dict.fromkeys(ZONES, 0)
    for claim in result.new_claims:
        per_zone[claim.offerings[0].zone] += len(claim.pods)
    assert max(per_zone.values()) - min(per_zone.values()) <= 1
    assert sum(per_zone.values()) >= 18
    capacity = {"small": 2000, "medium": 4000, "large": 8000}
    reserved = sum(max(capacity[o.instance_type] for o in c.offerings) for c in result.new_claims)
    assert reserved <= 12000
    assert result.unschedulable[0].reason == "NodePool default limit cpu=12 reached"


def test_claim_requirements_list_what_its_offerings_launch() -> None:
    """A claim's requirements name its NodePool and exactly the types, zones and capacity types
    of its offerings."""
    pool = NodePool("default", requirements=(Requirement(CT, Operator.IN, ("on-demand",)),))
    claim = run([pod("p", 3, 1, volume_zones=("zone-b",))], CATALOG, [pool]).new_claims[0]
    written = {(r.key, r.operator, r.values) for r in claim.requirements}
    assert ("daiku.dev/nodepool", Operator.IN, ("default",)) in written
    assert ("node.kubernetes.io/instance-type", Operator.IN, ("large", "medium")) in written
    assert (ZONE, Operator.IN, ("zone-b",)) in written
    assert (CT, Operator.IN, ("on-demand",)) in written


def test_a_pod_the_first_claims_type_cannot_hold_gets_its_own_type() -> None:
    """An amd64 pod after a plain pod whose claim targets an arm64 type of the same price and
    shape: the amd64 pod gets a claim of the amd64 type (a claim of equal requirements but
    another target type does not decide for it)."""
    arm = instance_type("a1", 1, 1, 0.01, pods=2, labels={"kubernetes.io/arch": "arm64"})
    amd = instance_type("b1", 1, 1, 0.01, pods=2)
    plain = pod("p0", 0.1, 0.25)
    amd64 = pod("p9", 0.1, 0.25, node_selector={"kubernetes.io/arch": "amd64"})
    result = run([plain, amd64], [arm, amd])
    assert result.unschedulable == ()
    assert result.new_claims[claim_of(result, "default/p9")].offerings[0].instance_type == "b1"


def test_an_existing_prefer_no_schedule_node_is_avoided_only_while_a_pool_taint_is() -> None:
    """Decision 0012: a node whose taint is PreferNoSchedule is avoided only while the pod still
    avoids some NodePool's PreferNoSchedule taint (Karpenter's gate for that relaxation): then a
    plain pool launches a claim for it. With no such pool the pod goes onto the node, as
    kube-scheduler would bind it there."""
    soft = Taint("spot-only", TaintEffect.PREFER_NO_SCHEDULE)
    node = Node("n1", {ZONE: "zone-a"}, (soft,), allocatable=Resources(4000, 8 * GIB, 110))
    pools = [NodePool("a-tainted", taints=(soft,)), NodePool("b-plain")]

    gated = run([pod("p", 1, 1)], CATALOG, pools, nodes=(node,))
    ungated = run([pod("p", 1, 1)], CATALOG, pools[1:], nodes=(node,))

    assert gated.existing_placements == ()
    assert [c.nodepool for c in gated.new_claims] == ["b-plain"]
    assert [p.node for p in ungated.existing_placements] == ["n1"]
    assert ungated.new_claims == ()


def test_every_host_port_of_a_pod_is_checked_on_an_existing_node() -> None:
    """The second of a pod's two host ports is bound on the existing node already: the pod goes
    to a new node, not beside the pod holding that port."""
    holder = pod("holder", 1, 1, host_ports=(HostPort(9090),))
    node = Node("n1", {ZONE: "zone-a"}, allocatable=Resources(8000, 16 * GIB, 110), pods=(holder,))
    both = pod("both", 1, 1, host_ports=(HostPort(8080), HostPort(9090)))

    result = run([both], CATALOG, nodes=(node,))

    assert result.existing_placements == ()
    assert claim_of(result, "default/both") == 0


def test_zone_spread_pods_fill_the_existing_nodes_of_each_zone_in_turn() -> None:
    """Four pods spread over zones (maxSkew 1) and one existing node per zone with room for two:
    placed one zone after the other, each node is chosen twice and no claim is launched."""
    app = {"app": "api"}
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=LabelSelector.of(app))
    nodes = tuple(
        Node(f"n-{zone}", {ZONE: zone}, allocatable=Resources(2000, 4 * GIB, 110))
        for zone in ZONES[:2]
    )
    zones_a_b = NodePool("default", requirements=(Requirement(ZONE, Operator.IN, ZONES[:2]),))
    pods = [pod(f"api-{i}", 1, 1, labels=app, topology_spread=(spread,)) for i in range(4)]

    result = run(pods, CATALOG, [zones_a_b], nodes=nodes)

    assert result.new_claims == ()
    assert sorted((p.node, len(p.pods)) for p in result.existing_placements) == [
        ("n-zone-a", 2),
        ("n-zone-b", 2),
    ]


def test_a_pod_whose_required_affinity_targets_a_later_class_joins_it_on_an_existing_node() -> None:
    """Classes are placed largest first, so the 2-cpu pod needing to share a node with the db
    pod is tried before the db pod lands on the existing node. As Karpenter's queue does, it is
    tried again once the round placed others: it joins the db pod there (room for both)."""
    host = "kubernetes.io/hostname"
    near_db = (PodAffinityTerm(host, LabelSelector.of({"app": "db"})),)
    big = pod("big", 2, 1, pod_affinity=near_db)
    db = pod("db", 0.5, 1, labels={"app": "db"})
    node = Node("n1", {host: "n1", ZONE: "zone-a"}, allocatable=Resources(4000, 16 * GIB, 110))

    result = run([big, db], CATALOG, nodes=(node,))

    assert result.unschedulable == ()
    assert [(e.node, sorted(e.pods)) for e in result.existing_placements] == [
        ("n1", ["default/big", "default/db"])
    ]
    assert result.new_claims == ()
