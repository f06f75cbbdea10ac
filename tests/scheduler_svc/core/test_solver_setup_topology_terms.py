"""Topology terms as the solver's set-up records them. A required pod anti-affinity term
(topology key, selector, namespaces) gets one record of where its owners run, distinct from
other terms' and shared by whoever owns it (running pods, pending pods, a pending class relaxed
later), its namespaceSelector read against the cluster's namespace labels; a spread's count of
matching pods per domain is likewise one, so a class relaxed later counts the pods already
running."""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    Node,
    Operator,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    Requirement,
    Resources,
    TopologySpreadConstraint,
)
from tests.scheduler_svc.core.builders import GIB, instance_type, pod, run, zone_of

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CATALOG = (instance_type("small", 2, 4, 0.10), instance_type("large", 8, 32, 0.50))
# A preference no node meets: the pod is placed only in the round that relaxes it.
UNMEETABLE = (PreferredNodeAffinityTerm(10, (Requirement(ZONE, Operator.IN, ("mars-1",)),)),)


def _repelling(selector: dict[str, str], key: str = HOST) -> tuple[PodAffinityTerm, ...]:
    return (PodAffinityTerm(key, LabelSelector.of(selector)),)


def test_a_running_pods_term_is_kept_apart_from_a_pending_pods_other_term() -> None:
    """A pending pod repels app=none; a running pod on n1 repels app=web. The app=web pod keeps
    off n1 (a new claim) while the other pending pod, repelling nothing that runs, uses n1."""
    guard = pod("guard", 0.1, 0.1, pod_anti_affinity=_repelling({"app": "web"}))
    n1 = Node("n1", {}, allocatable=Resources(8000, 16 * GIB, 110), pods=(guard,))
    loner = pod("loner", 0.5, 0.5, pod_anti_affinity=_repelling({"app": "none"}))
    web = pod("web", 0.5, 0.5, labels={"app": "web"})

    result = run([loner, web], CATALOG, nodes=(n1,))

    assert [(e.node, e.pods) for e in result.existing_placements] == [("n1", ("default/loner",))]
    assert [c.pods for c in result.new_claims] == [("default/web",)]


def test_a_running_pods_term_counts_pods_in_namespaces_its_selector_picks_by_label() -> None:
    """The running pod repels app=web in namespaces labelled team=data: the app=web pod of
    namespace "warehouse" (labelled team=data) keeps off its node and gets a new claim."""
    term = PodAffinityTerm(
        HOST,
        LabelSelector.of({"app": "web"}),
        namespace_selector=LabelSelector.of({"team": "data"}),
    )
    guard = pod("guard", 0.1, 0.1, pod_anti_affinity=(term,))
    n1 = Node("n1", {}, allocatable=Resources(8000, 16 * GIB, 110), pods=(guard,))
    web = pod("web", 0.5, 0.5, namespace="warehouse", labels={"app": "web"})

    result = run([web], CATALOG, nodes=(n1,), namespaces={"warehouse": {"team": "data"}})

    assert result.existing_placements == ()
    assert [c.pods for c in result.new_claims] == [("warehouse/web",)]


def test_a_relaxed_owner_of_a_term_still_repels_a_relaxed_pod_it_selects() -> None:
    """Both pods wait for their preference to be relaxed. The owner (zone anti-affinity to
    app=client) lands on n1 in zone-a; the client, too big for n1, must then keep out of
    zone-a: not on n2 beside it there, but on a new claim in another zone."""
    zone_a = {ZONE: "zone-a"}
    n1 = Node("n1", {**zone_a, HOST: "n1"}, allocatable=Resources(1000, 2 * GIB, 110))
    n2 = Node("n2", {**zone_a, HOST: "n2"}, allocatable=Resources(8000, 16 * GIB, 110))
    owner = pod(
        "owner",
        0.5,
        0.5,
        pod_anti_affinity=_repelling({"app": "client"}, ZONE),
        preferred_node_affinity=UNMEETABLE,
    )
    client = pod("client", 2, 1, labels={"app": "client"}, preferred_node_affinity=UNMEETABLE)

    result = run([owner, client], CATALOG, nodes=(n1, n2))

    assert [(e.node, e.pods) for e in result.existing_placements] == [("n1", ("default/owner",))]
    assert zone_of(result, "default/client") != "zone-a"


def test_a_relaxed_spread_class_counts_the_matching_pods_already_running() -> None:
    """Two app=web pods run in zone-a; two more spread over zones (maxSkew 1) wait for their
    preference to be relaxed. Relaxed, they still count the running two: zone-a's roomy node
    is out of reach and they go to zones b and c."""
    app = {"app": "web"}
    spread = TopologySpreadConstraint(ZONE, 1, label_selector=LabelSelector.of(app))
    running = tuple(pod(f"old-{i}", 0.5, 0.5, labels=app) for i in range(2))
    n_a = Node("n-a", {ZONE: "zone-a"}, allocatable=Resources(8000, 16 * GIB, 110), pods=running)
    pods = [
        pod(
            f"web-{i}",
            0.5,
            0.5,
            labels=app,
            topology_spread=(spread,),
            preferred_node_affinity=UNMEETABLE,
        )
        for i in range(2)
    ]

    result = run(pods, CATALOG, nodes=(n_a,))

    assert result.existing_placements == ()
    assert sorted(zone_of(result, p.key) for p in pods) == ["zone-b", "zone-c"]
