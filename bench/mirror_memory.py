"""Where the scheduler's memory goes with a big cluster, without running the whole stack.

    uv run python -m bench.mirror_memory                      # 10,000 pods, 1,000 nodes/claims
    uv run python -m bench.mirror_memory --tracemalloc        # + Python allocations per phase
    uv run python -m bench.mirror_memory --pods 2000 --nodes 200

Phases, each reported as the process's RSS (and, with --tracemalloc, the bytes Python holds):

1. `import scheduler_svc.service` (the service's modules and libraries);
2. the mirror fed, through `ClusterMirror.handle`, with nodes, NodeClaims and pods shaped as
   localcloud's API server and kubelets write them (defaults, kubelet status, container
   statuses), each decoded from its own JSON text as a watch event would be; every pod goes
   through the events a real one sees (created, marked Unschedulable, bound, Running);
3. the two CoreSnapshotters the service keeps (provisioning, disruption) converting the mirror.

The objects only go through the mirror's own code (no HTTP); `bench.reaction --rss` measures the
real service end to end.
"""

from __future__ import annotations

import argparse
import gc
import json
import secrets
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def rss_megabytes() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stamp(second: int) -> str:
    return f"2026-11-25T21:{second // 60 % 60:02d}:{second % 60:02d}Z"


def node(index: int) -> dict[str, Any]:
    zone = ("us-west-2a", "us-west-2b", "us-west-2c")[index % 3]
    name = f"ip-10-0-{index // 250}-{index % 250}.us-west-2.compute.internal"
    instance_id = f"i-{secrets.token_hex(8)}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": secrets.token_hex(16),
            "resourceVersion": str(index + 1),
            "creationTimestamp": _stamp(index),
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "karpenter.k8s.aws/instance-category": "m",
                "karpenter.k8s.aws/instance-family": "m5",
                "karpenter.k8s.aws/instance-generation": "5",
                "karpenter.k8s.aws/instance-cpu": "4",
                "karpenter.k8s.aws/instance-memory": "16384",
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/instance-type": "m5.xlarge",
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": "us-west-2",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "failure-domain.beta.kubernetes.io/region": "us-west-2",
                "karpenter.sh/capacity-type": "on-demand",
                "daiku.dev/nodepool": "default",
                "karpenter.sh/nodepool": "default",
                "daiku.dev/registered": "true",
                "daiku.dev/initialized": "true",
            },
        },
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "capacity": {
                "cpu": "4",
                "memory": "15896Mi",
                "pods": "58",
                "ephemeral-storage": "20Gi",
            },
            "allocatable": {
                "cpu": "3920m",
                "memory": "14937Mi",
                "pods": "58",
                "ephemeral-storage": "17Gi",
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": _stamp(index),
                    "lastTransitionTime": _stamp(index),
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250}"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": instance_id,
                "systemUUID": instance_id,
                "bootID": secrets.token_hex(16),
                "kernelVersion": "6.1.0-localcloud",
                "osImage": "Amazon Linux 2023 (localcloud)",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.31.0",
                "kubeProxyVersion": "v1.31.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def nodeclaim(index: int, node_obj: dict[str, Any]) -> dict[str, Any]:
    labels = node_obj["metadata"]["labels"]
    zone = labels["topology.kubernetes.io/zone"]
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": kind,
            "message": "",
            "lastTransitionTime": _stamp(index),
        }
        for kind in ("Launched", "Registered", "Initialized", "Ready")
    ]
    return {
        "apiVersion": "daiku.dev/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": f"default-{secrets.token_hex(3)[:5]}",
            "uid": secrets.token_hex(16),
            "resourceVersion": str(index + 1),
            "creationTimestamp": _stamp(index),
            "generation": 1,
            "labels": {
                "daiku.dev/nodepool": "default",
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "daiku.dev/offerings": json.dumps([["m5.xlarge", zone, "on-demand", 0.192]]),
                "daiku.dev/nodepool-hash": secrets.token_hex(8),
            },
            "finalizers": ["daiku.dev/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "daiku.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m5.xlarge"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            ],
            "resources": {"requests": {"cpu": "3800m", "memory": "1280Mi", "pods": "10"}},
            "expireAfter": "720h",
        },
        "status": {
            "providerID": node_obj["spec"]["providerID"],
            "nodeName": node_obj["metadata"]["name"],
            "imageID": "ami-0123456789abcdef0",
            "capacity": dict(node_obj["status"]["capacity"]),
            "allocatable": dict(node_obj["status"]["allocatable"]),
            "conditions": conditions,
        },
    }


def _condition(kind: str, status: str, when: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": when,
        **extra,
    }


