"""The default scheduler: binds pods where kube-scheduler's filters allow, explains otherwise."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcloud.kube.controllers.scheduler import DefaultScheduler
from localcloud.kube.errors import Invalid
from localcloud.kube.store import Store
from tests.localcloud.controllers.conftest import (
    node,
    node_of,
    pod,
    unschedulable_message,
)
from tests.polling import until


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    store = Store()
    scheduler = DefaultScheduler(store, retry_debounce_seconds=0.01)
    task = asyncio.create_task(scheduler.run())
    yield store
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_binds_a_pod_to_a_node_with_room(store: Store) -> None:
    """A pending pod is bound to the only Ready node, with PodScheduled=True."""
    await store.create("nodes", node("n1"))
    await store.create("pods", pod("web"), "default")
    assert await until(lambda: node_of(store, "web")) == "n1"
    scheduled = await store.get("pods", "web", "default")
    conditions = {c["type"]: c["status"] for c in scheduled["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True"


async def test_no_nodes_explained(store: Store) -> None:
    """With no node at all the pod is Unschedulable with kube-scheduler's no-nodes message."""
    await store.create("pods", pod("web"), "default")
    message = await until(lambda: unschedulable_message(store, "web"))
    assert message == "no nodes available to schedule pods"


async def test_insufficient_cpu_counted_per_node(store: Store) -> None:
    """A pod bigger than every node says how many nodes lack cpu, as kube-scheduler does."""
    for name in ("n1", "n2", "n3"):
        await store.create("nodes", node(name, cpu="2"))
    await store.create("pods", pod("big", cpu="3"), "default")
    message = await until(lambda: unschedulable_message(store, "big"))
    assert message == "0/3 nodes are available: 3 Insufficient cpu."


async def test_reasons_histogram_sorted(store: Store) -> None:
    """Different nodes fail for different reasons; the message counts each, sorted."""
    await store.create("nodes", node("small", cpu="1", memory="1Gi"))
    await store.create(
        "nodes", node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    )
    await store.create("nodes", node("cordoned", unschedulable=True))
    await store.create("nodes", node("booting", ready=False))
    await store.create("pods", pod("web", cpu="2", memory="2Gi"), "default")
    message = await until(lambda: unschedulable_message(store, "web"))
    assert message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) were unschedulable."
    )


async def test_toleration_lets_a_pod_onto_a_tainted_node(store: Store) -> None:
    """A pod tolerating a NoSchedule taint is bound to the tainted node."""
    await store.create(
        "nodes", node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    )
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]
    await store.create("pods", pod("trainer", tolerations=tolerations), "default")
    assert await until(lambda: node_of(store, "trainer")) == "gpu"


async def test_node_selector_and_required_affinity(store: Store) -> None:
    """nodeSelector and required node affinity pick the matching node; no match is explained."""
    await store.create("nodes", node("a", labels={"disk": "ssd"}))
    await store.create("nodes", node("b", labels={"disk": "hdd", "size": "8"}))
    await store.create("pods", pod("fast", nodeSelector={"disk": "ssd"}), "default")
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["4"]}]}
                ]
            }
        }
    }
    await store.create("pods", pod("large", affinity=affinity), "default")
    await store.create("pods", pod("nowhere", nodeSelector={"disk": "nvme"}), "default")
    assert await until(lambda: node_of(store, "fast")) == "a"
    assert await until(lambda: node_of(store, "large")) == "b"
    message = await until(lambda: unschedulable_message(store, "nowhere"))
    assert (
        message == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )


async def test_pods_and_requests_fill_nodes_then_wait(store: Store) -> None:
    """Pods fill nodes by their requests; the rest wait, and bind once a node is added."""
    await store.create("nodes", node("n1", cpu="1"))
    for index in range(4):
        await store.create("pods", pod(f"p{index}", cpu="400m"), "default")

    async def bound() -> int:
        pods = await store.list("pods", "default")
        return sum(1 for p in pods.items if p["spec"].get("nodeName"))

    await until(lambda: unschedulable_message(store, "p3"))
    assert await bound() == 2
    await store.create("nodes", node("n2", cpu="1"))
    await until(lambda: _equals(bound, 4))


async def _equals(read: Any, expected: int) -> bool:
    return bool(await read() == expected)


async def test_deleting_a_pod_frees_room_for_a_waiting_one(store: Store) -> None:
    """When a bound pod goes away, an unschedulable pod that now fits is bound."""
    await store.create("nodes", node("n1", cpu="1"))
    await store.create("pods", pod("first", cpu="800m"), "default")
    assert await until(lambda: node_of(store, "first")) == "n1"
    await store.create("pods", pod("second", cpu="800m"), "default")
    await until(lambda: unschedulable_message(store, "second"))
    await store.update(
        "pods",
        {**(await store.get("pods", "first", "default")), "status": {"phase": "Succeeded"}},
        "default",
        subresource="status",
    )
    assert await until(lambda: node_of(store, "second")) == "n1"


