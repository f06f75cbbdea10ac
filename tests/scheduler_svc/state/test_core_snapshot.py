"""The mirror as core models: pending pods, nodes with pods, in-flight claims, conversion cache."""

from __future__ import annotations

from typing import Any

from scheduler_svc.kube.events import ObjectEvent, Synced
from scheduler_svc.kube.resources import (
    DAEMON_SETS,
    NAMESPACES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
)
from scheduler_svc.state.cluster import MIRRORED_RESOURCES, ClusterMirror
from scheduler_svc.state.core_snapshot import CoreSnapshotter


def pod(
    name: str,
    rv: str,
    *,
    node: str | None = None,
    phase: str = "Pending",
    cpu: str = "500m",
    volumes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    if volumes:
        spec["volumes"] = volumes
    return {
        "metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
        "spec": spec,
        "status": {"phase": phase},
    }


def node(name: str, provider_id: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {"daiku.dev/nodepool": "default"},
        },
        "spec": {"providerID": provider_id},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}},
    }


def claim(name: str, provider_id: str | None = None, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"resources": {"requests": {"cpu": "2"}}},
        "status": {"providerID": provider_id} if provider_id else {},
    }


def fill(mirror: ClusterMirror, **objects: list[dict[str, Any]]) -> None:
    by_name = {
        "pods": PODS,
        "nodes": NODES,
        "nodeclaims": NODE_CLAIMS,
        "nodepools": NODE_POOLS,
        "daemonsets": DAEMON_SETS,
        "pvcs": PERSISTENT_VOLUME_CLAIMS,
        "pvs": PERSISTENT_VOLUMES,
        "namespaces": NAMESPACES,
    }
    for resource in MIRRORED_RESOURCES:
        name = next((k for k, v in by_name.items() if v == resource), None)
        mirror.handle(Synced(resource, tuple(objects.get(name or "", [])), "1"))


