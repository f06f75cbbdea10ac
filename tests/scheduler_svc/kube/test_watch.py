"""The list-then-watch loop against a scriptable API endpoint over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_svc.kube.client import KubeApiClient, api_client_from_kubeconfig
from scheduler_svc.kube.events import ObjectEvent, Synced, WatchEvent
from scheduler_svc.kube.resources import PODS
from scheduler_svc.kube.watch import Backoff, ResourceWatch, WatchSettings
from tests.polling import until
from tests.scheduler_svc.kube.apiserver_double import ApiServerDouble


class Recorder:
    def __init__(self) -> None:
        self.events: list[WatchEvent] = []

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)

    def names(self, event_type: str) -> list[str]:
        return [
            e.object["metadata"]["name"]
            for e in self.events
            if isinstance(e, ObjectEvent) and e.type == event_type
        ]

    def synced(self) -> list[Synced]:
        return [e for e in self.events if isinstance(e, Synced)]


class FakeSleep:
    """Records requested delays and returns at once, so backoff costs no wall time."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
async def server() -> AsyncIterator[ApiServerDouble]:
    async with ApiServerDouble(path="/api/v1/pods", kind="Pod") as double:
        yield double


@pytest.fixture
async def api(server: ApiServerDouble, tmp_path: Path) -> AsyncIterator[KubeApiClient]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
    api_client = await api_client_from_kubeconfig(kubeconfig)
    async with api_client:
        yield api_client


class Running:
    """A ResourceWatch running in a task for the duration of a test."""

    def __init__(self, watch: ResourceWatch) -> None:
        self.watch = watch
        self.task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> ResourceWatch:
        self.task = asyncio.create_task(self.watch.run())
        return self.watch

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


def make_watch(
    api: KubeApiClient,
    recorder: Recorder,
    sleep: FakeSleep | None = None,
    settings: WatchSettings | None = None,
) -> ResourceWatch:
    return ResourceWatch(
        api,
        PODS,
        recorder,
        settings=settings or WatchSettings(jitter_ratio=0.0),
        sleep=sleep or FakeSleep(),
        rng=lambda: 0.5,
    )


