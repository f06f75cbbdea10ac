"""The interruption feed keeps queue messages until a subscriber acknowledges them, and puts
back what nobody received or acknowledged (issue 13 defect 2), against the in-memory cloud."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from actuator_svc.cloud.fake import FakeCloud
from actuator_svc.core.cloud_events import AckToken, CloudEventError
from actuator_svc.core.unavailable_offerings import UnavailableOfferings
from actuator_svc.interruption import InterruptionFeed, Subscription
from actuator_svc.metrics import ActuatorMetrics
from tests.actuator_svc.test_launcher import Clock, make_cloud, make_launcher, request, spot
from tests.polling import until


def spot_warning(event_id: str, instance_id: str) -> str:
    return json.dumps({
        "id": event_id, "detail-type": "EC2 Spot Instance Interruption Warning",
        "time": "2026-01-01T00:00:00Z", "detail": {"instance-id": instance_id},
    })  # fmt: skip


def health_event(event_id: str, instance_ids: list[str]) -> str:
    return json.dumps({
        "id": event_id, "detail-type": "AWS Health Event", "time": "2026-01-01T00:00:00Z",
        "detail": {"affectedEntities": [{"entityValue": i} for i in instance_ids]},
    })  # fmt: skip


class Feed:
    """A feed on the fake cloud with one launched spot instance, its poller running."""

    def __init__(
        self,
        cloud: FakeCloud,
        feed: InterruptionFeed,
        url: str,
        instance: str,
        unavailable: UnavailableOfferings,
    ) -> None:
        self.cloud, self.feed, self.url, self.instance = cloud, feed, url, instance
        self.unavailable = unavailable

    def messages_left(self) -> int:
        """Messages still on the queue, visible or received but not deleted."""
        return len(self.cloud.queues.get(self.url, [])) + len(
            self.cloud.in_flight.get(self.url, {})
        )


@pytest.fixture
async def feed() -> AsyncIterator[Feed]:
    cloud = make_cloud()
    clock = Clock()
    launcher, unavailable = make_launcher(cloud, clock)
    launched = await launcher.launch(request("e-1", spot("m5.large")))
    interruptions = InterruptionFeed(
        cloud, queue="q", cluster_name="demo", unavailable=unavailable, clock=clock,
        metrics=ActuatorMetrics(), wait_seconds=5,
    )  # fmt: skip
    poller = asyncio.create_task(interruptions.run())
    url = await cloud.queue_url("q")
    yield Feed(cloud, interruptions, url, launched.instance.id, unavailable)
    poller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await poller


async def next_event(subscription: Subscription) -> str:
    event = await asyncio.wait_for(subscription.events.get(), timeout=5)
    return event.ack_token


async def test_spot_interruption_marks_the_offering_and_reaches_every_subscriber(
    feed: Feed,
) -> None:
    """A spot warning reaches every subscriber with the claim and offering, marks the offering
    unavailable, and is deleted once handed out; a message that is no event is dropped."""
    async with feed.feed.subscribe() as first, feed.feed.subscribe() as second:
        feed.cloud.send_message(feed.url, "not an event")
        feed.cloud.send_message(feed.url, spot_warning("ev-1", feed.instance))
        events = [await asyncio.wait_for(s.events.get(), timeout=5) for s in (first, second)]
        await until(lambda: feed.messages_left() == 0)
    assert {e.nodeclaim_name for e in events} == {"e-1"}
    assert events[0].offering == spot("m5.large")
    assert feed.unavailable.get(spot("m5.large"), Clock().now) is not None


async def test_a_message_read_after_the_last_stream_closed_goes_back_to_the_queue(
    feed: Feed,
) -> None:
    """The scheduler's stream closes while a poll is in flight; the interruption that poll then
    reads is put back, not deleted, and the next subscriber receives it."""
    async with feed.feed.subscribe(acknowledge=True):
        await until(lambda: feed.cloud.polls_started >= 1)
    feed.cloud.send_message(feed.url, spot_warning("ev-1", feed.instance))
    # Read by the poll that was in flight, then put back (before the fix: deleted).
    await until(lambda: feed.cloud.messages_received == 1 and feed.cloud.queues[feed.url])
    async with feed.feed.subscribe(acknowledge=True) as subscription:
        token = await next_event(subscription)
        await feed.feed.acknowledge([AckToken.decode(token)])
    assert feed.messages_left() == 0


async def test_an_unacknowledged_event_goes_back_when_its_stream_closes(feed: Feed) -> None:
    """A subscriber that received an event and closed without acknowledging (a scheduler killed
    while acting) leaves the message on the queue for the next one; an acknowledged message is
    deleted."""
    feed.cloud.send_message(feed.url, spot_warning("ev-1", feed.instance))
    async with feed.feed.subscribe(acknowledge=True) as first:
        await next_event(first)
        assert feed.messages_left() == 1
    async with feed.feed.subscribe(acknowledge=True) as second:
        token = await next_event(second)
        assert feed.messages_left() == 1
        await feed.feed.acknowledge([AckToken.decode(token)])
        assert feed.messages_left() == 0


async def test_a_message_of_several_events_is_deleted_when_all_are_acknowledged(
    feed: Feed,
) -> None:
    """A health event naming two instances stays until both its events are acknowledged."""
    feed.cloud.send_message(feed.url, health_event("h-1", [feed.instance, "i-other"]))
    async with feed.feed.subscribe(acknowledge=True) as subscription:
        tokens = [AckToken.decode(await next_event(subscription)) for _ in range(2)]
        await feed.feed.acknowledge(tokens[:1])
        assert feed.messages_left() == 1
        await feed.feed.acknowledge(tokens[1:])
        assert feed.messages_left() == 0


async def test_a_token_from_another_replica_deletes_on_its_last_event(feed: Feed) -> None:
    """An acknowledgement this replica never handed out (another replica's, or one from before
    a restart) deletes its message when it names the message's last event, not before."""
    feed.cloud.send_message(feed.url, health_event("h-1", [feed.instance, "i-other"]))
    async with feed.feed.subscribe(acknowledge=True) as subscription:
        tokens = [AckToken.decode(await next_event(subscription)) for _ in range(2)]
    [handle] = {t.receipt_handle for t in tokens}
    await until(lambda: feed.cloud.queues[feed.url])  # put back when the stream closed
    received = await feed.cloud.receive_messages(feed.url, 0)
    assert [m.receipt_handle for m in received] == [handle]
    other_replica = InterruptionFeed(
        feed.cloud, queue="q", cluster_name="demo", unavailable=None,  # type: ignore[arg-type]
        clock=Clock(), metrics=ActuatorMetrics(),
    )  # fmt: skip
    other_replica._queue_url = feed.url
    await other_replica.acknowledge(tokens[:1])
    assert feed.messages_left() == 1
    await other_replica.acknowledge(tokens[1:])
    assert feed.messages_left() == 0


async def test_a_stream_that_does_not_acknowledge_gets_messages_deleted_on_delivery(
    feed: Feed,
) -> None:
    """A stream opened without acknowledge (clients before the field) keeps the old contract:
    the message is deleted once handed to it."""
    feed.cloud.send_message(feed.url, spot_warning("ev-1", feed.instance))
    async with feed.feed.subscribe() as subscription:
        await next_event(subscription)
        await until(lambda: feed.messages_left() == 0)


@pytest.mark.parametrize(
    "text",
    ["", "0/1/", "1/1/rh", "x/1/rh", "0/99999/rh", "\u0660/1/rh", "0/1/" + "h" * 3000],
)
def test_malformed_ack_tokens_are_refused(text: str) -> None:
    """A token WatchCloudEvents never made (empty handle, index past count, non-ASCII or long
    digits, oversized) is a CloudEventError, not a crash."""
    with pytest.raises(CloudEventError):
        AckToken.decode(text)
