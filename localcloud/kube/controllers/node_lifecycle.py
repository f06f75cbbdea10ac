"""`NodeLifecycleController`: pods do not outlive their node.

- A pod bound to a node that does not exist (deleted, or never registered) is deleted at once
  with grace 0, as the pod garbage collector does for orphaned pods.
- The pods of a node that is not Ready are evicted (deleted gracefully) as taint-based eviction
  does: a node whose Ready condition is False counts as tainted
  `node.kubernetes.io/not-ready:NoExecute`, Unknown (or no condition) as
  `node.kubernetes.io/unreachable:NoExecute`. A pod without a matching toleration goes at once;
  one whose toleration has `tolerationSeconds` goes that long after the node stopped being
  Ready (the apiserver gives every pod 300 s by default); one tolerating it without a limit
  (DaemonSet pods) stays. The kubelet, if alive, finishes the deletion.

Timing uses the event loop's clock (fast-forwarded in tests with looptime).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import (
    Informer,
    ObjectKey,
    PodsByNode,
    resource_types,
)
from localcloud.kube.controllers.pod_fit import tolerates
from localcloud.kube.controllers.reconciler import Reconciler
from localcloud.kube.errors import ApiError, NotFound
from localcloud.kube.store import DELETED, Store

JsonObject = dict[str, Any]
NOT_READY_KEY: Final = "node.kubernetes.io/not-ready"
UNREACHABLE_KEY: Final = "node.kubernetes.io/unreachable"

log = structlog.get_logger("localcloud.kube.controllers.node_lifecycle")


def ready_status(node: JsonObject) -> str:
    """The Ready condition's status: True, False or Unknown (no condition counts as Unknown)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown")
    return "Unknown"


def eviction_delay_seconds(pod: JsonObject, taint: JsonObject) -> float | None:
    """How long `pod` may stay on a node tainted `taint` (NoExecute): 0 without a matching
    toleration, None when it tolerates it forever, else the shortest tolerationSeconds."""
    delays: list[float] = []
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if not tolerates(toleration, taint):
            continue
        seconds = toleration.get("tolerationSeconds")
        if seconds is None:
            return None
        delays.append(max(0.0, float(seconds)))
    return min(delays) if delays else 0.0


class NodeLifecycleController(Reconciler):
    """Deletes the pods of missing and NotReady nodes; see the module docstring."""

    name = "node-lifecycle"

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self._rt = resource_types(store)
        self._pods = PodsByNode()
        self._not_ready_since: dict[str, float] = {}
        self.nodes = Informer(store, "nodes", self._on_node)
        self.pods = Informer(store, "pods", self._on_pod)

    def _on_node(self, kind: str, node: JsonObject, previous: JsonObject | None) -> None:
        name = node["metadata"]["name"]
        if kind == DELETED:
            self._not_ready_since.pop(name, None)
            self.enqueue(("", name))
            return
        if ready_status(node) == "True":
            self._not_ready_since.pop(name, None)
            return
        if name not in self._not_ready_since:
            self._not_ready_since[name] = asyncio.get_running_loop().time()
        self.enqueue(("", name))

    def _on_pod(self, kind: str, pod: JsonObject, previous: JsonObject | None) -> None:
        old, node_name = self._pods.observe(kind, pod)
        if node_name is None:
            return
        if old != node_name and (
            ("", node_name) not in self.nodes.cache or node_name in self._not_ready_since
        ):
            self.enqueue(("", node_name))

    async def run(self) -> None:
        await self.run_with(self.nodes, self.pods)

    async def reconcile(self, key: ObjectKey) -> None:
        node_name = key[1]
        pods = self._pods.on(node_name)
        if not pods:
            return
        node = self.nodes.cache.get(("", node_name))
        if node is None:
            log.info("orphaned_pods_deleted", node=node_name, pods=len(pods))
            for namespace, name in pods:
                await self._delete(namespace, name, grace_period_seconds=0)
            return
        since = self._not_ready_since.get(node_name)
        if since is None:
            return
        taint = {
            "key": NOT_READY_KEY if ready_status(node) == "False" else UNREACHABLE_KEY,
            "effect": "NoExecute",
        }
        now = asyncio.get_running_loop().time()
        next_due: float | None = None
        for pod_key in pods:
            pod = self.pods.cache.get(pod_key)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            delay = eviction_delay_seconds(pod, taint)
            if delay is None:
                continue
            due = since + delay
            if due <= now:
                log.info(
                    "pod_evicted",
                    pod=f"{pod_key[0]}/{pod_key[1]}",
                    node=node_name,
                    taint=taint["key"],
                )
                await self._delete(*pod_key, grace_period_seconds=None)
            elif next_due is None or due < next_due:
                next_due = due
        if next_due is not None:
            self.enqueue_later(key, next_due - now)

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
