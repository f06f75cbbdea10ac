"""The interruption feed: SQS interruption-queue messages -> cloud events for every watcher.

The queue is polled (long polling) only while at least one WatchCloudEvents stream is open. A
message whose events are handed to nobody (the last stream closed during the poll) is put back
at once (visibility 0), never deleted. Streams opened with `acknowledge` keep each message on
the queue until `acknowledge()` names all its events; when the last such stream closes with
events still unacknowledged, their messages are put back, and a subscriber that goes silent
sees them again after the queue's visibility timeout. So an interruption survives a scheduler
restart (decision 0011); delivery is at least once. Streams opened without `acknowledge` (the
contract before it existed) get each message deleted once handed to them. A message that is
not a known EventBridge event is logged and deleted, so it cannot block the queue. A spot
interruption warning also marks the instance's offering unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from actuator_svc.cloud.provider import CloudProvider, Instance, QueueMessage
from actuator_svc.core.cloud_events import (
    AckToken,
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
    """A cloud event with what the actuator knows about its instance, and the token that
    acknowledges it."""

    event: CloudEvent
    nodeclaim_name: str
    offering: OfferingKey | None
    ack_token: str = ""


@dataclass(eq=False)
class Subscription:
    """One open stream: the events it has not read yet, and whether it acknowledges them."""

    acknowledge: bool
    events: asyncio.Queue[InstanceEvent] = field(default_factory=asyncio.Queue)


@dataclass(eq=False)
class _Unacknowledged:
    """A received message waiting for its events' acknowledgements."""

    receipt_handle: str
    outstanding: set[int]  # indexes of its events not acknowledged yet
    holders: set[Subscription]  # the open streams it was handed to


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
        self._queue_url = ""
        self._subscribers: set[Subscription] = set()
        self._has_subscribers = asyncio.Event()
        self._unacknowledged: dict[str, _Unacknowledged] = {}  # by receipt handle
        self._releases: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def subscribe(self, *, acknowledge: bool = False) -> AsyncIterator[Subscription]:
        """A subscription receiving every event from now on, until the context exits; with
        `acknowledge`, the messages it was handed and did not acknowledge go back to the queue
        when it exits (unless another open stream holds them)."""
        subscription = Subscription(acknowledge=acknowledge)
        self._subscribers.add(subscription)
        self._has_subscribers.set()
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)
            if not self._subscribers:
                self._has_subscribers.clear()
            self._drop_holder(subscription)

    def _drop_holder(self, subscription: Subscription) -> None:
        orphans = []
        for handle, waiting in list(self._unacknowledged.items()):
            waiting.holders.discard(subscription)
            if not waiting.holders:
                del self._unacknowledged[handle]
                orphans.append(handle)
        if orphans:
            # A task: this runs while the stream is being cancelled, where awaiting is unsafe.
            task = asyncio.create_task(self._release(orphans))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def run(self) -> None:
        """Poll while anyone listens; never dies of one bad message or a failed call."""
        while True:
            await self._has_subscribers.wait()
            try:
                self._queue_url = self._queue_url or await self._cloud.queue_url(self._queue)
                messages = await self._cloud.receive_messages(self._queue_url, self._wait_seconds)
                for message in messages:
                    await self._dispatch(message)
            except CloudError as exc:
                log.warning("interruption_queue_failed", queue=self._queue, error=str(exc))
                await asyncio.sleep(self._error_backoff_seconds)

    async def acknowledge(self, tokens: Sequence[AckToken]) -> None:
        """The subscriber acted on these events: delete each message all of whose events are
        acknowledged. A token this replica never handed out (another replica's, or one from
        before a restart) deletes its message when it names the message's last event: a
        subscriber acknowledges in order."""
        done = []
        for token in tokens:
            waiting = self._unacknowledged.get(token.receipt_handle)
            if waiting is None:
                if token.is_last:
                    done.append(token.receipt_handle)
                continue
            waiting.outstanding.discard(token.index)
            if not waiting.outstanding:
                del self._unacknowledged[token.receipt_handle]
                done.append(token.receipt_handle)
        for handle in done:
            await self._delete(handle)

    async def _dispatch(self, message: QueueMessage) -> None:
        """Hand one message's events out; delete, keep or put it back (module docstring)."""
        events = await self._handle(message.body)
        subscribers = list(self._subscribers)
        if not events:
            await self._delete(message.receipt_handle)
            return
        if not subscribers:
            log.info("cloud_event_returned", reason="no stream open")
            await self._release([message.receipt_handle])
            return
        for index, delivered in enumerate(events):
            token = AckToken(index, len(events), message.receipt_handle).encode()
            for subscriber in subscribers:
                subscriber.events.put_nowait(
                    InstanceEvent(
                        delivered.event, delivered.nodeclaim_name, delivered.offering, token
                    )
                )
        if any(not s.acknowledge for s in subscribers):
            await self._delete(message.receipt_handle)
            return
        self._unacknowledged[message.receipt_handle] = _Unacknowledged(
            message.receipt_handle, set(range(len(events))), set(subscribers)
        )

    async def _delete(self, receipt_handle: str) -> None:
        try:
            await self._cloud.delete_message(self._queue_url, receipt_handle)
        except CloudError as exc:  # it comes back after its visibility timeout: acted on twice
            log.warning("interruption_message_delete_failed", error=str(exc))

    async def _release(self, receipt_handles: Sequence[str]) -> None:
        for handle in receipt_handles:
            try:
                await self._cloud.release_message(self._queue_url, handle)
            except CloudError as exc:  # it comes back after its visibility timeout instead
                log.warning("interruption_message_release_failed", error=str(exc))

    async def _handle(self, body: str) -> list[InstanceEvent]:
        """The message's events with their instances' claims; [] for a message to drop."""
        try:
            events = parse_cloud_events(body)
        except CloudEventError as exc:
            log.warning("interruption_message_dropped", reason=str(exc))
            return []
        if not events:
            return []
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
        delivered_events = []
        for event in events:
            instance = instances.get(event.instance_id)
            delivered = self._enrich(event, instance)
            delivered_events.append(delivered)
            self._metrics.cloud_events.labels(kind=event.kind.value).inc()
            log.info(
                "cloud_event_received",
                kind=event.kind.value,
                instance_id=event.instance_id,
                nodeclaim=delivered.nodeclaim_name,
            )
        return delivered_events

    def _enrich(self, event: CloudEvent, instance: Instance | None) -> InstanceEvent:
        if instance is None:
            return InstanceEvent(event, "", None)
        offering = OfferingKey(instance.instance_type, instance.zone, instance.capacity_type)
        if event.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING:
            self._unavailable.mark(offering, "SpotInterruption", self._clock())
        return InstanceEvent(event, instance.tags.get(NODECLAIM_TAG, ""), offering)
