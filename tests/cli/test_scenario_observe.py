"""What `daiku up` reads from the cluster: settle detection, and the report's shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from daiku_cli.scenario import RunRecorder, snapshot_from_objects
from daiku_cli.scenario.progress import status_line, summary

T0 = datetime(2026, 11, 25, 22, 0, 0, tzinfo=UTC)
PRICES = {("m6g.large", "us-east-1a", "spot"): 0.04}


def pod(name: str, node: str | None = None, phase: str = "Pending", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", **extra.get("metadata", {})},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }
    if "unschedulable" in extra:
        obj["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": extra["unschedulable"],
            }
        ]
    return obj


def claim(
    name: str, *conditions: str, deleting: bool = False, node_name: str | None = "node-a"
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "creationTimestamp": "2026-11-25T22:00:00Z",
        "labels": {
            "daiku.dev/nodepool": "default",
            "node.kubernetes.io/instance-type": "m6g.large",
            "topology.kubernetes.io/zone": "us-east-1a",
            "karpenter.sh/capacity-type": "spot",
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-25T22:01:00Z"
    return {
        "metadata": metadata,
        "status": {
            "nodeName": node_name,
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": "2026-11-25T22:00:01Z"}
                for c in conditions
            ],
        },
    }


def node(name: str, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-11-25T22:00:01Z",
            "labels": {
                "daiku.dev/nodepool": "default",
                "node.kubernetes.io/instance-type": "m6g.large",
                "topology.kubernetes.io/zone": "us-east-1a",
                "karpenter.sh/capacity-type": "spot",
            },
        },
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def deployment(
    replicas: int, status_replicas: int, generation: int = 2, observed: int = 2
) -> dict[str, Any]:
    return {
        "metadata": {"name": "inflate", "namespace": "default", "generation": generation},
        "spec": {"replicas": replicas},
        "status": {"replicas": status_replicas, "observedGeneration": observed},
    }


def test_settled_when_pods_run_and_claims_are_initialized() -> None:
    """Every pod running on a node, every claim Initialized, Deployments caught up: settled."""
    snapshot = snapshot_from_objects(
        pods=[pod("a", "node-a", "Running")],
        nodes=[node("node-a")],
        claims=[claim("c1", "Launched", "Registered", "Initialized", "Ready")],
        deployments=[deployment(1, 1)],
        prices=PRICES,
    )
    assert snapshot.is_settled
    assert snapshot.unsettled_reasons() == []
    assert snapshot.hourly_cost == 0.04


def test_each_thing_in_motion_keeps_the_cluster_unsettled_and_is_named() -> None:
    """A pending pod (with kube-scheduler's message), a pod bound but not started, a lagging
    Deployment, a launching and a terminating NodeClaim each appear among the reasons."""
    snapshot = snapshot_from_objects(
        pods=[
            pod("waiting", unschedulable="0/1 nodes are available: 1 Insufficient cpu."),
            pod("starting", "node-a", "Pending"),
        ],
        nodes=[node("node-a")],
        claims=[claim("launching", "Launched"), claim("going", "Launched", deleting=True)],
        deployments=[deployment(5, 2)],
        prices=PRICES,
    )
    reasons = "; ".join(snapshot.unsettled_reasons())
    assert not snapshot.is_settled
    assert "1 pod(s) pending, e.g. default/waiting: 0/1 nodes are available" in reasons
    assert "bound but not running yet, e.g. default/starting on node-a" in reasons
    assert "Deployment(s) still creating or removing pods: default/inflate" in reasons
    assert "1 NodeClaim(s) launching: launching" in reasons
    assert "1 NodeClaim(s) terminating: going" in reasons
    # a terminating claim no longer counts towards the cost
    assert snapshot.hourly_cost == 0.04


def test_terminating_daemonset_and_finished_pods_do_not_hold_settling() -> None:
    """Pods being deleted, DaemonSet pods and finished pods are not waiting for a node."""
    snapshot = snapshot_from_objects(
        pods=[
            pod("gone", metadata={"deletionTimestamp": "2026-11-25T22:00:00Z"}),
            pod("ds", metadata={"ownerReferences": [{"kind": "DaemonSet", "name": "x"}]}),
            pod("job", phase="Succeeded"),
        ],
        nodes=[],
        claims=[],
    )
    assert snapshot.is_settled


def test_a_deployment_whose_new_generation_is_not_observed_is_lagging() -> None:
    """Right after a scale the controller has not observed the generation: not settled."""
    snapshot = snapshot_from_objects(
        pods=[], nodes=[], claims=[], deployments=[deployment(0, 0, generation=3, observed=2)]
    )
    assert snapshot.lagging_deployments == ("default/inflate",)


def test_the_report_has_the_documented_keys_and_records_deletions() -> None:
    """A claim and node seen then gone get deletedAt; lifecycle events, steps, pods and the
    cost of what runs at the end are in the report, which is JSON-serialisable."""
    recorder = RunRecorder()
    recorder.step_started(1, "scale deployment default/inflate to 1", T0)
    first = snapshot_from_objects(
        pods=[pod("a")], nodes=[], claims=[claim("c1", "Launched")], prices=PRICES
    )
    events = recorder.observe(first, T0 + timedelta(seconds=1))
    assert [(e.kind, e.object, e.reason) for e in events] == [
        ("NodeClaim", "c1", "Created"),
        ("NodeClaim", "c1", "Launched"),
    ]
    second = snapshot_from_objects(
        pods=[pod("a", "node-a", "Running")],
        nodes=[node("node-a")],
        claims=[claim("c1", "Launched", "Registered", "Initialized")],
        prices=PRICES,
    )
    recorder.observe(second, T0 + timedelta(seconds=2))
    recorder.step_finished(1, T0 + timedelta(seconds=3))
    recorder.observe_kube_events(
        [
            {
                "metadata": {"uid": "e1"},
                "involvedObject": {"kind": "NodeClaim", "name": "c1"},
                "reason": "Launched",
                "message": "launched",
                "lastTimestamp": "2026-11-25T22:00:02Z",
                "count": 1,
            }
        ]
    )
    third = snapshot_from_objects(pods=[], nodes=[], claims=[], prices=PRICES)
    recorder.observe(third, T0 + timedelta(seconds=4))

    report = json.loads(json.dumps(recorder.report()))
    assert set(report) >= {"nodes", "pods", "nodeClaims", "events", "steps", "totalHourlyCost"}
    (node_entry,) = report["nodes"]
    assert node_entry["name"] == "node-a"
    assert node_entry["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert node_entry["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert node_entry["createdAt"] == "2026-11-25T22:00:01Z"
    assert node_entry["deletedAt"] == "2026-11-25T22:00:04.000Z"
    (claim_entry,) = report["nodeClaims"]
    assert claim_entry["nodePool"] == "default"
    assert claim_entry["instanceType"] == "m6g.large"
    assert claim_entry["zone"] == "us-east-1a"
    assert claim_entry["capacityType"] == "spot"
    assert claim_entry["price"] == 0.04
    assert [c["type"] for c in claim_entry["conditions"]] == [
        "Launched",
        "Registered",
        "Initialized",
    ]
    assert claim_entry["deletedAt"] == "2026-11-25T22:00:04.000Z"
    assert report["steps"] == [
        {
            "index": 1,
            "step": "scale deployment default/inflate to 1",
            "startedAt": "2026-11-25T22:00:00.000Z",
            "finishedAt": "2026-11-25T22:00:03.000Z",
            "outcome": "done",
        }
    ]
    reasons = [(e["kind"], e["object"], e["reason"]) for e in report["events"]]
    assert ("NodeClaim", "c1", "Deleted") in reasons
    assert ("Node", "node-a", "Deleted") in reasons
    assert ("NodeClaim", "c1", "Initialized") in reasons
    assert all(set(e) >= {"time", "kind", "object", "reason"} for e in report["events"])
    assert [e["time"] for e in report["events"]] == sorted(e["time"] for e in report["events"])
    assert report["pods"] == []
    assert report["totalHourlyCost"] == 0


def test_status_line_and_summary_show_claims_by_state_nodes_and_cost() -> None:
    """The live line counts pods, claims by state, nodes and cost; the summary lists nodes."""
    snapshot = snapshot_from_objects(
        pods=[pod("a", "node-a", "Running"), pod("b")],
        nodes=[node("node-a")],
        claims=[claim("c1", "Launched", "Registered", "Initialized"), claim("c2", node_name=None)],
        prices=PRICES,
    )
    line = status_line(snapshot)
    assert line == (
        "pods 2: 1 pending, 1 running | nodeclaims 2: 1 Pending, 1 Initialized | "
        "nodes 1 (1 ready) | $0.0400/h"
    )
    text = "\n".join(summary(snapshot, 12.0, launched_claims=1))
    assert "node-a  m6g.large      us-east-1a  spot      Ready   1     0.0400" in text
    assert "Not settled: 1 pod(s) pending" in text
