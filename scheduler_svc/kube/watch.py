"""List-then-watch of one Kubernetes resource, resilient to every way a watch ends.

The loop (after kopf and client-go's reflector):

1. LIST the collection (paginated), keep the list's resourceVersion and hand the consumer a
   `Synced` snapshot: every object that exists now. The consumer replaces what it held, so an
   object deleted while we were not watching disappears too.
2. WATCH from that resourceVersion with `allowWatchBookmarks=true`; advance the resourceVersion
   on every event, BOOKMARK included, and hand ADDED/MODIFIED/DELETED to the consumer as
   `ObjectEvent`s.
3. When the stream ends (server timeout, connection cut, no bytes for longer than the
   inactivity timeout), watch again from the last resourceVersion: the server replays what we
   missed, nothing is lost.
4. 410 Gone (as the HTTP status, or as an ERROR event in the stream) means the resourceVersion
   is too old to replay from: go back to 1.
5. Other failures back off 1, 1, 2, 3, 5, 8 … seconds (capped, with jitter); 429 waits what its
   Retry-After says.

Objects stay raw JSON dicts (`KubeObject`): generated client models are slow to build, untyped
and heavy; `scheduler_svc.kube.convert` turns the dicts into the core's dataclasses.
One undecodable line or one object the consumer chokes on is logged and skipped; the loop never
dies of it. The loop runs until cancelled.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import aiohttp
import structlog

from scheduler_svc.kube.client import KubeApiClient
from scheduler_svc.kube.events import (
    EventType,
    ObjectEvent,
    Sleep,
    Synced,
    WatchEvent,
    WatchHandler,
)
from scheduler_svc.kube.resources import KubeObject, Resource, resource_version_of

log = structlog.get_logger(__name__)

_OBJECT_EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """Timing of the watch loop.

    `inactivity_timeout_seconds` is slightly longer than the API server's bookmark interval
    (about 60 s): a stream that stayed silent that long is dead even if its socket is not.
    `server_timeout_seconds` asks the server to end each watch after that long, so connections
    are spread over API server replicas over time (client-go does 5-10 min).
    """

    inactivity_timeout_seconds: float = 75.0
    server_timeout_seconds: int = 300
    list_page_size: int = 500
    list_timeout_seconds: float = 60.0
    connect_timeout_seconds: float = 10.0
    backoff_max_seconds: float = 30.0
    jitter_ratio: float = 0.2

    def __post_init__(self) -> None:
        if self.inactivity_timeout_seconds <= 0:
            raise ValueError("inactivity_timeout_seconds must be positive")
        if self.list_page_size <= 0:
            raise ValueError("list_page_size must be positive")
        if not 0 <= self.jitter_ratio < 1:
            raise ValueError("jitter_ratio must be in [0, 1)")


class Backoff:
    """Fibonacci delays 1, 1, 2, 3, 5, 8 … seconds, capped, each scaled by a random jitter.

    Jitter (a factor in [1 - ratio, 1 + ratio]) keeps many watchers that failed together from
    retrying together.
    """

    def __init__(
        self, *, max_seconds: float, jitter_ratio: float, rng: Callable[[], float] = random.random
    ) -> None:
        self._max_seconds = max_seconds
        self._jitter_ratio = jitter_ratio
        self._rng = rng
        self._previous = 0.0
        self._current = 1.0

    def next_delay_seconds(self) -> float:
        """The next delay in the sequence, jittered; advances the sequence."""
        base = min(self._current, self._max_seconds)
        self._previous, self._current = self._current, self._previous + self._current
        factor = 1.0 + self._jitter_ratio * (2.0 * self._rng() - 1.0)
        return base * factor

    def reset(self) -> None:
        """Start again from 1 s (after a success)."""
        self._previous, self._current = 0.0, 1.0


class _GoneError(Exception):
    """The resourceVersion (or list continue token) expired: relist."""


class _TooManyRequestsError(Exception):
    def __init__(self, retry_after_seconds: float | None) -> None:
        super().__init__(f"429 Too Many Requests, Retry-After={retry_after_seconds}")
        self.retry_after_seconds = retry_after_seconds


class _InvalidEventError(Exception):
    """A watch line that is not a usable event; skipped."""


class _RequestFailedError(Exception):
    """A non-2xx answer other than 410/429, or an ERROR event other than 410."""


class ResourceWatch:
    """Keeps `handler` fed with the state of one resource, forever (until cancelled).

    `handler` is called synchronously, in order: first a `Synced` with every object, then one
    `ObjectEvent` per change; after a relist, a new `Synced`. An exception from `handler` is
    logged and the event skipped. `sleep` and `rng` are injectable so tests do not wait.
    """

    def __init__(
        self,
        api: KubeApiClient,
        resource: Resource,
        handler: WatchHandler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        settings: WatchSettings | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] = random.random,
        transform: Callable[[KubeObject], KubeObject] | None = None,
    ) -> None:
        """`transform` (e.g. `kube.slim.slim_pod`) is applied to each object as it is decoded,
        so a list holds one page of whole objects at a time, not all of them."""
        self._transform = transform
        self._api = api
        self._resource = resource
        self._handler = handler
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._settings = settings or WatchSettings()
        self._sleep = sleep
        self._backoff = Backoff(
            max_seconds=self._settings.backoff_max_seconds,
            jitter_ratio=self._settings.jitter_ratio,
            rng=rng,
        )
        self._resource_version: str | None = None
        self._log = log.bind(resource=str(resource))
        # Counters for metrics and tests: lists done, watch requests made, object events
        # delivered, failed attempts (each followed by a backoff or a relist).
        self.lists_completed = 0
        self.watches_started = 0
        self.events_delivered = 0
        self.failures = 0

    @property
    def resource(self) -> Resource:
        return self._resource

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list, event or bookmark); None before the first list."""
        return self._resource_version

    async def run(self) -> NoReturn:
        """List, then watch, and recover from every failure; returns only by cancellation."""
        while True:
            try:
                if self._resource_version is None:
                    await self._list()
                    self._backoff.reset()
                received_any = await self._watch()
                if not received_any:
                    # A stream that ends without a single line is a server or proxy refusing
                    # us politely; don't spin on it.
                    await self._sleep(self._backoff.next_delay_seconds())
            except _GoneError:
                self.failures += 1
                listing = self._resource_version is None
                self._log.info(
                    "watch_resource_version_expired",
                    resource_version=self._resource_version,
                    during_list=listing,
                )
                self._resource_version = None
                if listing:
                    # An expired continue token: the list is slower than the server's
                    # compaction. Relist, but not in a tight loop.
                    await self._sleep(self._backoff.next_delay_seconds())
            except _TooManyRequestsError as error:
                self.failures += 1
                delay = error.retry_after_seconds
                if delay is None:
                    delay = self._backoff.next_delay_seconds()
                self._log.warning("watch_throttled", retry_after_seconds=delay)
                await self._sleep(delay)
            except (
                _RequestFailedError,
                aiohttp.ClientError,
                OSError,
                TimeoutError,
                ValueError,  # an undecodable list body
            ) as error:
                self.failures += 1
                delay = self._backoff.next_delay_seconds()
                self._log.warning(
                    "watch_failed",
                    error=str(error) or type(error).__name__,
                    error_type=type(error).__name__,
                    retry_in_seconds=round(delay, 3),
                )
                await self._sleep(delay)
            except Exception:
                self.failures += 1
                # A bug of ours or a library's must not end the mirror's feed for good: log it
                # loudly and start over from a fresh list.
                delay = self._backoff.next_delay_seconds()
                self._log.exception("watch_crashed", retry_in_seconds=round(delay, 3))
                self._resource_version = None
                await self._sleep(delay)

    # -- list ---------------------------------------------------------------------------------

    async def _list(self) -> None:
        items: list[KubeObject] = []
        continue_token: str | None = None
        resource_version = ""
        while True:
            params: list[tuple[str, str]] = [("limit", str(self._settings.list_page_size))]
            if continue_token:
                params.append(("continue", continue_token))
            params.extend(self._selector_params())
            body = await self._get_text(params, client_timeout=self._list_timeout())
            metadata: dict[str, Any] = {}
            # Items are decoded and trimmed one at a time: a server that ignores `limit`
            # (one 10,000-pod body) costs its text plus trimmed objects, not every whole pod.
            for key, value in decode_list(body):
                if key == "metadata" and isinstance(value, dict):
                    metadata = value
                elif key == "items" and value is not None:
                    raise _RequestFailedError(f"list of {self._resource} returned non-list items")
                elif key == LIST_ITEM:
                    item = value
                    if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
                        # List items omit kind/apiVersion; watch events carry them: alike.
                        item.setdefault("kind", self._resource.kind)
                        item.setdefault("apiVersion", self._resource.api_version)
                        _strip(item)
                        items.append(self._transformed(item))
                    else:
                        self._log.warning("watch_list_item_invalid", item_type=type(item).__name__)
            del body
            resource_version = str(metadata.get("resourceVersion") or "")
            continue_token = metadata.get("continue") or None
            if not continue_token:
                break
        if not resource_version:
            raise _RequestFailedError(f"list of {self._resource} returned no resourceVersion")
        self._resource_version = resource_version
        self.lists_completed += 1
        self._log.info("watch_listed", objects=len(items), resource_version=resource_version)
        self._deliver(Synced(self._resource, tuple(items), resource_version))

    async def _get_text(
        self, params: list[tuple[str, str]], *, client_timeout: aiohttp.ClientTimeout
    ) -> str:
        response = await self._request(params, client_timeout=client_timeout)
        try:
            await _raise_for_status(response)
            raw = await response.read()
        finally:
            response.release()
        return raw.decode("utf-8")

    # -- watch --------------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """Watch until the stream ends; True when at least one line arrived."""
        assert self._resource_version is not None
        params: list[tuple[str, str]] = [
            ("watch", "true"),
            ("resourceVersion", self._resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._settings.server_timeout_seconds)),
            *self._selector_params(),
        ]
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self._settings.connect_timeout_seconds,
            sock_connect=self._settings.connect_timeout_seconds,
        )
        response = await self._request(params, client_timeout=timeout)
        self.watches_started += 1
        received_any = False
        try:
            await _raise_for_status(response)
            self._log.debug("watch_started", resource_version=self._resource_version)
            buffer = b""
            while True:
                try:
                    async with asyncio.timeout(self._settings.inactivity_timeout_seconds):
                        chunk = await response.content.readany()
                except TimeoutError:
                    self._log.info(
                        "watch_inactive",
                        inactivity_timeout_seconds=self._settings.inactivity_timeout_seconds,
                        resource_version=self._resource_version,
                    )
                    return True  # the resourceVersion is still good: watch again at once
                if not chunk:
                    self._log.debug("watch_ended", resource_version=self._resource_version)
                    return received_any
                buffer += chunk
                # Split lines ourselves: aiohttp's readline() rejects lines over its 64 KiB
                # limit, and one big object must not kill the stream.
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        received_any = True
                        self._backoff.reset()
                        self._handle_line(line)
        except aiohttp.ClientPayloadError as error:
            # The server or a proxy cut the stream mid-chunk: same as a clean end.
            self._log.info(
                "watch_stream_cut", error=str(error), resource_version=self._resource_version
            )
            return True
        finally:
            response.release()

    def _handle_line(self, line: bytes) -> None:
        try:
            event_type, obj = _decode_event(line)
        except _InvalidEventError as error:
            self._log.warning("watch_event_invalid", reason=str(error))
            return
        if event_type == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _GoneError(obj.get("message"))
            if code == 429:
                raise _TooManyRequestsError(_retry_after_from_status(obj))
            raise _RequestFailedError(
                f"watch ERROR event: code={code} {obj.get('reason')}: {obj.get('message')}"
            )
        resource_version = resource_version_of(obj)
        if resource_version is None:
            self._log.warning(
                "watch_event_invalid", event_type=event_type, reason="no metadata.resourceVersion"
            )
            return
        self._resource_version = resource_version
        if event_type != "BOOKMARK":
            _strip(obj)
            self.events_delivered += 1
            self._deliver(ObjectEvent(self._resource, event_type, self._transformed(obj)))

    # -- plumbing -----------------------------------------------------------------------------

    def _transformed(self, obj: KubeObject) -> KubeObject:
        if self._transform is None:
            return obj
        try:
            return self._transform(obj)
        except Exception:
            # Keep the object whole rather than lose it: consumers read it defensively.
            self._log.exception(
                "watch_transform_failed", name=(obj.get("metadata") or {}).get("name")
            )
            return obj

    def _deliver(self, event: WatchEvent) -> None:
        try:
            self._handler(event)
        except Exception:
            name = None
            if isinstance(event, ObjectEvent):
                name = (event.object.get("metadata") or {}).get("name")
            self._log.exception("watch_handler_failed", event_kind=type(event).__name__, name=name)

    def _selector_params(self) -> Iterable[tuple[str, str]]:
        if self._label_selector:
            yield ("labelSelector", self._label_selector)
        if self._field_selector:
            yield ("fieldSelector", self._field_selector)

    def _list_timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=self._settings.list_timeout_seconds,
            connect=self._settings.connect_timeout_seconds,
        )

    async def _request(
        self, params: list[tuple[str, str]], *, client_timeout: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        return await self._api.request(
            "GET",
            self._resource.collection_path(self._namespace),
            params=params,
            headers={"Accept": "application/json"},
            client_timeout=client_timeout,
        )


def _decode_event(
    line: bytes,
) -> tuple[EventType | Literal["BOOKMARK", "ERROR"], KubeObject]:
    try:
        event = json.loads(line)
    except ValueError as error:
        raise _InvalidEventError(
            f"undecodable line: {line[:200].decode(errors='replace')!r}"
        ) from error
    if not isinstance(event, dict):
        raise _InvalidEventError("event is not a JSON object")
    event_type = event.get("type")
    obj = event.get("object")
    if not isinstance(obj, dict):
        raise _InvalidEventError(f"{event_type} event without an object")
    if event_type in _OBJECT_EVENT_TYPES or event_type in ("BOOKMARK", "ERROR"):
        return event_type, obj
    raise _InvalidEventError(f"unknown event type {event_type!r}")


_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def _skip_whitespace(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


LIST_ITEM = "items[]"


def decode_list(text: str) -> Iterator[tuple[str, Any]]:
    """The members of a JSON list body (`{"metadata": …, "items": [...]}`) one at a time:
    ("metadata", value), ("kind", value) …, and (LIST_ITEM, item) once per element of an
    `items` array, each decoded only when reached, so the caller can trim an item before the
    next one exists. Raises ValueError (json.JSONDecodeError) on a body that is not a JSON
    object."""
    index = _skip_whitespace(text, 0)
    if not text.startswith("{", index):
        raise json.JSONDecodeError("a list body must be a JSON object", text, index)
    index = _skip_whitespace(text, index + 1)
    if text.startswith("}", index):
        return
    while True:
        key, index = _DECODER.raw_decode(text, index)
        if not isinstance(key, str):
            raise json.JSONDecodeError("object key expected", text, index)
        index = _skip_whitespace(text, index)
        if not text.startswith(":", index):
            raise json.JSONDecodeError("':' expected", text, index)
        index = _skip_whitespace(text, index + 1)
        if key == "items" and text.startswith("[", index):
            index = yield from _array_items(text, index)
        else:
            value, index = _DECODER.raw_decode(text, index)
            yield key, value
        index = _expect_separator(text, index, "}")
        if index < 0:
            return


def _array_items(text: str, index: int) -> Generator[tuple[str, Any], None, int]:
    """Yield each element of the array starting at text[index] ("["); return the index after
    its "]"."""
    index = _skip_whitespace(text, index + 1)
    if text.startswith("]", index):
        return index + 1
    while True:
        item, index = _DECODER.raw_decode(text, index)
        yield LIST_ITEM, item
        del item
        index = _expect_separator(text, index, "]")
        if index < 0:
            return -index


def _expect_separator(text: str, index: int, closing: str) -> int:
    """After a value: the index of the next value after a ",", or minus the index after
    `closing` when the container ends there."""
    index = _skip_whitespace(text, index)
    if text.startswith(closing, index):
        return -(index + 1)
    if not text.startswith(",", index):
        raise json.JSONDecodeError(f"',' or '{closing}' expected", text, index)
    return _skip_whitespace(text, index + 1)


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _strip(obj: KubeObject) -> None:
    """Drop managedFields and kubectl's last-applied copy: often most of an object's bytes,
    and nothing the scheduler reads. (Memory: the mirror holds every pod.)"""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(_LAST_APPLIED, None)


async def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    if 200 <= response.status < 300:
        return
    body = (await response.read())[:500].decode(errors="replace")
    if response.status == 410:
        raise _GoneError(body)
    if response.status == 429:
        raise _TooManyRequestsError(_parse_retry_after(response.headers.get("Retry-After")))
    raise _RequestFailedError(f"HTTP {response.status}: {body}")


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header; None when absent or not a number of seconds."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(seconds, 0.0)


def _retry_after_from_status(status: KubeObject) -> float | None:
    details = status.get("details")
    if isinstance(details, dict):
        seconds = details.get("retryAfterSeconds")
        if isinstance(seconds, int | float):
            return float(max(seconds, 0))
    return None


async def run_watches(watches: Iterable[ResourceWatch]) -> NoReturn:
    """Run several watches concurrently until cancelled (one failing never stops the others:
    each recovers by itself)."""
    async with asyncio.TaskGroup() as group:
        for watch in watches:
            group.create_task(watch.run(), name=f"watch-{watch.resource}")
    raise AssertionError("watches never return")  # pragma: no cover
