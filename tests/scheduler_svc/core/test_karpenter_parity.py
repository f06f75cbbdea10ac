"""Behaviours Karpenter's scheduling suite asserts that daiku once got wrong (issue 19).

Each test names the upstream test or document it follows; the solver must place (or refuse) a
pod exactly where Karpenter and kube-scheduler would.
"""

from __future__ import annotations

from scheduler_svc.core import (
    HostPort,
    InstanceType,
    LabelSelector,
    Node,
    NodePool,
    Offering,
    Operator,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    SchedulingResult,
    Taint,
    TaintEffect,
    TopologySpreadConstraint,
)

from .builders import GIB, claim_of, instance_type, pod, run, zone_of

ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"


def test_a_required_instance_label_no_type_carries_rules_every_type_out() -> None:
    """A pod selecting karpenter.k8s.aws/instance-accelerator-name gets no node from a catalog
    where no type has an accelerator (Karpenter: every type's requirement on a well-known AWS
    label it lacks is DoesNotExist — aws/karpenter-provider-aws
    pkg/providers/instancetype/types.go computeRequirements)."""
    types = [instance_type("t3.nano", 2, 0.5, 0.005), instance_type("m5.large", 2, 8, 0.096)]
    wants_inferentia = pod("inference", 0.1, 0.1, node_selector={ACCELERATOR_NAME: "inferentia"})

    result = run([wants_inferentia], types)

    assert result.new_claims == ()
    assert [u.pod for u in result.unschedulable] == ["default/inference"]


def test_an_instance_label_no_type_carries_still_admits_does_not_exist() -> None:
    """NotIn / DoesNotExist on an instance label every type lacks keeps every type (a missing
    label satisfies them, as in Kubernetes node affinity)."""
    types = [instance_type("m5.large", 2, 8, 0.096)]
    avoids_accelerators = pod(
        "plain",
        0.1,
        0.1,
        required_node_affinity=((Requirement(ACCELERATOR_NAME, Operator.DOES_NOT_EXIST),),),
    )

    result = run([avoids_accelerators], types, (NodePool("default"),))

    assert [c.instance_type for c in result.new_claims] == ["m5.large"]


def _arch_types() -> list[InstanceType]:
    return [
        instance_type("m5.large", 2, 8, 0.096, labels={"kubernetes.io/arch": "amd64"}),
        instance_type("m6g.large", 2, 8, 0.077 * 2, labels={"kubernetes.io/arch": "arm64"}),
    ]


def test_deprecated_arch_selector_selects_the_current_arch_label() -> None:
    """nodeSelector beta.kubernetes.io/arch=arm64 gets an arm64 node (kubernetes-sigs/karpenter
    pkg/scheduling/requirements_test.go "should normalize aliased labels"; NormalizedLabels in
    pkg/apis/v1/labels.go translates pod requirements)."""
    arm = pod("arm", 0.5, 1, node_selector={"beta.kubernetes.io/arch": "arm64"})

    result = run([arm], _arch_types())

    assert [c.instance_type for c in result.new_claims] == ["m6g.large"]


def test_deprecated_zone_keys_in_node_affinity_pin_the_zone() -> None:
    """failure-domain.beta.kubernetes.io/zone and topology.ebs.csi.aws.com/zone (the AWS
    provider adds the EBS CSI key to NormalizedLabels, pkg/operator/operator.go) in required node
    affinity pin the claim to that zone, as topology.kubernetes.io/zone would."""
    types = [instance_type("m5.large", 2, 8, 0.096)]
    beta = pod(
        "beta",
        0.5,
        1,
        required_node_affinity=(
            (Requirement("failure-domain.beta.kubernetes.io/zone", Operator.IN, ("zone-b",)),),
        ),
    )
    ebs = pod(
        "ebs",
        0.5,
        1,
        required_node_affinity=(
            (Requirement("topology.ebs.csi.aws.com/zone", Operator.IN, ("zone-c",)),),
        ),
    )

    result = run([beta, ebs], types)

    assert result.unschedulable == ()
    assert zone_of(result, "default/beta") == "zone-b"
    assert zone_of(result, "default/ebs") == "zone-c"


def test_an_alias_and_its_current_label_disagreeing_match_no_node() -> None:
    """A selector naming arm64 under the old key and amd64 under the new one matches no node:
    after normalisation both are requirements on kubernetes.io/arch, and they conflict."""
    torn = pod(
        "torn",
        0.5,
        1,
        node_selector={"beta.kubernetes.io/arch": "arm64", "kubernetes.io/arch": "amd64"},
    )

    result = run([torn], _arch_types())

    assert [u.pod for u in result.unschedulable] == ["default/torn"]


