"""The live provisioner's round through the mirror (issue 11 item 4), for ``bench.scheduling
--live``.

The FACTS §5 mix as ``bench.plan_cli`` writes it (Deployments, the linear catalog with spot in
two zones and on-demand in three, allocatable below capacity), expanded into the pods the
ReplicaSet controller would make, each marked Unschedulable by kube-scheduler. They reach the
scheduler's own ``ClusterMirror`` as watch events (``handle(ObjectEvent)``, with the mirror's
slimming transforms), and one ``Provisioner.provision_once()`` round runs on it: the
``CoreSnapshotter`` conversion, NodePool validation, the catalog lookup and the solve. Only
what lies past the round's decision is stubbed: the catalog answers from memory instead of the
actuator, the creator launches nothing, and status/Event writes go nowhere.

Printed per size, wall and CPU seconds: ingest (the watch events into the mirror) and the
round, with the round's snapshot, validate and solve steps in CPU seconds. The target is the
issue's: 20k pods <= 2 s.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable
from typing import Any

import structlog

from bench.plan_cli import catalog_document, manifests
from daiku_cli.plan import instance_types_from_document
from daiku_cli.scenario.defaults import default_node_class
from scheduler_svc.core.model import InstanceType, NodeClaimPlan, UnavailableOffering
from scheduler_svc.kube.events import ObjectEvent, Synced
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, PODS
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.batcher import Batcher
from scheduler_svc.provisioning.provisioner import Provisioner
from scheduler_svc.state.cluster import ClusterMirror

KubeObject = dict[str, Any]


class _MemoryCatalog:
    """The actuator's ListInstanceTypes answer, already fetched."""

    def __init__(self, types: tuple[InstanceType, ...]) -> None:
        self._types = types

    async def instance_types(self, node_class: KubeObject) -> tuple[InstanceType, ...]:
        return self._types


class _NoLaunch:
    """The creator: keeps the round's NodeClaims; creating and launching them is not
    measured."""

    def __init__(self) -> None:
        self.plans: list[NodeClaimPlan] = []

    async def create(self, plan: NodeClaimPlan, pool: KubeObject, **_: Any) -> None:
        self.plans.append(plan)


class _NoWrites:
    """Status and Event writes go nowhere (the objects already hold their conditions)."""

    async def update_status(self, *_: Any, **__: Any) -> None:
        return None

    async def event(self, *_: Any, **__: Any) -> None:
        return None


class _NothingUnavailable:
    def active(self) -> frozenset[UnavailableOffering]:
        return frozenset()


def _ready(obj: KubeObject, *types: str) -> KubeObject:
    stamp = "2026-01-01T00:00:00Z"
    obj["metadata"].update({"uid": f"uid-{obj['metadata']['name']}", "generation": 1})
    obj["status"] = {
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": stamp}
            for t in (*types, "Ready")
        ]
    }
    return obj


def cluster_objects(count: int, seed: int) -> tuple[list[KubeObject], list[KubeObject]]:
    """The NodePool and EC2NodeClass, and the Deployments' pods as kube-scheduler left them."""
    items = manifests(count, seed)
    pool = copy.deepcopy(items[0])
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "daiku.dev",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    node_class = default_node_class("bench")
    pods: list[KubeObject] = []
    for deployment in items[1:]:
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        for i in range(deployment["spec"]["replicas"]):
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{i}",
                        "namespace": "default",
                        "uid": f"{name}-{i}",
                        "resourceVersion": str(len(pods) + 10),
                        "labels": dict(template["metadata"]["labels"]),
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "ReplicaSet",
                                "name": name,
                                "uid": f"rs-{name}",
                                "controller": True,
                            }
                        ],
                    },
                    "spec": copy.deepcopy(template["spec"]),
                    "status": {
                        "phase": "Pending",
                        "conditions": [
                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                        ],
                    },
                }
            )
    objects = [
        _ready(pool, "ValidationSucceeded", "NodeClassReady"),
        _ready(node_class, "ValidationSucceeded"),
    ]
    return objects, pods


def _timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = run()
    return value, time.perf_counter() - wall, time.process_time() - cpu


async def live_round(count: int, seed: int) -> str:
    """One size: ingest and one round; a line of figures."""
    (pool, node_class), pods = cluster_objects(count, seed)
    types = tuple(instance_types_from_document(catalog_document(), "FACTS §5 catalog"))
    mirror = ClusterMirror()
    for resource in mirror.resources:
        mirror.handle(Synced(resource, (), "1"))
    mirror.handle(ObjectEvent(NODE_POOLS, "ADDED", pool))
    mirror.handle(ObjectEvent(EC2_NODE_CLASSES, "ADDED", node_class))
    creator = _NoLaunch()
    provisioner = Provisioner(
        mirror=mirror,
        writer=_NoWrites(),  # type: ignore[arg-type]
        catalog=_MemoryCatalog(types),  # type: ignore[arg-type]
        creator=creator,  # type: ignore[arg-type]
        unavailable=_NothingUnavailable(),  # type: ignore[arg-type]
        metrics=SchedulerMetrics(),
        batcher=Batcher(idle_seconds=1.0, max_seconds=10.0),
        # The round's own step timings in CPU seconds: on the shared 2-core box wall time is
        # mostly waiting for a core.
        clock=time.process_time,
    )
    mirror.add_listener(provisioner.on_change)

    def ingest() -> None:
        for pod in pods:
            mirror.handle(ObjectEvent(PODS, "ADDED", pod))

    _, ingest_wall, ingest_cpu = _timed(ingest)
    wall, cpu = time.perf_counter(), time.process_time()
    result = await provisioner.provision_once()
    round_wall, round_cpu = time.perf_counter() - wall, time.process_time() - cpu
    plans = creator.plans
    placed = sum(len(p.pods) for p in plans)
    cost = sum(p.price_per_hour for p in plans)
    steps = " ".join(f"{k}={v:.2f}s" for k, v in result.timings.items() if k != "catalog")
    await provisioner.close()
    return (
        f"pods={count:>6}  ingest={ingest_wall:5.2f}s wall {ingest_cpu:5.2f}s cpu  "
        f"round={round_wall:5.2f}s wall {round_cpu:5.2f}s cpu (cpu: {steps})  "
        f"pending={result.pending_pods} claims={len(plans)} placed={placed} "
        f"unschedulable={len(result.unschedulable)} cost=${cost:.2f}/h"
    )


def run(sizes: list[int], seed: int) -> None:
    # The round's info logs (one per mirror resource synced, one per round) are not figures.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print("live provisioner round through ClusterMirror (FACTS §5 mix as pods)", flush=True)
    for count in sizes:
        print(asyncio.run(live_round(count, seed)), flush=True)
