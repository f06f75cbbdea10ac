"""Trimming mirrored objects keeps everything the scheduler reads."""

from __future__ import annotations

import copy
from typing import Any

from scheduler_svc.kube.convert import node_from_k8s, pod_from_k8s
from scheduler_svc.kube.slim import slim_node, slim_pod
from scheduler_svc.state.cluster import is_provisionable_pod
from tests.scheduler_svc.kube.test_convert import POD


def running_pod() -> dict[str, Any]:
    pod: dict[str, Any] = copy.deepcopy(POD)
    pod["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "web-1", "controller": True}
    ]
    pod["spec"]["containers"][0].update(
        image="nginx:1.27",
        command=["nginx"],
        env=[{"name": "A", "value": "b"}],
        volumeMounts=[{"name": "token", "mountPath": "/var/run/secrets"}],
        readinessProbe={"httpGet": {"path": "/", "port": 80}},
    )
    pod["spec"]["volumes"] = [
        {"name": "token", "projected": {"sources": []}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    ]
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            {"type": "Initialized", "status": "True"},
        ],
        "containerStatuses": [{"name": "app", "ready": False, "image": "nginx:1.27"}],
        "hostIP": "10.0.0.1",
    }
    return pod


def test_a_slim_pod_converts_and_classifies_exactly_like_the_full_pod() -> None:
    """The slimmed pod gives the same core Pod and provisionability as the full one, without
    images, env, mounts, probes, non-PVC volumes, container statuses or extra conditions."""
    full = running_pod()
    before = copy.deepcopy(full)
    slim = slim_pod(full)

    assert pod_from_k8s(slim) == pod_from_k8s(full)
    assert is_provisionable_pod(slim) is is_provisionable_pod(full) is True
    assert full == before  # the input is not modified
    container = slim["spec"]["containers"][0]
    assert set(container) <= {"name", "resources", "ports", "restartPolicy"}
    assert [v["name"] for v in slim["spec"]["volumes"]] == ["data"]
    assert slim["status"] == {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    assert slim["metadata"] == full["metadata"]


def test_a_slim_node_drops_only_its_image_list() -> None:
    """A node loses status.images and nothing the scheduler converts."""
    node: dict[str, Any] = {
        "metadata": {"name": "ip-1", "labels": {"a": "b"}},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {
            "allocatable": {"cpu": "2"},
            "images": [{"names": ["nginx:1.27"], "sizeBytes": 1}],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    slim = slim_node(node)
    assert "images" not in slim["status"]
    assert slim["status"]["conditions"] == node["status"]["conditions"]
    assert node_from_k8s(slim) == node_from_k8s(node)
    assert "images" in node["status"]
