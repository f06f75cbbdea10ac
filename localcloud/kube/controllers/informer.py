"""`Informer`: a store watch kept alive, with a cache of what it has seen.

Controllers of the local control plane run in the API server's process and read the store
directly (no HTTP), so they see exactly what clients see, at once. An informer lists and
watches one resource and calls its handler synchronously for every change, in order. When the
watch falls behind the store's retained window (`Gone`), it relists and hands the handler the
difference (ADDED/MODIFIED for what is there, DELETED for what vanished), so a controller never
misses a deletion.

Objects handed to handlers are the store's own dicts (`copy=False`): read them, never modify
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from localcloud.kube.errors import Gone
from localcloud.kube.resources import ResourceType
from localcloud.kube.store import ADDED, DELETED, MODIFIED, Store

JsonObject = dict[str, Any]
ObjectKey = tuple[str, str]
# (event type, object, previous object or None)
Handler = Callable[[str, JsonObject, JsonObject | None], None]

log = structlog.get_logger("localcloud.kube.controllers")


def resource_types(store: Store) -> dict[str, ResourceType]:
    """The built-in types controllers write, resolved once (resolving a name scans types)."""
    names = (
        "pods",
        "nodes",
        "events",
        "leases",
        "namespaces",
        "replicasets",
        "deployments",
        "daemonsets",
    )
    return {name: store.resource(name) for name in names}


def object_key(obj: JsonObject) -> ObjectKey:
    meta = obj["metadata"]
    return (str(meta.get("namespace") or ""), str(meta["name"]))


class Informer:
    """Watch `resource` and keep `cache` (key -> object); call `handler` for each change."""

    def __init__(self, store: Store, resource: str, handler: Handler) -> None:
        self.store = store
        self.resource = resource
        self.handler = handler
        self.cache: dict[ObjectKey, JsonObject] = {}
        self.synced = asyncio.Event()

    def start(self) -> None:
        """List now (synchronously), so `cache` is complete before the first await."""
        self._watcher = self.store.watch(self.resource, copy=False)
        self._relist(self._watcher.take())

    async def run(self) -> None:
        """Deliver changes until cancelled; relist when the watch falls behind."""
        if not hasattr(self, "_watcher"):
            self.start()
        self.synced.set()
        watcher = self._watcher
        try:
            while True:
                try:
                    events = await watcher.poll(None)
                except Gone:
                    log.info("informer_relist", resource=self.resource)
                    watcher.close()
                    watcher = self._watcher = self.store.watch(self.resource, copy=False)
                    self._relist(watcher.take())
                    continue
                for event in events:
                    self._deliver(event.type, event.object)
        finally:
            watcher.close()

    def _relist(self, snapshot: list[Any]) -> None:
        seen: set[ObjectKey] = set()
        for event in snapshot:
            seen.add(object_key(event.object))
            self._deliver(ADDED, event.object)
        for key in [k for k in self.cache if k not in seen]:
            self._deliver(DELETED, self.cache[key])

    def _deliver(self, kind: str, obj: JsonObject) -> None:
        key = object_key(obj)
        previous = self.cache.get(key)
        if kind == DELETED:
            if previous is None:
                return
            del self.cache[key]
        else:
            if previous is obj:
                return
            self.cache[key] = obj
            if previous is not None:
                kind = MODIFIED
        try:
            self.handler(kind, obj, previous)
        except Exception:  # one bad object must not stop the control plane
            log.exception("informer_handler_failed", resource=self.resource, object=key)


class PodsByNode:
    """Which pods are bound to each node, kept from a pods informer's events."""

    def __init__(self) -> None:
        self._by_node: dict[str, set[ObjectKey]] = {}
        self._node_of: dict[ObjectKey, str] = {}

    def observe(self, kind: str, pod: JsonObject) -> tuple[str | None, str | None]:
        """Record a change: (the node the pod was bound to, the node it is bound to now)."""
        key = object_key(pod)
        old = self._node_of.pop(key, None)
        if old is not None:
            self._by_node.get(old, set()).discard(key)
        node = None if kind == DELETED else (pod.get("spec") or {}).get("nodeName") or None
        if node is not None:
            self._node_of[key] = node
            self._by_node.setdefault(node, set()).add(key)
        return old, node

    def on(self, node: str) -> list[ObjectKey]:
        """The pods bound to `node`, in key order."""
        return sorted(self._by_node.get(node, ()))
