"""`Reconciler`: a work queue of object keys, drained by one task, for level-triggered controllers.

Informer handlers enqueue keys (`enqueue`); `run` reconciles each queued key once per round,
in arrival order, yielding to the event loop between keys so that a burst of work never starves
the API server. A failing reconcile is logged and retried after `retry_seconds`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

import structlog

if TYPE_CHECKING:
    from localcloud.kube.controllers.informer import Informer

ObjectKey = tuple[str, str]
_YIELD_EVERY: Final = 32

log = structlog.get_logger("localcloud.kube.controllers")


class Reconciler:
    """Subclasses implement `reconcile(key)`; see the module docstring."""

    name = "reconciler"

    def __init__(self, *, retry_seconds: float = 1.0) -> None:
        self.retry_seconds = retry_seconds
        self._queue: dict[ObjectKey, None] = {}
        self._ready = asyncio.Event()

    def enqueue(self, key: ObjectKey) -> None:
        self._queue[key] = None
        self._ready.set()

    def enqueue_later(self, key: ObjectKey, delay_seconds: float) -> None:
        asyncio.get_running_loop().call_later(max(0.0, delay_seconds), self.enqueue, key)

    async def reconcile(self, key: ObjectKey) -> None:
        raise NotImplementedError

    async def run_with(self, *informers: Informer) -> None:
        """Start `informers` (their caches filled before anything runs), then run them and
        the queue until cancelled: the `run` of a controller that only reconciles."""
        for informer in informers:
            informer.start()
        async with asyncio.TaskGroup() as tasks:
            for informer in informers:
                tasks.create_task(informer.run())
            tasks.create_task(self.drain())

    async def drain(self) -> None:
        """Reconcile queued keys until cancelled."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            keys = list(self._queue)
            self._queue.clear()
            for index, key in enumerate(keys):
                if index % _YIELD_EVERY == _YIELD_EVERY - 1:
                    await asyncio.sleep(0)
                try:
                    await self.reconcile(key)
                except Exception as error:  # one object must not stop the controller
                    log.exception(
                        "reconcile_failed",
                        controller=self.name,
                        object=f"{key[0]}/{key[1]}",
                        error=repr(error),
                    )
                    self.enqueue_later(key, self.retry_seconds)


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference marked controller: true, if any."""
    for reference in obj["metadata"].get("ownerReferences") or []:
        if reference.get("controller"):
            return dict(reference)
    return None


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