def test_deprecated_instance_type_key_in_a_nodepool_requirement() -> None:
    """A NodePool requiring beta.kubernetes.io/instance-type launches only that type (Karpenter
    normalises NodePool requirements through the same NewRequirement)."""
    pool = NodePool(
        "default",
        requirements=(
            Requirement("beta.kubernetes.io/instance-type", Operator.IN, ("m6g.large",)),
        ),
    )

    result = run([pod("p", 0.5, 1)], _arch_types(), (pool,))

    assert [c.instance_type for c in result.new_claims] == ["m6g.large"]


HOSTNAME = "kubernetes.io/hostname"
EVERY_NAMESPACE = LabelSelector()


def test_empty_namespace_selector_affinity_follows_a_pod_in_another_namespace() -> None:
    """Required pod affinity with namespaceSelector {} puts the pod beside its target in another
    namespace (kubernetes-sigs/karpenter scheduling/topology_test.go "should filter pod affinity
    topologies by namespace, empty namespace selector")."""
    types = [instance_type("m5.large", 2, 8, 0.096)]
    target = pod("target", 1, 1, namespace="empty-ns-selector", labels={"security": "s2"})
    follower = pod(
        "follower",
        0.5,
        0.5,
        pod_affinity=(
            PodAffinityTerm(
                HOSTNAME,
                LabelSelector.of({"security": "s2"}),
                namespace_selector=EVERY_NAMESPACE,
            ),
        ),
    )
    # Ten pods spread one per node, as in the upstream test: the pair shares a node only
    # because of the affinity.
    spread = TopologySpreadConstraint(HOSTNAME, 1, label_selector=LabelSelector.of({"app": "s"}))
    filler = [
        pod(f"spread-{i}", 0.5, 0.5, labels={"app": "s"}, topology_spread=(spread,))
        for i in range(10)
    ]

    result = run([target, follower, *filler], types)

    assert result.unschedulable == ()
    assert claim_of(result, "default/follower") == claim_of(result, "empty-ns-selector/target")


def _node_running_db_in(namespace: str) -> Node:
    db = pod("db", 0.5, 0.5, namespace=namespace, labels={"app": "db"})
    return Node(
        "node-1",
        {HOSTNAME: "node-1", "topology.kubernetes.io/zone": "zone-a"},
        allocatable=Resources(4000, 16 * GIB, 110, 20 * GIB),
        pods=(db,),
    )


def test_empty_namespace_selector_anti_affinity_avoids_a_pod_in_another_namespace() -> None:
    """Required anti-affinity with namespaceSelector {} keeps the pod off a node running a
    matching pod in any namespace (Kubernetes: "an empty namespaceSelector ({}) matches all
    namespaces", concepts/scheduling-eviction/assign-pod-node, Namespace selector); kube-scheduler
    would refuse the existing node, so the plan needs a new one."""
    avoider = pod(
        "avoider",
        0.5,
        0.5,
        pod_anti_affinity=(
            PodAffinityTerm(
                HOSTNAME, LabelSelector.of({"app": "db"}), namespace_selector=EVERY_NAMESPACE
            ),
        ),
    )

    result = run(
        [avoider], [instance_type("m5.large", 2, 8, 0.096)], nodes=(_node_running_db_in("data"),)
    )

    assert result.existing_placements == ()
    assert [c.pods for c in result.new_claims] == [("default/avoider",)]


def test_namespace_selector_by_metadata_name_counts_that_namespace_only() -> None:
    """A namespaceSelector on kubernetes.io/metadata.name (set on every namespace) selects that
    namespace: anti-affinity to pods in "data" avoids node-1, to pods in "cache" does not."""

    def avoider(name: str, namespace: str) -> Pod:
        selector = LabelSelector.of({"kubernetes.io/metadata.name": namespace})
        return pod(
            name,
            0.5,
            0.5,
            pod_anti_affinity=(
                PodAffinityTerm(
                    HOSTNAME, LabelSelector.of({"app": "db"}), namespace_selector=selector
                ),
            ),
        )

    result = run(
        [avoider("avoids-data", "data"), avoider("avoids-cache", "cache")],
        [instance_type("m5.large", 2, 8, 0.096)],
        nodes=(_node_running_db_in("data"),),
    )

    assert [p.pods for p in result.existing_placements] == [("default/avoids-cache",)]
    assert [c.pods for c in result.new_claims] == [("default/avoids-data",)]