def pod_versions(index: int, node_name: str | None) -> Iterator[dict[str, Any]]:
    """The states a Deployment's pod goes through in localcloud: created, Unschedulable, then
    (when `node_name`) bound and Running with kubelet status."""
    rs = "big-6d4b75cb6d"
    name = f"{rs}-{secrets.token_hex(3)[:5]}"
    when = _stamp(index)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs}-",
            "namespace": "default",
            "uid": secrets.token_hex(16),
            "resourceVersion": str(index * 4 + 1),
            "creationTimestamp": when,
            "labels": {"app": "big", "pod-template-hash": "6d4b75cb6d"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs,
                    "uid": "0b6f4a1e-1c1e-4c43-9d55-2f1a3e7b8c90",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "380m", "memory": "128Mi"}},
                    "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    yield json.loads(json.dumps(pod))
    pod["metadata"]["resourceVersion"] = str(index * 4 + 2)
    pod["status"]["conditions"] = [
        _condition(
            "PodScheduled",
            "False",
            when,
            reason="Unschedulable",
            message="0/555 nodes are available: 555 Insufficient cpu.",
        )
    ]
    yield json.loads(json.dumps(pod))
    if node_name is None:
        return
    pod["metadata"]["resourceVersion"] = str(index * 4 + 3)
    pod["spec"]["nodeName"] = node_name
    pod["status"]["conditions"] = [_condition("PodScheduled", "True", when)]
    yield json.loads(json.dumps(pod))
    pod["metadata"]["resourceVersion"] = str(index * 4 + 4)
    pod["status"].update(
        {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": f"10.0.{index // 250 % 256}.{index % 250 + 2}",
            "podIPs": [{"ip": f"10.0.{index // 250 % 256}.{index % 250 + 2}"}],
            "startTime": when,
            "conditions": [
                *(
                    _condition(kind, "True", when)
                    for kind in ("PodReadyToStartContainers", "Initialized", "Ready")
                ),
                _condition("ContainersReady", "True", when),
                _condition("PodScheduled", "True", when),
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "imageID": f"registry.k8s.io/pause:3.10@sha256:{secrets.token_hex(32)}",
                    "containerID": f"containerd://{secrets.token_hex(32)}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": when}},
                    "lastState": {},
                }
            ],
        }
    )
    yield json.loads(json.dumps(pod))


class Meter:
    """Prints RSS (and traced bytes) after each phase."""

    def __init__(self, traced: bool) -> None:
        self.traced = traced
        self.start_rss = rss_megabytes()
        self._last_traced = 0

    def report(self, phase: str, objects: int = 0) -> None:
        gc.collect()
        line = f"{phase:<48} RSS {rss_megabytes():7.1f} MB"
        if self.traced:
            current, peak = tracemalloc.get_traced_memory()
            delta = current - self._last_traced
            self._last_traced = current
            line += f"   traced {current / 2**20:7.1f} MB (+{delta / 2**20:6.1f}"
            if objects:
                line += f", {delta / objects / 1024:5.1f} KiB each"
            line += f")  traced peak {peak / 2**20:7.1f} MB"
            tracemalloc.reset_peak()
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--claims", type=int, default=1_000)
    parser.add_argument("--bound", type=float, default=0.6, help="share of pods bound, Running")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--top", type=int, default=0, help="print the N biggest allocation sites")
    args = parser.parse_args()

    meter = Meter(traced=False)
    print(f"{'bare interpreter':<48} RSS {meter.start_rss:7.1f} MB")
    import scheduler_svc.service  # noqa: F401 - measured
    from scheduler_svc.kube.events import ObjectEvent, Synced
    from scheduler_svc.kube.resources import NODE_CLAIMS, NODES, PODS
    from scheduler_svc.state.cluster import ClusterMirror, is_provisionable_pod
    from scheduler_svc.state.core_snapshot import CoreSnapshotter

    print(f"kubernetes_asyncio imported: {'kubernetes_asyncio' in sys.modules}")
    meter.report("import scheduler_svc.service")
    if args.tracemalloc:
        tracemalloc.start(25 if args.top else 1)
        meter.traced = True

    mirror = ClusterMirror()
    for resource in mirror.resources:
        mirror.handle(Synced(resource, (), "1"))
    node_objs = [node(i) for i in range(args.nodes)]  # templates, measured before the mirror
    meter.report("empty mirror, synced")

    for obj in node_objs:
        mirror.handle(ObjectEvent(NODES, "ADDED", json.loads(json.dumps(obj))))
    meter.report(f"+ {args.nodes:,} nodes", args.nodes)
    for i in range(args.claims):
        claim = nodeclaim(i, node_objs[i % max(len(node_objs), 1)])
        mirror.handle(ObjectEvent(NODE_CLAIMS, "ADDED", claim))
    meter.report(f"+ {args.claims:,} NodeClaims", args.claims)
    names = [n["metadata"]["name"] for n in node_objs]
    del node_objs
    bound_count = int(args.pods * args.bound)
    started = time.monotonic()
    for i in range(args.pods):
        node_name = names[i % len(names)] if i < bound_count and names else None
        for version_number, version in enumerate(pod_versions(i, node_name)):
            mirror.handle(
                ObjectEvent(PODS, "ADDED" if version_number == 0 else "MODIFIED", version)
            )
    meter.report(
        f"+ {args.pods:,} pods ({bound_count:,} Running) in {time.monotonic() - started:.1f} s",
        args.pods,
    )

    provisioning = CoreSnapshotter(mirror)
    provisioning.snapshot(pod_filter=is_provisionable_pod)
    meter.report("+ provisioning's CoreSnapshotter")
    disruption = CoreSnapshotter(mirror)
    disruption.snapshot()
    meter.report("+ disruption's CoreSnapshotter")
    if args.tracemalloc and args.top:
        snapshot = tracemalloc.take_snapshot()
        for stat in snapshot.statistics("lineno")[: args.top]:
            print(f"{stat.size / 2**20:8.1f} MB {stat.count:9,} blocks")
            for frame in stat.traceback.format(limit=1):
                print("    " + frame)


if __name__ == "__main__":
    main()