async def test_pods_spread_over_least_allocated_nodes(store: Store) -> None:
    """Identical pods go to the least allocated node, so they spread evenly."""
    for name in ("n1", "n2", "n3"):
        await store.create("nodes", node(name))
    for index in range(6):
        await store.create("pods", pod(f"p{index}", cpu="500m"), "default")

    async def placement() -> dict[str, int] | None:
        counts: dict[str, int] = {}
        for item in (await store.list("pods", "default")).items:
            if not item["spec"].get("nodeName"):
                return None
            counts[item["spec"]["nodeName"]] = counts.get(item["spec"]["nodeName"], 0) + 1
        return counts

    assert await until(placement) == {"n1": 2, "n2": 2, "n3": 2}


async def test_required_pod_anti_affinity_by_hostname(store: Store) -> None:
    """Replicas that repel each other by hostname take one node each; the extra one waits."""
    for name in ("n1", "n2"):
        await store.create("nodes", node(name))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    for index in range(3):
        await store.create(
            "pods", pod(f"db{index}", labels={"app": "db"}, affinity=anti), "default"
        )
    message = await until(lambda: unschedulable_message(store, "db2"))
    assert message == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    assert {await node_of(store, "db0"), await node_of(store, "db1")} == {"n1", "n2"}


async def test_existing_pods_anti_affinity_is_symmetric(store: Store) -> None:
    """A pod that a running pod's anti-affinity rejects does not go to that pod's node."""
    await store.create("nodes", node("n1"))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"role": "noisy"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    await store.create("pods", pod("quiet", affinity=anti), "default")
    assert await until(lambda: node_of(store, "quiet")) == "n1"
    await store.create("pods", pod("noisy", labels={"role": "noisy"}), "default")
    message = await until(lambda: unschedulable_message(store, "noisy"))
    assert (
        message
        == "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
    )


async def test_required_pod_affinity_follows_the_selected_pods(store: Store) -> None:
    """A pod requiring affinity to another pod's zone lands in that zone."""
    await store.create("nodes", node("a1", zone="us-east-1a"))
    await store.create("nodes", node("b1", zone="us-east-1b", cpu="8"))
    await store.create(
        "pods",
        pod("cache", labels={"app": "cache"}, nodeSelector={"kubernetes.io/hostname": "a1"}),
        "default",
    )
    assert await until(lambda: node_of(store, "cache")) == "a1"
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }
    await store.create("pods", pod("web", affinity=affinity), "default")
    assert await until(lambda: node_of(store, "web")) == "a1"


async def test_topology_spread_across_zones(store: Store) -> None:
    """DoNotSchedule spread by zone with maxSkew 1 keeps zones within one pod of each other."""
    await store.create("nodes", node("a1", zone="us-east-1a", cpu="16"))
    await store.create("nodes", node("b1", zone="us-east-1b", cpu="1"))
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    for index in range(6):
        await store.create(
            "pods",
            pod(f"w{index}", cpu="400m", labels={"app": "web"}, topologySpreadConstraints=spread),
            "default",
        )
    # b1 has room for two pods of 400m; a fourth pod in zone a would make the skew 2
    message = await until(lambda: _first_unschedulable(store, 6))
    assert message == (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints."
    )
    zones = [await node_of(store, f"w{index}") for index in range(6)]
    assert sorted(z for z in zones if z) == ["a1", "a1", "a1", "b1", "b1"]


async def _first_unschedulable(store: Store, count: int) -> str | None:
    for index in range(count):
        message = await unschedulable_message(store, f"w{index}")
        if message:
            return message
    return None


async def test_bad_quantity_is_explained_not_fatal(store: Store) -> None:
    """A pod with an unparsable request is refused by the API server (422, as kube-apiserver
    does), so the scheduler never meets it; others still bind."""
    await store.create("nodes", node("n1"))
    with pytest.raises(Invalid, match="quantities must match"):
        await store.create("pods", pod("bad", cpu="lots"), "default")
    await store.create("pods", pod("good"), "default")
    assert await until(lambda: node_of(store, "good")) == "n1"


async def test_other_schedulers_pods_are_left_alone(store: Store) -> None:
    """A pod naming another scheduler is neither bound nor marked."""
    await store.create("nodes", node("n1"))
    await store.create("pods", pod("mine"), "default")
    await store.create("pods", pod("theirs", schedulerName="other"), "default")
    assert await until(lambda: node_of(store, "mine")) == "n1"
    theirs = await store.get("pods", "theirs", "default")
    assert not theirs["spec"].get("nodeName")
    assert "conditions" not in theirs["status"]


