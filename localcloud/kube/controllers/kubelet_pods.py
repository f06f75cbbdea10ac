"""The pod half of localcloud's kubelets: run the pods bound to a Ready node, finish their
graceful deletion, and keep their Ready condition true to their readiness gates.

A pod bound to a registered, Ready node goes Pending -> Running with container statuses, a pod
IP near its node's and the kubelet's conditions (pod_readiness.py); a pod being deleted is
removed with grace 0 once its containers have had `container_stop_seconds` to stop. A silent
kubelet (its instance impaired) touches none of its pods. See kubelets.py.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from localcloud.kube.controllers.informer import (
    Informer,
    ObjectKey,
    PodsByNode,
    object_key,
    resource_types,
)
from localcloud.kube.controllers.pod_readiness import running_conditions, with_ready_refreshed
from localcloud.kube.errors import ApiError
from localcloud.kube.store import DELETED, Store, copy_json, format_timestamp

JsonObject = dict[str, Any]

log = structlog.get_logger("localcloud.kube.controllers.kubelets")


@dataclass(slots=True)
class Kubelet:
    """One instance's kubelet: its Node, and whether it is registered, Ready or silent."""

    instance_id: str
    node_name: str
    node: JsonObject
    ready: bool = False
    registered: bool = False
    deleted_at: float | None = None
    silent: bool = False  # its instance is impaired: it posts no status and runs nothing
    pod_ip_counter: int = 0
    timers: list[asyncio.TimerHandle] = field(default_factory=list)


class KubeletPods:
    """The pods of every kubelet, worked through one queue; `kubelet_on(node_name)` finds the
    kubelet of a node (None when no kubelet of ours runs it)."""

    def __init__(
        self,
        store: Store,
        kubelet_on: Callable[[str], Kubelet | None],
        *,
        container_stop_seconds: float,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self._rt = resource_types(store)
        self._kubelet_on = kubelet_on
        self.container_stop_seconds = container_stop_seconds
        self.clock = clock
        self._pods = PodsByNode()
        self._work: dict[ObjectKey, None] = {}
        self._work_ready = asyncio.Event()
        self._stopping: set[ObjectKey] = set()
        self.informer = Informer(store, "pods", self._on_pod)

    def node_ready(self, node_name: str) -> None:
        """A node turned Ready: its pods may start."""
        for key in self._pods.on(node_name):
            self._enqueue(key)

    def _on_pod(self, kind: str, pod: JsonObject, previous: JsonObject | None) -> None:
        key = object_key(pod)
        _, node_name = self._pods.observe(kind, pod)
        if kind == DELETED:
            self._work.pop(key, None)
            return
        if node_name is None:
            return
        kubelet = self._kubelet_on(node_name)
        if kubelet is not None and kubelet.registered:
            self._enqueue(key)

    def _enqueue(self, key: ObjectKey) -> None:
        self._work[key] = None
        self._work_ready.set()

    async def run(self) -> None:
        """Work the queue of pods to sync, forever."""
        while True:
            await self._work_ready.wait()
            self._work_ready.clear()
            keys = list(self._work)
            self._work.clear()
            for index, key in enumerate(keys):
                if index % 64 == 63:
                    await asyncio.sleep(0)
                try:
                    await self._sync_pod(key)
                except Exception:  # one bad pod must not stop the kubelets
                    log.exception("pod_sync_failed", pod=f"{key[0]}/{key[1]}")

    async def _sync_pod(self, key: ObjectKey) -> None:
        pod = self.informer.cache.get(key)
        if pod is None:
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        kubelet = self._kubelet_on(node_name or "")
        if kubelet is None or not kubelet.registered or kubelet.silent:
            return
        if pod["metadata"].get("deletionTimestamp"):
            if key not in self._stopping:
                self._stopping.add(key)
                task = asyncio.get_running_loop().create_task(self._stop_pod(key, pod))
                task.add_done_callback(log_task_failure)
            return
        phase = (pod.get("status") or {}).get("phase")
        if kubelet.ready and phase == "Pending":
            await self._start_pod(kubelet, key, pod)
        elif phase == "Running" and (pod.get("spec") or {}).get("readinessGates"):
            await self._refresh_readiness(key, pod)

    async def _stop_pod(self, key: ObjectKey, pod: JsonObject) -> None:
        try:
            if self.container_stop_seconds > 0:
                await asyncio.sleep(self.container_stop_seconds)
            current = self.informer.cache.get(key)
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
                return
            await self.store.delete(
                self._rt["pods"],
                key[1],
                key[0],
                grace_period_seconds=0,
                preconditions={"uid": pod["metadata"]["uid"]},
            )
            log.debug("pod_stopped", pod=f"{key[0]}/{key[1]}")
        except ApiError as error:
            log.info("pod_stop_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
        finally:
            self._stopping.discard(key)

    async def _start_pod(self, kubelet: Kubelet, key: ObjectKey, pod: JsonObject) -> None:
        now = self._stamp()
        kubelet.pod_ip_counter += 1
        host_ip = next(
            (
                a["address"]
                for a in kubelet.node["status"]["addresses"]
                if a["type"] == "InternalIP"
            ),
            "10.0.0.1",
        )
        pod_ip = _pod_ip(host_ip, kubelet.pod_ip_counter)
        spec = pod.get("spec") or {}
        new = copy_json(pod)
        status = new.setdefault("status", {})
        status.update(
            {
                "phase": "Running",
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": now,
                "conditions": running_conditions(pod, now),
                "containerStatuses": [
                    {
                        "name": container.get("name", ""),
                        "image": container.get("image", ""),
                        "imageID": f"{container.get('image', '')}@sha256:{secrets.token_hex(32)}",
                        "containerID": f"containerd://{secrets.token_hex(32)}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                    }
                    for container in spec.get("containers") or []
                ],
            }
        )
        try:
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_start_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
            return
        log.debug("pod_running", pod=f"{key[0]}/{key[1]}", node=kubelet.node_name)

    async def _refresh_readiness(self, key: ObjectKey, pod: JsonObject) -> None:
        """Recompute Ready from the pod's readiness gates, which others set in its status."""
        conditions = with_ready_refreshed(pod, self._stamp())
        if conditions is None:
            return
        new = copy_json(pod)
        new["status"]["conditions"] = conditions
        try:  # a conflict means a newer pod, whose own event brings it back here
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_readiness_failed", pod=f"{key[0]}/{key[1]}", error=str(error))

    def _stamp(self) -> str:
        return format_timestamp(self.clock())


def log_task_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("kubelet_task_failed", error=repr(task.exception()))


def _pod_ip(host_ip: str, counter: int) -> str:
    """A pod IP near its node's, as the VPC CNI hands out secondary addresses of the subnet."""
    parts = host_ip.split(".")
    if len(parts) != 4:
        parts = ["10", "0", "0", "1"]
    third = (int(parts[2]) + 1 + counter // 250) % 256
    return f"{parts[0]}.{parts[1]}.{third}.{counter % 250 + 2}"


__all__ = ["Kubelet", "KubeletPods", "log_task_failure"]
