"""Trimming mirrored objects keeps everything the scheduler reads."""

from __future__ import annotations

import copy
import json
from typing import Any

from scheduler_svc.kube.convert import node_from_k8s, pod_from_k8s
from scheduler_svc.kube.slim import compact, slim_node, slim_pod
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
    pod["metadata"]["generateName"] = "web-"
    pod["spec"].update(
        dnsPolicy="ClusterFirst",
        schedulerName="default-scheduler",
        securityContext={},
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        serviceAccountName="default",
        terminationGracePeriodSeconds=30,
    )
    pod["spec"]["volumes"] = [
        {"name": "token", "projected": {"sources": []}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    ]
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastProbeTime": None,
            },
            {"type": "Initialized", "status": "True"},
        ],
        "containerStatuses": [{"name": "app", "ready": False, "image": "nginx:1.27"}],
        "hostIP": "10.0.0.1",
    }
    return pod


def test_a_slim_pod_converts_and_classifies_exactly_like_the_full_pod() -> None:
    """The slimmed pod gives the same core Pod and provisionability as the full one, without
    images, env, mounts, probes, non-PVC volumes, container statuses, extra conditions,
    unread spec defaults or generateName."""
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
    assert slim["metadata"] == {k: v for k, v in full["metadata"].items() if k != "generateName"}
    assert not {"dnsPolicy", "schedulerName", "securityContext", "serviceAccountName"} & set(
        slim["spec"]
    )
    assert slim["spec"]["terminationGracePeriodSeconds"] == 30  # the drain reads it


def test_a_slim_node_drops_only_status_fields_nobody_reads() -> None:
    """A node loses status.images, nodeInfo and addresses and nothing the scheduler converts."""
    node: dict[str, Any] = {
        "metadata": {"name": "ip-1", "labels": {"a": "b"}},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {
            "allocatable": {"cpu": "2"},
            "images": [{"names": ["nginx:1.27"], "sizeBytes": 1}],
            "nodeInfo": {"kubeletVersion": "v1.31.0"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    slim = slim_node(node)
    assert set(slim["status"]) == {"allocatable", "conditions"}
    assert slim["status"]["conditions"] == node["status"]["conditions"]
    assert node_from_k8s(slim) == node_from_k8s(node)
    assert "images" in node["status"]


def test_slim_objects_decoded_apart_share_their_keys_and_short_values() -> None:
    """Two pods decoded from separate JSON texts share one copy of each key and short value
    once slimmed; long strings stay their own, and the structure is equal to the input's."""
    text = json.dumps(running_pod() | {"kind": "Pod"})
    first, second = (slim_pod(json.loads(text)) for _ in range(2))
    assert json.loads(text)["kind"] is not json.loads(text)["kind"]  # json.loads shares nothing
    assert first == second
    key_first = next(k for k in first["metadata"] if k == "namespace")
    key_second = next(k for k in second["metadata"] if k == "namespace")
    assert key_first is key_second
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
    assert first["kind"] is second["kind"]
    long = "x" * 200
    compacted = compact({"message": long, "items": [{"a": 1}], "flag": True})
    assert compacted == {"message": long, "items": [{"a": 1}], "flag": True}
    assert isinstance(compacted["items"], list)
