"""The converter's disruption half: a pod's do-not-disrupt hold (``true`` or a Go duration from
its start time, Karpenter v1.12), its deletion cost and priority; a NodeClaim's facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_svc.core.model import Pod
from scheduler_svc.kube.convert_disruption import (
    candidate_pod_from_k8s,
    claim_facts_from_k8s,
    do_not_disrupt_hold,
)

STARTED = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def pod_obj(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "annotations": annotations,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Running", "startTime": "2026-11-26T09:00:00Z"},
    }


@pytest.mark.parametrize(
    ("value", "held", "until"),
    [
        ("true", True, None),
        ("4h", True, STARTED + timedelta(hours=4)),
        ("1h30m", True, STARTED + timedelta(minutes=90)),
        ("90s", True, STARTED + timedelta(seconds=90)),
        ("false", False, None),
        ("0s", False, None),  # not positive: not a hold (Karpenter)
        ("-5m", False, None),
        ("forever", False, None),  # not a duration: not a hold (Karpenter emits an Event)
    ],
)
def test_do_not_disrupt_true_or_a_duration(value: str, held: bool, until: datetime | None) -> None:
    for key in ("karpenter.sh/do-not-disrupt", "daiku.dev/do-not-disrupt"):
        converted = candidate_pod_from_k8s(pod_obj({key: value}), Pod("p"))
        assert (converted.do_not_disrupt, converted.do_not_disrupt_until) == (held, until)


def test_a_timed_hold_holds_until_its_end_and_not_at_it() -> None:
    converted = candidate_pod_from_k8s(pod_obj({"karpenter.sh/do-not-disrupt": "4h"}), Pod("p"))
    end = STARTED + timedelta(hours=4)
    assert converted.holds(end - timedelta(microseconds=1))
    assert not converted.holds(end)


def test_a_timed_hold_without_a_start_time_holds() -> None:
    obj = pod_obj({"karpenter.sh/do-not-disrupt": "4h"})
    del obj["status"]["startTime"]
    converted = candidate_pod_from_k8s(obj, Pod("p"))
    assert converted.do_not_disrupt
    assert converted.do_not_disrupt_until is None


def test_deletion_cost_priority_and_owner() -> None:
    obj = pod_obj({"controller.kubernetes.io/pod-deletion-cost": "-250"}, priority=1000)
    converted = candidate_pod_from_k8s(obj, Pod("p"))
    assert (converted.deletion_cost, converted.priority) == (-250, 1000)
    assert converted.owner_kind == "ReplicaSet"
    bad = candidate_pod_from_k8s(
        pod_obj({"controller.kubernetes.io/pod-deletion-cost": "lots"}, priority="high"), Pod("p")
    )
    assert (bad.deletion_cost, bad.priority) == (0, 0)


def test_claim_facts_of_a_bare_object_are_unknown_not_errors() -> None:
    facts = claim_facts_from_k8s({"metadata": {"name": "c"}, "status": "junk"})
    assert facts.name == "c"
    assert facts.nodepool == ""
    assert facts.image_id is None
    assert facts.security_group_ids is None
    assert not facts.is_initialized
    assert not facts.is_deleting


@pytest.mark.parametrize(
    ("annotations", "held"),
    [
        ({"karpenter.sh/do-not-disrupt": "true"}, True),
        ({"daiku.dev/do-not-disrupt": "true"}, True),
        ({"karpenter.sh/do-not-disrupt": "false", "daiku.dev/do-not-disrupt": "true"}, True),
        ({"karpenter.sh/do-not-disrupt": "True"}, False),
        ({"karpenter.sh/do-not-disrupt": "false"}, False),
        ({"other": "true"}, False),
        ({}, False),
    ],
)
def test_either_do_not_disrupt_annotation_holds_a_pod_for_good(
    annotations: dict[str, str], held: bool
) -> None:
    """Either spelling with exactly ``true`` holds the pod with no end; anything else does not
    (Karpenter compares the value to "true")."""
    hold = do_not_disrupt_hold({"metadata": {"annotations": annotations}})
    assert hold == ((True, None) if held else (False, None))
