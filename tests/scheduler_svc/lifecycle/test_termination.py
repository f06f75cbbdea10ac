"""The termination's pure decisions: which pods a drain removes, the grace period's source,
the eviction backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler_svc.lifecycle.termination import (
    Terminator,
    clamped_grace_seconds,
    drain_deadline,
    grace_period_seconds,
    is_drained_by_termination,
    is_stuck_terminating,
    pod_delete_time,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import ClusterMirror


def pod(**fields: Any) -> dict[str, Any]:
    metadata = {"name": "p", "namespace": "default", **fields.pop("metadata", {})}
    return {"metadata": metadata, "spec": fields.pop("spec", {}), "status": fields}


@pytest.mark.parametrize(
    ("obj", "drained"),
    [
        (pod(phase="Running"), True),
        (pod(phase="Succeeded"), False),
        (pod(phase="Failed"), False),
        (
            pod(
                metadata={"ownerReferences": [{"kind": "DaemonSet", "controller": True}]},
                phase="Running",
            ),
            False,
        ),
        (pod(metadata={"annotations": {"kubernetes.io/config.mirror": "x"}}), False),
        (
            pod(spec={"tolerations": [{"key": "daiku.dev/disrupted", "operator": "Exists"}]}),
            False,
        ),
        (pod(spec={"tolerations": [{"operator": "Exists"}]}), False),
        (
            pod(
                spec={
                    "tolerations": [
                        {"key": "daiku.dev/disrupted", "operator": "Exists", "effect": "NoExecute"}
                    ]
                }
            ),
            True,
        ),
        (pod(metadata={"annotations": {"daiku.dev/do-not-disrupt": "true"}}), True),
    ],
)
def test_which_pods_the_drain_removes(obj: dict[str, Any], drained: bool) -> None:
    """DaemonSet, mirror, finished and disrupted-tolerating pods stay; others (even
    do-not-disrupt ones, which only wait) are drained."""
    assert is_drained_by_termination(obj) is drained


def test_the_grace_period_comes_from_the_claim_then_the_nodepool() -> None:
    """The claim's terminationGracePeriod wins; else its NodePool's; absent or invalid: None."""
    pool = {
        "metadata": {"name": "p"},
        "spec": {"template": {"spec": {"terminationGracePeriod": "1h"}}},
    }
    claim = {"metadata": {"name": "c"}, "spec": {"terminationGracePeriod": "90s"}}
    assert grace_period_seconds(claim, pool) == 90.0
    assert grace_period_seconds({"metadata": {"name": "c"}, "spec": {}}, pool) == 3600.0
    assert grace_period_seconds({"metadata": {"name": "c"}, "spec": {}}, None) is None
    bad = {"metadata": {"name": "c"}, "spec": {"terminationGracePeriod": "soon"}}
    assert grace_period_seconds(bad, pool) is None


def test_eviction_backoff_doubles_up_to_the_cap_with_jitter() -> None:
    """Backoff doubles per refusal from the base, stops at the cap, and jitter scales it into
    [1/2, 1] of that."""
    values = iter([1.0, 1.0, 1.0, 1.0, 0.0])
    terminator = Terminator(
        mirror=ClusterMirror(),
        writer=None,  # type: ignore[arg-type]
        actuator=None,
        metrics=SchedulerMetrics(),
        rng=lambda: next(values),
    )
    assert [terminator.eviction_backoff_seconds(n) for n in (1, 2, 3, 5)] == [1.0, 2.0, 4.0, 10.0]
    assert terminator.eviction_backoff_seconds(5) == 5.0


def test_a_pod_a_minute_past_its_deletion_timestamp_is_stuck() -> None:
    """A deleted pod still there a minute after its deletionTimestamp no longer holds a drain;
    one within the minute (or not deleted) does."""
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    deleted = pod(metadata={"deletionTimestamp": "2026-01-01T11:58:59Z"})
    recent = pod(metadata={"deletionTimestamp": "2026-01-01T11:59:30Z"})
    assert is_stuck_terminating(deleted, now)
    assert not is_stuck_terminating(recent, now)
    assert not is_stuck_terminating(pod(phase="Running"), now)


def test_a_pod_is_force_deleted_its_own_grace_period_before_the_deadline() -> None:
    """The force step deletes a pod terminationGracePeriodSeconds before the node's deadline
    (30 s when unset), and its delete gets the whole seconds left, never less than zero."""
    deadline = datetime(2026, 1, 1, 12, 10, 0, tzinfo=UTC)
    slow = pod(spec={"terminationGracePeriodSeconds": 120})
    assert pod_delete_time(slow, deadline) == deadline - timedelta(seconds=120)
    assert pod_delete_time(pod(), deadline) == deadline - timedelta(seconds=30)
    assert pod_delete_time(pod(spec={"terminationGracePeriodSeconds": 0}), deadline) == deadline
    assert clamped_grace_seconds(deadline, deadline - timedelta(seconds=90.7)) == 90
    assert clamped_grace_seconds(deadline, deadline + timedelta(seconds=5)) == 0


def test_a_stamped_termination_timestamp_bounds_the_drain_the_earlier_deadline_winning() -> None:
    """Node repair stamps `daiku.dev/nodeclaim-termination-timestamp`; with a grace period too,
    the earlier deadline counts; with neither there is none."""
    deleted = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    claim: dict[str, Any] = {
        "metadata": {"name": "c", "deletionTimestamp": "2026-01-05T09:00:00Z"},
        "spec": {},
    }
    assert drain_deadline(claim, None) is None
    stamped = {
        **claim,
        "metadata": {
            **claim["metadata"],
            "annotations": {"daiku.dev/nodeclaim-termination-timestamp": "2026-01-05T09:05:00Z"},
        },
    }
    assert drain_deadline(stamped, None) == deleted + timedelta(minutes=5)
    short = {**stamped, "spec": {"terminationGracePeriod": "1m"}}
    assert drain_deadline(short, None) == deleted + timedelta(minutes=1)
    long = {**stamped, "spec": {"terminationGracePeriod": "1h"}}
    assert drain_deadline(long, None) == deleted + timedelta(minutes=5)
