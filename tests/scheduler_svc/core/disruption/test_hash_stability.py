"""The NodePool hash stamped on every NodeClaim must not change between daiku versions for an
unchanged NodePool: a different hash of the same spec drifts, and replaces, every node after an
upgrade. So its exact input is pinned here: sha256 of one canonical JSON document."""

from __future__ import annotations

import hashlib
from typing import Any

from scheduler_svc.core.disruption import nodepool_hash

TAINT_A = {"key": "a", "effect": "NoSchedule"}
TAINT_B = {"key": "b", "effect": "NoSchedule"}
TAINT_C = {"key": "c", "effect": "NoExecute"}


def spec(**template_spec: Any) -> dict[str, Any]:
    return {
        "weight": 10,
        "template": {
            "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {"requirements": [], "expireAfter": "720h", **template_spec},
        },
    }


def sha256(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


def test_the_hash_is_sha256_of_the_launch_fields_in_canonical_json() -> None:
    """Labels, annotations, taints and startupTaints (each list sorted by its items' canonical
    JSON), kubelet and nodeClassRef, keys sorted, no whitespace; weight, requirements and
    expireAfter are not part of it."""
    full = spec(
        taints=[TAINT_B, TAINT_A],
        startupTaints=[TAINT_C, TAINT_A],
        kubelet={"maxPods": 50},
        nodeClassRef={"name": "default"},
    )
    document = (
        '{"annotations":{"note":"x"},"kubelet":{"maxPods":50},"labels":{"team":"a"},'
        '"nodeClassRef":{"name":"default"},'
        '"startupTaints":[{"effect":"NoExecute","key":"c"},{"effect":"NoSchedule","key":"a"}],'
        '"taints":[{"effect":"NoSchedule","key":"a"},{"effect":"NoSchedule","key":"b"}]}'
    )
    assert nodepool_hash(full) == sha256(document)


def test_empty_launch_fields_are_left_out_of_the_document() -> None:
    assert nodepool_hash(spec(taints=[], kubelet={})) == sha256(
        '{"annotations":{"note":"x"},"labels":{"team":"a"}}'
    )
    assert nodepool_hash({}) == sha256('{"annotations":{},"labels":{}}')


def test_startup_taints_in_another_order_are_the_same_nodepool() -> None:
    assert nodepool_hash(spec(startupTaints=[TAINT_A, TAINT_C])) == nodepool_hash(
        spec(startupTaints=[TAINT_C, TAINT_A])
    )


def test_a_kubelet_change_is_a_new_hash() -> None:
    assert nodepool_hash(spec(kubelet={"maxPods": 50})) != nodepool_hash(
        spec(kubelet={"maxPods": 60})
    )


def test_non_ascii_labels_are_hashed_as_json_escapes() -> None:
    """The canonical document is ASCII: a label value with an accent is written as its JSON
    escape, so the hash does not depend on how a daiku build encodes text."""
    spec = {"template": {"metadata": {"labels": {"team": "caf\u00e9"}}}}
    assert nodepool_hash(spec) == sha256('{"annotations":{},"labels":{"team":"caf\\u00e9"}}')
