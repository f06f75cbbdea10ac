"""Pod (anti-)affinity's namespaceSelector selects namespaces by their labels (issue 19).

Kubernetes: ``namespaceSelector`` is "a label query over the set of namespaces that the term
applies to" (concepts/scheduling-eviction/assign-pod-node, Namespace selector); Karpenter lists
the Namespaces matching it (kubernetes-sigs/karpenter
pkg/controllers/provisioning/scheduling/topology.go ``buildNamespaceList``). The solver gets
the cluster's namespace labels in ``SchedulingInput.namespaces``.
"""

from __future__ import annotations

from scheduler_svc.core import (
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    Resources,
)

from .builders import GIB, instance_type, pod, run

HOSTNAME = "kubernetes.io/hostname"
TEAM_DATA = LabelSelector.of({"team": "data"})
NAMESPACES = {"warehouse": {"team": "data"}, "default": {"team": "web"}}


def _node_running_db_in(namespace: str) -> Node:
    db = pod("db", 0.5, 0.5, namespace=namespace, labels={"app": "db"})
    return Node(
        "node-1",
        {HOSTNAME: "node-1", "topology.kubernetes.io/zone": "zone-a"},
        allocatable=Resources(4000, 16 * GIB, 110, 20 * GIB),
        pods=(db,),
    )


def _avoider() -> Pod:
    term = PodAffinityTerm(HOSTNAME, LabelSelector.of({"app": "db"}), namespace_selector=TEAM_DATA)
    return pod("avoider", 0.5, 0.5, pod_anti_affinity=(term,))


def test_anti_affinity_avoids_a_pod_in_a_namespace_selected_by_its_labels() -> None:
    """namespaceSelector team=data selects namespace "warehouse" (labelled team=data): the
    avoider keeps off node-1, which runs the db pod there, and gets a new node."""
    result = run(
        [_avoider()],
        [instance_type("m5.large", 2, 8, 0.096)],
        nodes=(_node_running_db_in("warehouse"),),
        namespaces=NAMESPACES,
    )

    assert result.existing_placements == ()
    assert [c.pods for c in result.new_claims] == [("default/avoider",)]


def test_anti_affinity_ignores_a_pod_in_a_namespace_the_selector_does_not_select() -> None:
    """The same db pod in namespace "shop" (no team label): not selected, node-1 is fine."""
    result = run(
        [_avoider()],
        [instance_type("m5.large", 2, 8, 0.096)],
        nodes=(_node_running_db_in("shop"),),
        namespaces={**NAMESPACES, "shop": {}},
    )

    assert [p.pods for p in result.existing_placements] == [("default/avoider",)]


def test_affinity_follows_a_pod_into_a_namespace_selected_by_its_labels() -> None:
    """Required pod affinity with namespaceSelector team=data: the follower goes to node-1 beside
    the db pod in "warehouse", and cannot be placed when no selected namespace runs one."""
    term = PodAffinityTerm(HOSTNAME, LabelSelector.of({"app": "db"}), namespace_selector=TEAM_DATA)
    follower = pod("follower", 0.5, 0.5, pod_affinity=(term,))

    beside = run(
        [follower],
        [instance_type("m5.large", 2, 8, 0.096)],
        nodes=(_node_running_db_in("warehouse"),),
        namespaces=NAMESPACES,
    )
    elsewhere = run(
        [follower],
        [instance_type("m5.large", 2, 8, 0.096)],
        nodes=(_node_running_db_in("shop"),),
        namespaces={**NAMESPACES, "shop": {}},
    )

    assert [p.pods for p in beside.existing_placements] == [("default/follower",)]
    assert [u.pod for u in elsewhere.unschedulable] == ["default/follower"]