def _device_type(name: str, price: float, device: str) -> InstanceType:
    resources = Resources(8000, 32 * GIB, 110, 20 * GIB, ((device, 25),))
    return InstanceType(
        name,
        resources,
        resources,
        {"kubernetes.io/arch": "amd64"},
        (Offering("zone-a", "on-demand", price),),
    )


def _device_pod(name: str, device: str | None) -> Pod:
    extended = ((device, 1),) if device else ()
    return Pod(name, containers=(Resources(500, GIB, 0, 0, extended),))


def test_pods_needing_resources_no_single_type_has_get_different_nodes() -> None:
    """Two pods each needing a device only one type has get one node each (kubernetes-sigs/
    karpenter scheduling/suite_test.go "should launch pods with resources that aren't on any
    single instance type on different instances"); before, both were unschedulable."""
    types = [
        _device_type("gpu-one", 1.0, "karpenter.sh/super-great-gpu"),
        _device_type("gpu-two", 0.8, "karpenter.sh/even-better-gpu"),
        instance_type("plain", 2, 8, 0.1),
    ]
    pods = [
        _device_pod("one", "karpenter.sh/super-great-gpu"),
        _device_pod("two", "karpenter.sh/even-better-gpu"),
    ]

    result = run(pods, types)

    assert result.unschedulable == ()
    assert sorted((c.instance_type, c.pods) for c in result.new_claims) == [
        ("gpu-one", ("default/one",)),
        ("gpu-two", ("default/two",)),
    ]


def test_a_plain_pod_beside_two_device_pods_does_not_crash_the_solver() -> None:
    """Adding a plain pod to the two device pods gives a plan, not `ValueError: negative shift
    count` (no type could hold the whole batch's demand, so no claim had a target type)."""
    types = [
        _device_type("gpu-one", 1.0, "karpenter.sh/super-great-gpu"),
        _device_type("gpu-two", 0.8, "karpenter.sh/even-better-gpu"),
        instance_type("plain", 2, 8, 0.1),
    ]
    pods = [
        _device_pod("one", "karpenter.sh/super-great-gpu"),
        _device_pod("two", "karpenter.sh/even-better-gpu"),
        _device_pod("plain", None),
    ]

    result = run(pods, types)

    assert result.unschedulable == ()
    assert claim_of(result, "default/one") != claim_of(result, "default/two")