async def test_thousands_of_pods_all_bind_within_node_capacity(store: Store) -> None:
    """3,000 pods of a few shapes all bind to 300 nodes, and no node holds more cpu than it has.

    How fast they bind is a figure, not an assertion: `bench.localcloud_api` prints it."""
    for index in range(300):
        await store.create("nodes", node(f"n{index:03}", zone=f"us-east-1{'abc'[index % 3]}"))
    for index in range(3000):
        await store.create("pods", pod(f"p{index}", cpu=f"{100 + 100 * (index % 3)}m"), "default")

    async def all_bound() -> bool:
        return not (await store.list("pods", "default", field_selector="spec.nodeName=")).items

    await until(all_bound, timeout_seconds=120, interval_seconds=0.1)
    nodes = {item["metadata"]["name"]: item for item in (await store.list("nodes")).items}
    requested_millis: dict[str, int] = {}
    for item in (await store.list("pods", "default")).items:
        cpu = item["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        name = item["spec"]["nodeName"]
        requested_millis[name] = requested_millis.get(name, 0) + int(cpu.removesuffix("m"))
    for name, millis in requested_millis.items():
        allocatable = nodes[name]["status"]["allocatable"]["cpu"]
        assert millis <= _millis(allocatable), (name, millis, allocatable)


def _millis(quantity: str) -> int:
    return int(quantity.removesuffix("m")) if quantity.endswith("m") else int(quantity) * 1000


async def test_bound_volume_pins_the_pod_to_its_zone(store: Store) -> None:
    """A pod whose claim is bound to a zonal volume goes to a node in that zone; a pod whose
    claim does not exist is explained."""
    await store.create("nodes", node("a1", zone="us-east-1a"))
    await store.create("nodes", node("b1", zone="us-east-1b"))
    zone_b = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-east-1b"],
                        }
                    ]
                }
            ]
        }
    }
    await store.create(
        "persistentvolumes",
        {
            "metadata": {"name": "pv-data"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "nodeAffinity": zone_b,
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
            },
        },
    )
    await store.create(
        "persistentvolumeclaims",
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "volumeName": "pv-data",
            },
        },
        "default",
    )
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    for index in range(3):
        await store.create("pods", pod(f"db{index}", volumes=volumes), "default")
    missing = [{"name": "data", "persistentVolumeClaim": {"claimName": "nope"}}]
    await store.create("pods", pod("lost", volumes=missing), "default")
    for index in range(3):
        assert await until(functools.partial(node_of, store, f"db{index}")) == "b1"
    message = await until(lambda: unschedulable_message(store, "lost"))
    assert message == '0/2 nodes are available: persistentvolumeclaim "nope" not found.'


async def test_node_added_while_a_pass_runs_is_not_missed(store: Store) -> None:
    """A node that appears while a long pass is judging pods unschedulable still gets them."""
    for index in range(300):
        await store.create("pods", pod(f"p{index}"), "default")
    await asyncio.sleep(0)  # let the scheduler start its pass over the 300 pods
    await store.create("nodes", node("late", cpu="64", memory="64Gi", pods="500"))

    async def all_bound() -> bool:
        return not (await store.list("pods", "default", field_selector="spec.nodeName=")).items

    await until(all_bound)


async def test_preferences_steer_the_choice_among_feasible_nodes(store: Store) -> None:
    """Preferred node affinity draws a pod to the preferred node even when it is busier, and a
    PreferNoSchedule taint pushes pods away from an otherwise equal node."""
    await store.create("nodes", node("busy-ssd", labels={"disk": "ssd"}))
    await store.create("nodes", node("idle-hdd", labels={"disk": "hdd"}))
    await store.create("pods", pod("filler", cpu="2", nodeSelector={"disk": "ssd"}), "default")
    assert await until(lambda: node_of(store, "filler")) == "busy-ssd"
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }
    await store.create("pods", pod("fast", affinity=preferred), "default")
    assert await until(lambda: node_of(store, "fast")) == "busy-ssd"

    await store.create(
        "nodes", node("soft", taints=[{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}])
    )
    await store.create("nodes", node("plain"))
    for index in range(2):
        await store.create(
            "pods",
            pod(
                f"free{index}",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": ["soft", "plain"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            "default",
        )
    assert await until(lambda: node_of(store, "free0")) == "plain"
    assert await until(lambda: node_of(store, "free1")) == "plain"


async def test_editing_a_waiting_pod_retries_it() -> None:
    """A pod waiting for a toleration is bound as soon as the toleration is added to it (with
    retries on cluster changes an hour apart, only the edit can explain the binding)."""
    store = Store()
    scheduler = DefaultScheduler(store, retry_debounce_seconds=3600)
    await store.create(
        "nodes", node("gpu", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    )
    task = asyncio.create_task(scheduler.run())
    try:
        await store.create("pods", pod("trainer"), "default")
        await until(lambda: unschedulable_message(store, "trainer"))
        current = await store.get("pods", "trainer", "default")
        current["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists"})
        await store.update("pods", current, "default")
        assert await until(lambda: node_of(store, "trainer")) == "gpu"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
