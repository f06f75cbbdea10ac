"""Headroom: a CapacityBuffer's room as virtual pods (replicas, or a percentage of what the
pool's pods request), capped by its limits, selecting its pool and tolerating its taints;
placed only after the real pods, so room never takes a real pod's place."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler_svc.core import Node, NodePool, Resources, Taint, TaintEffect
from scheduler_svc.core.headroom import (
    HEADROOM_NAMESPACE,
    CapacityBuffer,
    buffer_room,
    is_headroom,
    requested_in_pool,
    virtual_pods,
)
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import capacity_buffer_from_k8s
from scheduler_svc.kube.resources import PODS
from scheduler_svc.state.cluster import ClusterMirror
from scheduler_svc.state.nominations import Nominations

from .builders import GIB, instance_type, pod, run

ONE_CPU = Resources(cpu_millis=1000, memory_bytes=2 * GIB)


def test_replicas_is_room_for_that_many_pods() -> None:
    room = buffer_room(CapacityBuffer("b", "default", ONE_CPU, replicas=3), Resources())
    assert room.units == 3


def test_percentage_of_the_pools_requests_in_units_of_the_shape() -> None:
    """20 % of 10 cpu / 8 GiB requested is 2 cpu / 1.6 GiB: two 1-cpu units (cpu needs more)."""
    requested = Resources(cpu_millis=10_000, memory_bytes=8 * GIB)
    room = buffer_room(CapacityBuffer("b", "default", ONE_CPU, percentage=20), requested)
    assert room.units == 2
    assert buffer_room(CapacityBuffer("b", "p", ONE_CPU, percentage=0), requested).units == 0


def test_limits_cap_the_room() -> None:
    capped = CapacityBuffer("b", "default", ONE_CPU, replicas=10, limits=Resources(cpu_millis=3500))
    room = buffer_room(capped, Resources())
    assert room.units == 3
    assert "capped by limits.cpu" in room.reason


def test_requested_in_pool_counts_real_pods_of_that_pool_only() -> None:
    mine = Node("a", {"daiku.dev/nodepool": "default"}, pods=(pod("x", 2, 1),))
    other = Node("b", {"daiku.dev/nodepool": "other"}, pods=(pod("y", 4, 1),))
    assert requested_in_pool("default", [mine, other]).cpu_millis == 2000


def test_virtual_pods_select_their_pool_and_tolerate_its_taints() -> None:
    pool = NodePool("gpu", taints=(Taint("nvidia.com/gpu", TaintEffect.NO_SCHEDULE, "true"),))
    room = buffer_room(CapacityBuffer("b", "gpu", ONE_CPU, replicas=2), Resources())
    pods = virtual_pods([room], {"gpu": pool})
    assert [p.key for p in pods] == [f"{HEADROOM_NAMESPACE}/b-0", f"{HEADROOM_NAMESPACE}/b-1"]
    assert all(is_headroom(p.key) for p in pods)
    assert pods[0].node_selector == {"daiku.dev/nodepool": "gpu"}
    assert pods[0].tolerations[0].tolerates(pool.taints[0])
    assert virtual_pods([room], {}) == ()  # no such pool: no room


def test_room_is_solved_after_the_real_pods_and_on_their_claims() -> None:
    """The real pod is solved first; the room then goes on the room left beside it before any
    new claim (a 4-cpu type holds the 1-cpu real pod and two 1-cpu units)."""
    types = [instance_type("m5.xlarge", 4, 16, 0.192)]
    real = run([pod("real", 1, 1)], types)
    assert len(real.new_claims) == 1
    room = buffer_room(CapacityBuffer("b", "default", ONE_CPU, replicas=2), Resources())
    virtual = virtual_pods([room], {"default": NodePool("default")})
    claim = Node(
        "claim-1",
        {"daiku.dev/nodepool": "default", "kubernetes.io/arch": "amd64"},
        allocatable=types[0].allocatable,
        is_in_flight=True,
    )
    both = run([pod("real", 1, 1), *virtual], types, nodes=(claim,))
    assert both.new_claims == ()
    assert sorted(k for p in both.existing_placements for k in p.pods) == sorted(
        ["default/real", *(p.key for p in virtual)]
    )


def test_nodes_holding_room_stay_nominated() -> None:
    """A virtual pod never binds: a node holding room stays nominated (not Empty) while the
    provisioner keeps nominating it; a real pod stops counting once it is gone."""
    mirror = ClusterMirror((PODS,), transforms={})
    nominations = Nominations(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    nominations.nominate("node-a", [f"{HEADROOM_NAMESPACE}/b-0", "default/gone"])
    found = nominations.pending_on(["node-a"], mirror)
    assert found is not None
    assert found.pods == frozenset({f"{HEADROOM_NAMESPACE}/b-0"})


def _buffer(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "burst"},
        "spec": {"nodePoolRef": {"name": "default"}, "requests": {"cpu": "1"}, **spec},
    }


def test_the_converter_reads_a_buffer() -> None:
    buffer = capacity_buffer_from_k8s(_buffer(percentage=20, limits={"cpu": "8"}))
    assert (buffer.nodepool, buffer.percentage, buffer.replicas) == ("default", 20, None)
    assert buffer.requests.cpu_millis == 1000
    assert buffer.limits is not None
    assert buffer.limits.cpu_millis == 8000


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"replicas": -1}, "spec.replicas", "headroom cannot be negative"),
        ({"percentage": -5}, "spec.percentage", "headroom cannot be negative"),
        ({"replicas": 1, "percentage": 5}, "spec", "exactly one"),
        ({}, "spec", "exactly one"),
        ({"replicas": 1, "requests": {}}, "spec.requests", "required"),
    ],
)
def test_the_converter_refuses_bad_buffers(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidObjectError) as caught:
        capacity_buffer_from_k8s(_buffer(**spec))
    assert caught.value.field == field
    assert reason in caught.value.reason