def _daemon(name: str, port: int, **kwargs: object) -> Pod:
    return Pod(
        name,
        containers=(Resources(100, 128 * 1024**2),),
        host_ports=(HostPort(port),),
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_daemonset_host_port_blocks_new_nodes_for_a_pod_binding_it() -> None:
    """A pod binding hostPort 8080 gets no new node when a DaemonSet on every new node binds
    8080 too (kubernetes-sigs/karpenter provisioning/suite_test.go "should account for daemonset
    hostports": no node launched); the reason names the DaemonSet."""
    web = pod("web", 1, 1, host_ports=(HostPort(8080),))

    result = run(
        [web], [instance_type("m5.large", 2, 8, 0.096)], daemonsets=(_daemon("exporter", 8080),)
    )

    assert result.new_claims == ()
    (refused,) = result.unschedulable
    assert "hostPort 8080/TCP taken by DaemonSet exporter" in refused.reason


def test_a_daemonset_that_skips_the_node_leaves_its_host_port_free() -> None:
    """A DaemonSet selecting large nodes does not bind 8080 on the small node a pod requiring
    small gets (Karpenter "should not account for daemonset hostports when daemonset would not
    schedule on selected node"); its port blocks only claims it can land on."""
    size = "karpenter.k8s.aws/instance-size"
    types = [
        instance_type("m5.large", 2, 8, 0.096, labels={size: "large"}),
        instance_type("m5.small", 2, 8, 0.05, labels={size: "small"}),
    ]
    only_large = _daemon(
        "exporter",
        8080,
        required_node_affinity=((Requirement(size, Operator.IN, ("large",)),),),
    )
    small = pod("small", 0.5, 0.5, host_ports=(HostPort(8080),), node_selector={size: "small"})
    large = pod("large", 0.5, 0.5, host_ports=(HostPort(8080),), node_selector={size: "large"})

    result = run([small, large], types, daemonsets=(only_large,))

    assert [c.pods for c in result.new_claims] == [("default/small",)]
    assert [u.pod for u in result.unschedulable] == ["default/large"]


def test_a_prefer_no_schedule_nodepool_is_avoided_while_another_can_launch() -> None:
    """With equal weights, a NodePool whose taint is PreferNoSchedule loses to an untainted one
    even when its name sorts first (kubernetes-sigs/karpenter scheduling/preferences.go: the
    toleration for PreferNoSchedule taints is added only at the last relaxation)."""
    tainted = NodePool("a-tainted", taints=(Taint("spot-only", TaintEffect.PREFER_NO_SCHEDULE),))
    plain = NodePool("b-plain")

    result = run([pod("p", 1, 1)], [instance_type("m5.large", 2, 8, 0.096)], (tainted, plain))

    assert [c.nodepool for c in result.new_claims] == ["b-plain"]


def test_a_prefer_no_schedule_nodepool_is_used_once_nothing_else_can() -> None:
    """The tainted pool still launches when the untainted one cannot hold the pod: the
    preference is relaxed last, not turned into a requirement."""
    tainted = NodePool("a-tainted", taints=(Taint("big", TaintEffect.PREFER_NO_SCHEDULE),))
    small_only = NodePool(
        "b-small",
        requirements=(Requirement("node.kubernetes.io/instance-type", Operator.IN, ("m5.large",)),),
    )
    types = [instance_type("m5.large", 2, 8, 0.096), instance_type("m5.4xlarge", 16, 64, 0.768)]

    result = run([pod("big", 8, 8)], types, (tainted, small_only))

    assert [(c.nodepool, c.instance_type) for c in result.new_claims] == [
        ("a-tainted", "m5.4xlarge")
    ]


def test_the_heaviest_preferred_node_term_is_tried_alone_first() -> None:
    """Preferred node affinity: the heaviest term applies first; when it cannot be met it is
    dropped and the next heaviest applies, so an impossible heavy preference does not discard a
    satisfiable lighter one (kubernetes-sigs/karpenter pkg/scheduling/requirements.go "select
    heaviest preference and treat as a requirement"; preferences.go removes terms heaviest
    first)."""
    impossible = PreferredNodeAffinityTerm(
        100, (Requirement("topology.kubernetes.io/zone", Operator.IN, ("mars-1",)),)
    )
    zone_b = PreferredNodeAffinityTerm(
        10, (Requirement("topology.kubernetes.io/zone", Operator.IN, ("zone-b",)),)
    )
    zone_c = PreferredNodeAffinityTerm(
        50, (Requirement("topology.kubernetes.io/zone", Operator.IN, ("zone-c",)),)
    )
    picky = pod("picky", 1, 1, preferred_node_affinity=(impossible, zone_b, zone_c))

    result = run([picky], [instance_type("m5.large", 2, 8, 0.096)])

    assert zone_of(result, "default/picky") == "zone-c"


def _spread_over_a_tainted_pool(taints_honor: bool) -> SchedulingResult:
    spread = TopologySpreadConstraint(
        "fake-label",
        1,
        label_selector=LabelSelector.of({"app": "spread"}),
        node_taints_policy_honor=taints_honor,
    )
    foo = NodePool("default", requirements=(Requirement("fake-label", Operator.IN, ("foo",)),))
    bar = NodePool(
        "tainted",
        requirements=(Requirement("fake-label", Operator.IN, ("bar",)),),
        taints=(Taint("taint-key", TaintEffect.NO_SCHEDULE, "taint-value"),),
    )
    pods = [
        pod(f"p{i}", 0.5, 0.5, labels={"app": "spread"}, topology_spread=(spread,))
        for i in range(2)
    ]
    return run(pods, [instance_type("m5.large", 2, 8, 0.096)], (foo, bar))


def test_node_taints_policy_ignore_counts_a_tainted_pools_domain() -> None:
    """nodeTaintsPolicy Ignore (the default): the domain only a tainted NodePool offers still
    counts with 0 pods, so one pod lands in "foo" and the second stays Pending (kubernetes-sigs/
    karpenter scheduling/topology_test.go "should balance pods across a label when discovered
    from the nodepool (NodeTaintsPolicy=ignore)")."""
    result = _spread_over_a_tainted_pool(taints_honor=False)

    assert sum(len(c.pods) for c in result.new_claims) == 1
    assert len(result.unschedulable) == 1
    assert "topology spread" in result.unschedulable[0].reason


def test_node_taints_policy_honor_leaves_the_tainted_pools_domain_out() -> None:
    """nodeTaintsPolicy Honor: the tainted pool's domain does not count, both pods land in "foo"
    (the upstream test's NodeTaintsPolicy=honor twin)."""
    result = _spread_over_a_tainted_pool(taints_honor=True)

    assert result.unschedulable == ()
    assert sum(len(c.pods) for c in result.new_claims) == 2