def test_the_snapshot_has_pending_pods_nodes_with_their_pods_and_in_flight_claims() -> None:
    """Pending pods, nodes carrying their running pods (finished ones left out) and NodeClaims
    whose node has not registered (deleting ones left out) make up the core snapshot."""
    mirror = ClusterMirror()
    fill(
        mirror,
        pods=[
            pod("waiting", "1"),
            pod("running", "2", node="ip-1", phase="Running"),
            pod("done", "3", node="ip-1", phase="Succeeded"),
        ],
        nodes=[node("ip-1", "aws:///us-east-1a/i-1")],
        nodeclaims=[
            claim("registered", "aws:///us-east-1a/i-1"),
            claim("launching"),
            claim("going-away", deleting=True),
        ],
        nodepools=[
            {"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"weight": 5}}
        ],
        daemonsets=[
            {
                "metadata": {"name": "agent", "namespace": "kube-system", "resourceVersion": "1"},
                "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}},
            }
        ],
    )
    snapshot = CoreSnapshotter(mirror).snapshot()

    assert [p.name for p in snapshot.pending_pods] == ["waiting"]
    assert [(n.name, n.is_in_flight, [p.name for p in n.pods]) for n in snapshot.nodes] == [
        ("ip-1", False, ["running"]),
        ("launching", True, []),
    ]
    assert snapshot.nodes[1].allocatable.cpu_millis == 2000
    assert [(p.name, p.weight) for p in snapshot.nodepools] == [("default", 5)]
    assert [d.name for d in snapshot.daemonsets] == ["agent"]
    assert snapshot.invalid == ()


def test_unchanged_objects_are_not_converted_again() -> None:
    """A second snapshot converts nothing; after one pod changes, only that pod is converted."""
    mirror = ClusterMirror()
    fill(
        mirror, pods=[pod(f"p{i}", str(i)) for i in range(20)], nodes=[node("ip-1", "aws:///a/i-1")]
    )
    snapshotter = CoreSnapshotter(mirror)
    snapshotter.snapshot()
    first = snapshotter.conversions

    snapshotter.snapshot()
    assert snapshotter.conversions == first

    mirror.handle(ObjectEvent(PODS, "MODIFIED", pod("p3", "99", cpu="2")))
    snapshot = snapshotter.snapshot()
    assert snapshotter.conversions == first + 1
    assert next(p for p in snapshot.pending_pods if p.name == "p3").containers[0].cpu_millis == 2000


def test_invalid_objects_are_reported_and_the_rest_converted() -> None:
    """A pod with a bad quantity and a NodePool with a bad requirement are listed in `invalid`
    with their field; the valid objects are still in the snapshot."""
    mirror = ClusterMirror()
    bad_pool = {
        "metadata": {"name": "broken", "resourceVersion": "1"},
        "spec": {"template": {"spec": {"requirements": [{"key": "k", "operator": "Near"}]}}},
    }
    fill(
        mirror,
        pods=[pod("fine", "1"), pod("bad", "2", cpu="a lot")],
        nodepools=[bad_pool, {"metadata": {"name": "default", "resourceVersion": "1"}}],
    )
    snapshot = CoreSnapshotter(mirror).snapshot()

    assert [p.name for p in snapshot.pending_pods] == ["fine"]
    assert [p.name for p in snapshot.nodepools] == ["default"]
    assert sorted((e.kind, e.field) for e in snapshot.invalid) == [
        ("NodePool", "spec.template.spec.requirements[0].operator"),
        ("Pod", "spec.containers[0].resources.requests.cpu"),
    ]


def test_a_pod_with_a_bound_volume_gets_its_zone() -> None:
    """A pending pod whose PVC is bound to a zonal PV carries that zone in volume_zones."""
    mirror = ClusterMirror()
    zone_term = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}
    fill(
        mirror,
        pods=[
            pod("db", "1", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
        ],
        pvcs=[
            {
                "metadata": {"name": "data", "namespace": "default", "resourceVersion": "1"},
                "spec": {"volumeName": "pv-1"},
            }
        ],
        pvs=[
            {
                "metadata": {"name": "pv-1", "resourceVersion": "1"},
                "spec": {
                    "nodeAffinity": {
                        "required": {"nodeSelectorTerms": [{"matchExpressions": [zone_term]}]}
                    }
                },
            }
        ],
    )
    (db,) = CoreSnapshotter(mirror).snapshot().pending_pods
    assert db.volume_zones == ("us-east-1c",)


def test_the_pod_filter_selects_which_pending_pods_are_solved() -> None:
    """Only pending pods the filter accepts reach the snapshot."""
    mirror = ClusterMirror()
    fill(mirror, pods=[pod("a", "1"), pod("b", "2")])
    snapshot = CoreSnapshotter(mirror).snapshot(pod_filter=lambda p: p["metadata"]["name"] == "b")
    assert [p.name for p in snapshot.pending_pods] == ["b"]


def test_snapshotters_of_one_mirror_share_models_and_drop_those_of_changed_objects() -> None:
    """A second snapshotter of the same mirror converts nothing and gets the very same model
    objects; a modified or deleted pod's cached model is released from the mirror."""
    mirror = ClusterMirror()
    fill(
        mirror, pods=[pod(f"p{i}", str(i)) for i in range(5)], nodes=[node("ip-1", "aws:///a/i-1")]
    )
    provisioning, disruption = CoreSnapshotter(mirror), CoreSnapshotter(mirror)
    first = provisioning.snapshot()
    second = disruption.snapshot()
    assert disruption.conversions == 0
    assert all(a is b for a, b in zip(first.pending_pods, second.pending_pods, strict=True))
    cached = len(mirror.derived)
    assert cached == 6  # five pods, one node

    old_p1 = mirror.get(PODS, "default/p1")
    mirror.handle(ObjectEvent(PODS, "MODIFIED", pod("p1", "99")))
    mirror.handle(ObjectEvent(PODS, "DELETED", pod("p2", "100")))
    assert id(old_p1) not in mirror.derived
    assert len(mirror.derived) == cached - 2
    disruption.snapshot()
    assert disruption.conversions == 1  # only the modified p1


def test_namespaces_labels_are_in_the_snapshot_and_follow_changes() -> None:
    """The mirror watches Namespaces (issue 19: a namespaceSelector selects by their labels);
    the snapshot maps each name to its labels, a relabelled namespace shows its new labels,
    and a Namespace with malformed labels is reported, not fatal."""
    mirror = ClusterMirror()

    def namespace(name: str, rv: str, labels: object) -> dict[str, Any]:
        return {"metadata": {"name": name, "resourceVersion": rv, "labels": labels}}

    fill(
        mirror,
        namespaces=[
            namespace("warehouse", "1", {"team": "data"}),
            namespace("shop", "1", None),
            namespace("broken", "1", ["team"]),
        ],
    )
    snapshotter = CoreSnapshotter(mirror)
    first = snapshotter.snapshot()
    mirror.handle(ObjectEvent(NAMESPACES, "MODIFIED", namespace("shop", "2", {"team": "web"})))
    second = snapshotter.snapshot()

    assert first.namespaces == {"warehouse": {"team": "data"}, "shop": {}}
    assert [(e.kind, e.name, e.field) for e in first.invalid] == [
        ("Namespace", "broken", "metadata.labels")
    ]
    assert second.namespaces["shop"] == {"team": "web"}