async def test_list_then_watch_delivers_existing_objects_then_every_change(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """The consumer gets a Synced snapshot of the existing objects, then each change in order."""
    server.create("a")
    server.create("b")
    recorder = Recorder()
    async with Running(make_watch(api, recorder)) as watch:
        await until(lambda: len(server.watch_requests()) == 1)
        server.create("c")
        server.update("a", image="v2")
        server.delete("b")
        await until(lambda: len(recorder.events) == 4)
        assert watch.resource_version == str(server.resource_version)
        assert (watch.events_delivered, watch.failures) == (3, 0)

    first = recorder.events[0]
    assert isinstance(first, Synced)
    assert [o["metadata"]["name"] for o in first.objects] == ["a", "b"]
    assert all(o["kind"] == "Pod" and o["apiVersion"] == "v1" for o in first.objects)
    assert [(e.type, e.object["metadata"]["name"]) for e in recorder.events[1:]] == [  # type: ignore[union-attr]
        ("ADDED", "c"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    watch_request = server.watch_requests()[0]
    assert watch_request["resourceVersion"] == first.resource_version
    assert watch_request["allowWatchBookmarks"] == "true"


async def test_a_cut_stream_resumes_from_the_last_resource_version_and_misses_nothing(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """After the connection is cut, the watch resumes from its last resourceVersion: changes
    made during the gap arrive once, without a relist."""
    recorder = Recorder()
    async with Running(make_watch(api, recorder)) as watch:
        await until(lambda: len(server.watch_requests()) == 1)
        server.create("before-cut")
        await until(lambda: recorder.names("ADDED") == ["before-cut"])
        version_at_cut = watch.resource_version
        server.cut_streams()
        server.create("during-gap")  # recorded while no watcher may be connected
        server.delete("before-cut")
        await until(lambda: len(server.watch_requests()) == 2)
        await until(lambda: recorder.names("DELETED") == ["before-cut"])
        assert watch.lists_completed == 1

    assert server.watch_requests()[1]["resourceVersion"] == version_at_cut
    assert recorder.names("ADDED") == ["before-cut", "during-gap"]
    assert len(server.list_requests()) == 1


async def test_a_stream_ended_by_the_server_is_rewatched_at_once(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A watch the server ends cleanly (its timeoutSeconds) is reopened from the last
    resourceVersion without backing off."""
    sleep = FakeSleep()
    recorder = Recorder()
    async with Running(make_watch(api, recorder, sleep)):
        await until(lambda: len(server.watch_requests()) == 1)
        server.create("x")
        await until(lambda: recorder.names("ADDED") == ["x"])
        server.end_streams()
        await until(lambda: len(server.watch_requests()) == 2)

    assert server.watch_requests()[1]["resourceVersion"] == str(server.resource_version)
    assert sleep.delays == []


async def test_bookmarks_advance_the_resource_version_without_delivering_an_event(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A BOOKMARK moves the resourceVersion forward, delivers nothing, and the next watch starts
    from it."""
    recorder = Recorder()
    async with Running(make_watch(api, recorder)) as watch:
        await until(lambda: len(server.watch_requests()) == 1)
        server.bookmark()
        await until(lambda: watch.resource_version == str(server.resource_version))
        bookmark_version = watch.resource_version
        server.cut_streams()
        await until(lambda: len(server.watch_requests()) == 2)

    assert [type(e) for e in recorder.events] == [Synced]
    assert server.watch_requests()[1]["resourceVersion"] == bookmark_version


@pytest.mark.parametrize("gone_as_error_event", [False, True])
async def test_gone_relists_and_the_snapshot_drops_objects_deleted_during_the_gap(
    server: ApiServerDouble, api: KubeApiClient, gone_as_error_event: bool
) -> None:
    """On 410 Gone (HTTP status or ERROR event) the watch relists and delivers a Synced
    snapshot without the objects deleted while it could not watch."""
    server.gone_as_error_event = gone_as_error_event
    server.create("stays")
    server.create("deleted-in-gap")
    recorder = Recorder()
    async with Running(make_watch(api, recorder)) as watch:
        await until(lambda: len(server.watch_requests()) == 1)
        server.cut_streams()
        server.delete("deleted-in-gap")
        server.create("created-in-gap")
        server.compact()  # the history of the gap is gone
        await until(lambda: len(recorder.synced()) == 2)
        assert watch.lists_completed == 2

    second = recorder.synced()[1]
    assert sorted(o["metadata"]["name"] for o in second.objects) == ["created-in-gap", "stays"]
    assert second.resource_version == str(server.resource_version)


async def test_too_many_requests_waits_what_retry_after_says(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A 429 answer makes the watch wait exactly its Retry-After seconds before trying again."""
    server.fail_next(429, {"Retry-After": "7"}, reason="TooManyRequests")
    sleep = FakeSleep()
    recorder = Recorder()
    async with Running(make_watch(api, recorder, sleep)):
        await until(lambda: len(recorder.synced()) == 1)

    assert sleep.delays == [7.0]
    assert len(server.list_requests()) == 2


async def test_failures_back_off_one_one_two_three_five_then_reset_after_success(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """Consecutive server errors back off 1, 1, 2, 3, 5 s; after a success the next failure
    waits 1 s again."""
    for _ in range(5):
        server.fail_next(500)
    sleep = FakeSleep()
    recorder = Recorder()
    async with Running(make_watch(api, recorder, sleep)) as watch:
        await until(lambda: len(recorder.synced()) == 1)
        await until(lambda: len(server.watch_requests()) == 1)
        server.fail_next(503)
        server.cut_streams()
        # The rewatch fails once with 503, then succeeds.
        await until(lambda: len(server.watch_requests()) >= 3)

    assert sleep.delays == [1.0, 1.0, 2.0, 3.0, 5.0, 1.0]
    assert watch.failures == 6


def test_backoff_is_fibonacci_capped_and_jittered_within_its_ratio() -> None:
    """Backoff delays follow 1, 1, 2, 3, 5, 8 … up to the cap, each within ±jitter of the base."""
    exact = Backoff(max_seconds=10, jitter_ratio=0.0)
    assert [exact.next_delay_seconds() for _ in range(8)] == [1, 1, 2, 3, 5, 8, 10, 10]
    low = Backoff(max_seconds=10, jitter_ratio=0.2, rng=lambda: 0.0)
    high = Backoff(max_seconds=10, jitter_ratio=0.2, rng=lambda: 1.0)
    assert [round(low.next_delay_seconds(), 6) for _ in range(3)] == [0.8, 0.8, 1.6]
    assert [round(high.next_delay_seconds(), 6) for _ in range(3)] == [1.2, 1.2, 2.4]


async def test_bad_lines_and_a_failing_handler_skip_one_event_and_keep_watching(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """An undecodable line, an event without resourceVersion and a handler exception each
    lose only that event; later events still arrive."""
    received: list[str] = []

    def handler(event: WatchEvent) -> None:
        if isinstance(event, ObjectEvent):
            name = event.object["metadata"]["name"]
            if name == "poison":
                raise ValueError("handler cannot use this object")
            received.append(name)

    watch = ResourceWatch(api, PODS, handler, sleep=FakeSleep())
    async with Running(watch):
        await until(lambda: len(server.watch_requests()) == 1)
        server.send_raw(b"{not json\n")
        server.send_raw({"type": "ADDED", "object": {"metadata": {"name": "no-rv"}}})
        server.send_raw({"type": "SURPRISE", "object": {"metadata": {"resourceVersion": "1"}}})
        server.create("poison")
        server.create("fine")
        await until(lambda: received == ["fine"])

    assert len(server.watch_requests()) == 1


async def test_a_silent_stream_is_abandoned_after_the_inactivity_timeout(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A watch that receives nothing for the inactivity timeout is reopened from the same
    resourceVersion, without relisting."""
    recorder = Recorder()
    settings = WatchSettings(inactivity_timeout_seconds=0.2, jitter_ratio=0.0)
    async with Running(make_watch(api, recorder, settings=settings)) as watch:
        await until(lambda: len(server.watch_requests()) >= 2)
        assert watch.lists_completed == 1

    first, second = server.watch_requests()[:2]
    assert first["resourceVersion"] == second["resourceVersion"]


async def test_a_paginated_list_collects_every_page_and_restarts_when_its_token_expires(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A list split into pages yields one Synced with every object; an expired continue token
    restarts the list from the first page."""
    for index in range(5):
        server.create(f"pod-{index}")
    server.expire_continue_tokens = 1
    recorder = Recorder()
    settings = WatchSettings(list_page_size=2, jitter_ratio=0.0)
    async with Running(make_watch(api, recorder, settings=settings)):
        await until(lambda: len(recorder.synced()) == 1)

    names = [o["metadata"]["name"] for o in recorder.synced()[0].objects]
    assert names == [f"pod-{i}" for i in range(5)]
    # First attempt: page 1, page 2 (expired); second attempt: three pages.
    assert len(server.list_requests()) == 5


async def test_an_object_larger_than_a_stream_buffer_line_is_delivered(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """An event line of several hundred KiB (beyond aiohttp's readline limit) is delivered whole."""
    recorder = Recorder()
    async with Running(make_watch(api, recorder)):
        await until(lambda: len(server.watch_requests()) == 1)
        server.create("big", blob="x" * 400_000)
        await until(lambda: recorder.names("ADDED") == ["big"])

    event = recorder.events[-1]
    assert isinstance(event, ObjectEvent)
    assert len(event.object["spec"]["blob"]) == 400_000
    assert len(json.dumps(event.object)) > 400_000


async def test_an_undecodable_list_answer_is_retried_after_backoff(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """A list answered with something that is not JSON (a proxy's HTML page) is retried after
    a backoff, and the watch then syncs."""
    server.answer_next_with(b"<html>502 Bad Gateway</html>")
    server.create("a")
    sleep = FakeSleep()
    recorder = Recorder()
    async with Running(make_watch(api, recorder, sleep)):
        await until(lambda: len(recorder.synced()) == 1)

    assert sleep.delays == [1.0]
    assert [o["metadata"]["name"] for o in recorder.synced()[0].objects] == ["a"]


async def test_managed_fields_and_last_applied_configuration_are_dropped(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """Objects reach the consumer without managedFields and kubectl's last-applied annotation
    (memory), other annotations kept, from the list and from watch events alike."""
    heavy_metadata = {
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            "team": "web",
        },
    }
    server.create("listed")
    server.objects["default/listed"]["metadata"].update(heavy_metadata)
    recorder = Recorder()
    async with Running(make_watch(api, recorder)):
        await until(lambda: len(server.watch_requests()) == 1)
        server.send_raw(
            {
                "type": "ADDED",
                "object": {
                    "metadata": {"name": "watched", "resourceVersion": "500", **heavy_metadata}
                },
            }
        )
        await until(lambda: recorder.names("ADDED") == ["watched"])

    listed = recorder.synced()[0].objects[0]
    watched = recorder.events[-1]
    assert isinstance(watched, ObjectEvent)
    for obj in (listed, watched.object):
        assert "managedFields" not in obj["metadata"]
        assert obj["metadata"]["annotations"] == {"team": "web"}


async def test_a_transform_trims_listed_and_watched_objects_as_they_arrive(
    server: ApiServerDouble, api: KubeApiClient
) -> None:
    """With a transform, the Synced list and every watch event carry transformed objects
    (e.g. slimmed pods), never the whole ones."""
    server.create("a", dnsPolicy="ClusterFirst", nodeName="n1")
    recorder = Recorder()

    def trim(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "dnsPolicy"}}

    watch = ResourceWatch(
        api,
        PODS,
        recorder,
        settings=WatchSettings(jitter_ratio=0.0),
        sleep=FakeSleep(),
        transform=trim,
    )
    async with Running(watch):
        await until(lambda: len(server.watch_requests()) == 1)
        server.create("b", dnsPolicy="Default", nodeName="n2")
        await until(lambda: len(recorder.events) == 2)

    synced, added = recorder.events
    assert isinstance(synced, Synced)
    assert isinstance(added, ObjectEvent)
    assert synced.objects[0]["spec"] == {"nodeName": "n1"}
    assert added.object["spec"] == {"nodeName": "n2"}
