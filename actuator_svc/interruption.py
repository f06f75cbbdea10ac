"""The interruption feed: SQS interruption-queue messages -> cloud events for every watcher.

The queue is polled (long polling) only while at least one WatchCloudEvents stream is open.
A message is deleted after its events were handed to every current subscriber; a message that
is not a known EventBridge event is logged and deleted, so it cannot block the queue. A spot
interruption warning also marks the instance's offering unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import structlog

from actuator_svc.cloud.provider import CloudProvider, Instance
from actuator_svc.core.cloud_events import (
    CloudEvent,
    CloudEventError,
    CloudEventKind,
    parse_cloud_events,
)
from actuator_svc.core.offerings import OfferingKey
from actuator_svc.core.tags import CLUSTER_TAG, NODECLAIM_TAG
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.errors import CloudError
from actuator_svc.metrics import ActuatorMetrics

log = structlog.get_logger("actuator_svc.interruption")


@dataclass(frozen=True)
class InstanceEvent:
    """A cloud event with what the actuator knows about its instance."""

    event: CloudEvent
    nodeclaim_name: str
    offering: OfferingKey | None


class InterruptionFeed:
    """Fans queue messages out to subscribers; `run()` is the polling task."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        queue: str,
        cluster_name: str,
        unavailable: UnavailableOfferings,
        clock: Callable[[], float],
        metrics: ActuatorMetrics,
        wait_seconds: int = 20,
        error_backoff_seconds: float = 1.0,
    ) -> None:
        self._cloud = cloud
        self._queue = queue
        self._cluster_name = cluster_name
        self._unavailable = unavailable
        self._clock = clock
        self._metrics = metrics
        self._wait_seconds = wait_seconds
        self._error_backoff_seconds = error_backoff_seconds
        self._subscribers: set[asyncio.Queue[InstanceEvent]] = set()
        self._has_subscribers = asyncio.Event()

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[InstanceEvent]]:
        """A queue receiving every event from now on, until the context exits."""
        queue: asyncio.Queue[InstanceEvent] = asyncio.Queue()
        self._subscribers.add(queue)
        self._has_subscribers.set()
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)
            if not self._subscribers:
                self._has_subscribers.clear()

    async def run(self) -> None:
        """Poll while anyone listens; never dies of one bad message or a failed call."""
        queue_url = ""
        while True:
            await self._has_subscribers.wait()
            try:
                queue_url = queue_url or await self._cloud.queue_url(self._queue)
                messages = await self._cloud.receive_messages(queue_url, self._wait_seconds)
                for message in messages:
                    await self._handle(message.body)
                    await self._cloud.delete_message(queue_url, message.receipt_handle)
            except CloudError as exc:
                log.warning("interruption_queue_failed", queue=self._queue, error=str(exc))
                await asyncio.sleep(self._error_backoff_seconds)

    async def _handle(self, body: str) -> None:
        try:
            events = parse_cloud_events(body)
        except CloudEventError as exc:
            log.warning("interruption_message_dropped", reason=str(exc))
            return
        # Only the instances the message names: listing the whole cluster per message costs
        # a DescribeInstances of every node (seconds at a thousand nodes).
        instances = {
            i.id: i
            for i in await self._cloud.find_instances(
                {CLUSTER_TAG: self._cluster_name},
                include_terminated=True,
                instance_ids=[e.instance_id for e in events],
            )
        }
        for event in events:
            instance = instances.get(event.instance_id)
            delivered = self._enrich(event, instance)
            self._metrics.cloud_events.labels(kind=event.kind.value).inc()
            log.info(
                "cloud_event_received",
                kind=event.kind.value,
                instance_id=event.instance_id,
                nodeclaim=delivered.nodeclaim_name,
            )
            for subscriber in list(self._subscribers):
                subscriber.put_nowait(delivered)

    def _enrich(self, event: CloudEvent, instance: Instance | None) -> InstanceEvent:
        if instance is None:
            return InstanceEvent(event, "", None)
        offering = OfferingKey(instance.instance_type, instance.zone, instance.capacity_type)
        if event.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING:
            self._unavailable.mark(offering, "SpotInterruption", self._clock())
        return InstanceEvent(event, instance.tags.get(NODECLAIM_TAG, ""), offering)
