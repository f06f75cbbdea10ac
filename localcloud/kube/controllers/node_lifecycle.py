"""`NodeLifecycleController`: pods do not outlive their node.

- A pod bound to a node that does not exist (deleted, or never registered) is deleted at once
  with grace 0, as the pod garbage collector does for orphaned pods.
- The pods of a node that has not been Ready for `pod_eviction_timeout_seconds` (kube's
  default tolerationSeconds for not-ready/unreachable, 300) are deleted gracefully, as taint-based
  eviction does; the kubelet, if alive, finishes the deletion.

Timing uses the event loop's clock (fast-forwarded in tests with looptime).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog

from localcloud.kube.controllers.informer import Informer, ObjectKey, object_key, resource_types
from localcloud.kube.controllers.reconciler import Reconciler
from localcloud.kube.controllers.scheduler import is_ready
from localcloud.kube.errors import ApiError, NotFound
from localcloud.kube.store import DELETED, Store

JsonObject = dict[str, Any]

log = structlog.get_logger("localcloud.kube.controllers.node_lifecycle")


class NodeLifecycleController(Reconciler):
    """Deletes the pods of missing and long-NotReady nodes; see the module docstring."""

    name = "node-lifecycle"

    def __init__(self, store: Store, *, pod_eviction_timeout_seconds: float = 300.0) -> None:
        super().__init__()
        self.store = store
        self._rt = resource_types(store)
        self.pod_eviction_timeout_seconds = pod_eviction_timeout_seconds
        self._pods_by_node: dict[str, set[ObjectKey]] = {}
        self._pod_node: dict[ObjectKey, str] = {}
        self._not_ready_since: dict[str, float] = {}
        self.nodes = Informer(store, "nodes", self._on_node)
        self.pods = Informer(store, "pods", self._on_pod)

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        name = node["metadata"]["name"]
        if kind == DELETED:
            self._not_ready_since.pop(name, None)
            self.enqueue(("", name))
            return
        if is_ready(node):
            self._not_ready_since.pop(name, None)
            return
        if name not in self._not_ready_since:
            self._not_ready_since[name] = asyncio.get_running_loop().time()
            self.enqueue_later(("", name), self.pod_eviction_timeout_seconds)

    def _on_pod(self, kind: str, pod: JsonObject, previous: JsonObject | None) -> None:
        key = object_key(pod)
        old = self._pod_node.pop(key, None)
        if old is not None:
            self._pods_by_node.get(old, set()).discard(key)
        if kind == DELETED:
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return
        self._pod_node[key] = node_name
        self._pods_by_node.setdefault(node_name, set()).add(key)
        if ("", node_name) not in self.nodes.cache:
            self.enqueue(("", node_name))

    async def run(self) -> None:
        self.nodes.start()
        self.pods.start()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.nodes.run())
            tasks.create_task(self.pods.run())
            tasks.create_task(self.drain())

    async def reconcile(self, key: ObjectKey) -> None:
        node_name = key[1]
        pods = sorted(self._pods_by_node.get(node_name, ()))
        if not pods:
            return
        if ("", node_name) not in self.nodes.cache:
            log.info("orphaned_pods_deleted", node=node_name, pods=len(pods))
            for namespace, name in pods:
                await self._delete(namespace, name, grace_period_seconds=0)
            return
        since = self._not_ready_since.get(node_name)
        if since is None:
            return
        due = since + self.pod_eviction_timeout_seconds - asyncio.get_running_loop().time()
        if due > 0:
            return
        log.info("not_ready_node_pods_evicted", node=node_name, pods=len(pods))
        for namespace, name in pods:
            pod = self.pods.cache.get((namespace, name))
            if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                await self._delete(namespace, name, grace_period_seconds=None)

    async def _delete(self, namespace: str, name: str, *, grace_period_seconds: int | None) -> None:
        with contextlib.suppress(NotFound):
            try:
                await self.store.delete(
                    self._rt["pods"], name, namespace, grace_period_seconds=grace_period_seconds
                )
            except NotFound:
                raise
            except ApiError as error:
                log.warning("pod_delete_failed", pod=f"{namespace}/{name}", error=str(error))
