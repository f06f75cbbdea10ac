"""What the default scheduler writes back about a pod: kube-scheduler's PodScheduled=False
condition for a pod that fits nowhere, and its Scheduled / FailedScheduling Events."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import ObjectKey, resource_types
from localcloud.kube.errors import ApiError
from localcloud.kube.store import Store, copy_json, format_timestamp

JsonObject = dict[str, Any]
DEFAULT_SCHEDULER: Final = "default-scheduler"

log = structlog.get_logger("localcloud.kube.controllers.scheduler")


class SchedulingRecorder:
    """Pod status and Events as kube-scheduler writes them; Events only when `events`."""

    def __init__(self, store: Store, clock: Callable[[], datetime], *, events: bool) -> None:
        self.store = store
        self._rt = resource_types(store)
        self.clock = clock
        self.events = events

    async def unschedulable(self, key: ObjectKey, pod: JsonObject, message: str) -> None:
        """PodScheduled=False, reason Unschedulable, with `message` (unless the pod says so
        already), and a FailedScheduling Event."""
        status = pod.get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        current = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if (
            current is not None
            and current.get("status") == "False"
            and current.get("reason") == "Unschedulable"
            and current.get("message") == message
        ):
            return
        now = format_timestamp(self.clock())
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": (
                current.get("lastTransitionTime", now)
                if current is not None and current.get("status") == "False"
                else now
            ),
            "reason": "Unschedulable",
            "message": message,
        }
        new = copy_json(pod)
        new["status"] = {**new.get("status", {}), "conditions": [*conditions, condition]}
        try:
            await self.store.update(self._rt["pods"], new, key[0], subresource="status")
        except ApiError as error:
            log.info("pod_status_update_failed", pod=f"{key[0]}/{key[1]}", error=str(error))
            return
        log.debug("pod_unschedulable", pod=f"{key[0]}/{key[1]}", message=message)
        if self.events:
            await self.event(pod, "Warning", "FailedScheduling", message)

    async def event(self, pod: JsonObject, kind: str, reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = format_timestamp(self.clock())
        event = {
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "kind": "Pod",
                "apiVersion": "v1",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": DEFAULT_SCHEDULER},
            "reportingComponent": DEFAULT_SCHEDULER,
            "reportingInstance": DEFAULT_SCHEDULER,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.store.create(self._rt["events"], event, meta["namespace"])
        except ApiError as error:
            log.info("event_create_failed", pod=meta["name"], error=str(error))


__all__ = ["DEFAULT_SCHEDULER", "SchedulingRecorder"]
