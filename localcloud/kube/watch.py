"""Watch events and watchers: the change log of one resource and the subscriptions to it.

A `Bucket` holds the objects of one (group, plural) and the window of their recent changes; the
store appends to its log and wakes it. A `Watcher` reads the log from its cursor on; see
`localcloud.kube.store` for the contract clients rely on.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

from localcloud.kube.errors import Gone
from localcloud.kube.objects import JsonObject, json_bytes
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import FieldSelector, LabelSelector

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"


class WatchEvent:
    """One change: `type`, `object`, its `resource_version`; unpacks as `(type, object)`."""

    __slots__ = ("_line", "object", "previous", "resource_version", "type")

    def __init__(
        self,
        type: str,
        obj: JsonObject,
        resource_version: int,
        previous: JsonObject | None = None,
    ) -> None:
        self.type = type
        self.object = obj
        self.resource_version = resource_version
        self.previous = previous
        self._line: bytes | None = None

    def __iter__(self) -> Any:
        return iter((self.type, self.object))

    def __repr__(self) -> str:
        meta = self.object.get("metadata", {})
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        return f"WatchEvent({self.type}, {where}, rv={self.resource_version})"

    def encoded(self) -> bytes:
        """The event as one JSON line, as the watch stream carries it (computed once)."""
        if self._line is None:
            self._line = json_bytes({"type": self.type, "object": self.object}) + b"\n"
        return self._line


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[JsonObject]
    resource_version: int


class Bucket:
    """The objects of one (group, plural) and the window of their recent changes."""

    __slots__ = ("changed", "floor_rv", "log", "objects")

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], JsonObject] = {}
        self.log: list[WatchEvent] = []
        # events with resource_version <= floor_rv may have been dropped from the log
        self.floor_rv = 0
        self.changed = asyncio.Event()

    def wake(self) -> None:
        """Wake every watcher waiting on this bucket (they re-check their position)."""
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


def _rv_of(event: WatchEvent) -> int:
    return event.resource_version


class Watcher:
    """A subscription to one resource's changes; see `localcloud.kube.store` for the contract.

    `serve` turns a stored object into what this watcher hands out (the served version, a
    copy or not)."""

    def __init__(
        self,
        serve: Callable[[JsonObject], JsonObject],
        *,
        resource_type: ResourceType,
        bucket: Bucket,
        namespace: str | None,
        cursor_rv: int,
        initial: list[WatchEvent],
        label_selector: LabelSelector,
        field_selector: FieldSelector,
    ) -> None:
        self._serve = serve
        self.resource_type = resource_type
        self._bucket = bucket
        self._namespace = namespace
        self.cursor_rv = cursor_rv
        self._pending = initial
        self._labels = label_selector
        self._fields = field_selector
        self._closed = False
        self._filtered = (
            namespace is not None or not label_selector.is_empty or not (field_selector.is_empty)
        )

    def close(self) -> None:
        """End the iteration; a `poll` waiting right now returns [] at once."""
        self._closed = True
        self._bucket.wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        while not self._closed:
            for event in await self.poll(None):
                yield event

    def _matches(self, obj: JsonObject | None) -> bool:
        if obj is None:
            return False
        if self.resource_type.from_storage is not None:
            obj = self.resource_type.from_storage(obj)
        meta = obj.get("metadata") or {}
        if self._namespace is not None and meta.get("namespace") != self._namespace:
            return False
        return self._labels.matches(meta.get("labels")) and self._fields.matches(obj)

    def _view(self, event: WatchEvent) -> WatchEvent | None:
        if not self._filtered:
            return event
        now_matches = self._matches(event.object)
        if event.type == MODIFIED:
            was_matching = self._matches(event.previous)
            if now_matches and not was_matching:
                return WatchEvent(ADDED, event.object, event.resource_version)
            if was_matching and not now_matches:
                return WatchEvent(DELETED, event.object, event.resource_version)
        return event if now_matches else None

    def _deliver(self, events: list[WatchEvent]) -> list[WatchEvent]:
        out = []
        for event in events:
            served = self._serve(event.object)
            if served is event.object:
                out.append(event)  # shared, with its encoded line cached once for all watchers
            else:
                out.append(WatchEvent(event.type, served, event.resource_version))
        return out

    def take(self) -> list[WatchEvent]:
        """The events available now, without waiting (raises Gone when fallen behind)."""
        if self._pending:
            pending, self._pending = self._pending, []
            return self._deliver(pending)
        bucket = self._bucket
        if self.cursor_rv < bucket.floor_rv:
            self._closed = True
            raise Gone(f"too old resource version: {self.cursor_rv} ({bucket.floor_rv + 1})")
        log = bucket.log
        if not log or log[-1].resource_version <= self.cursor_rv:
            return []
        start = bisect.bisect_right(log, self.cursor_rv, key=_rv_of)
        events = log[start:]
        self.cursor_rv = events[-1].resource_version
        views = [v for v in map(self._view, events) if v is not None]
        return self._deliver(views)

    async def poll(self, timeout_seconds: float | None) -> list[WatchEvent]:
        """Wait for the next batch of events; [] when `timeout_seconds` pass with none."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while not self._closed:
            events = self.take()
            if events:
                return events
            changed = self._bucket.changed
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return []
            try:
                # not wait_for: on 3.11 it can swallow a cancellation (bpo-42130)
                async with asyncio.timeout(remaining):
                    await changed.wait()
            except TimeoutError:
                return []
        return []
