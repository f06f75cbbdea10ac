"""Watch streams over HTTP: one JSON event per line over chunked HTTP, as kube-apiserver
serves `?watch=true` (events as the stored encoding, PartialObjectMetadata or Table rows, as
`Accept` asks), with bookmarks, the initial events of a WatchList, and an ERROR event for a
version that is gone or not reached yet."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

import structlog
from aiohttp import web

from localcloud.kube.errors import ApiError, Gone, Timeout
from localcloud.kube.objects import json_bytes
from localcloud.kube.representations import Representation, partial_metadata
from localcloud.kube.resources import ResourceType
from localcloud.kube.store import Store, WatchEvent
from localcloud.kube.tables import to_table
from localcloud.kube.wire import JSON_CONTENT_TYPE, JsonObject, flag, int_param, representation_of

log = structlog.get_logger("localcloud.kube.api")

_DEFAULT_WATCH_TIMEOUT_SECONDS: Final = 1800.0


class WatchStreams:
    """The watch streams being served; `close()` ends every one of them."""

    def __init__(
        self,
        store: Store,
        *,
        bookmark_interval_seconds: float,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._bookmark_interval_seconds = bookmark_interval_seconds
        self._clock = clock
        self._closing = False
        self._watchers: set[Any] = set()

    @property
    def open_count(self) -> int:
        """How many watch streams are being served right now."""
        return len(self._watchers)

    def close(self) -> None:
        self._closing = True
        for watcher in list(self._watchers):
            watcher.close()

    async def serve(  # noqa: PLR0912, PLR0915 - the watch stream's states in one place
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        query = request.query
        timeout = int_param(query.get("timeoutSeconds"), "timeoutSeconds")
        timeout_seconds = float(timeout) if timeout else _DEFAULT_WATCH_TIMEOUT_SECONDS
        bookmarks = flag(query.get("allowWatchBookmarks"))
        send_initial = flag(query.get("sendInitialEvents"))
        representation = representation_of(request, watch=True)
        table = representation is Representation.TABLE
        metadata_only = representation is Representation.METADATA
        include = query.get("includeObject", "PartialObjectMetadata")
        failure: ApiError | None = None
        watcher = None
        try:
            watcher = self._store.watch(
                rt,
                namespace,
                query.get("resourceVersion") or None,
                query.get("labelSelector", ""),
                query.get("fieldSelector", ""),
                copy=False,
            )
        except (Gone, Timeout) as error:
            failure = error  # sent as an ERROR event on a 200 stream, as kube-apiserver does
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON_CONTENT_TYPE})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if failure is not None or watcher is None:
            with contextlib.suppress(ConnectionResetError):
                await response.write(_error_line(failure or Gone("watch failed")))
                await response.write_eof()
            return response
        self._watchers.add(watcher)
        deadline = time.monotonic() + timeout_seconds
        columns_sent = False
        try:
            if send_initial:
                # WatchList: the current objects, then a bookmark marking their end
                initial = watcher.take()
                if table:
                    await response.write(
                        b"".join(
                            self._table_event(rt, e, include, i == 0) for i, e in enumerate(initial)
                        )
                    )
                    columns_sent = bool(initial)
                else:
                    await response.write(b"".join(_event_line(e, metadata_only) for e in initial))
                await response.write(_bookmark_line(rt, watcher.cursor_rv, initial_end=True))
            while not self._closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    events = await watcher.poll(min(remaining, self._bookmark_interval_seconds))
                except Gone as error:
                    await response.write(_error_line(error))
                    break
                if request.transport is None or request.transport.is_closing():
                    break
                if events:
                    if table:
                        lines = []
                        for event in events:
                            lines.append(self._table_event(rt, event, include, not columns_sent))
                            columns_sent = True
                        await response.write(b"".join(lines))
                    else:
                        await response.write(
                            b"".join(_event_line(e, metadata_only) for e in events)
                        )
                if not events and bookmarks and time.monotonic() < deadline:
                    # nothing of this resource is pending (poll just came back empty, with no
                    # await since), so the global version is a safe, fresher resume point
                    watcher.cursor_rv = max(watcher.cursor_rv, self._store.resource_version)
                    await response.write(_bookmark_line(rt, watcher.cursor_rv))
            await response.write_eof()
        except ConnectionResetError:
            log.debug("kube_watch_client_gone", resource=rt.key)  # the client hung up: done
        finally:
            watcher.close()
            self._watchers.discard(watcher)
        return response

    def _table_event(
        self, rt: ResourceType, event: WatchEvent, include: str, columns: bool
    ) -> bytes:
        table = to_table(
            rt,
            [event.object],
            self._clock(),
            resource_version=str(event.resource_version),
            include_object=include,
            with_columns=columns,
        )
        return json_bytes({"type": event.type, "object": table}) + b"\n"


def _event_line(event: WatchEvent, metadata_only: bool) -> bytes:
    """One watch event as its JSON line: the stored encoding, or only the object's metadata."""
    if not metadata_only:
        return event.encoded()
    line = {"type": event.type, "object": partial_metadata(event.object)}
    return json_bytes(line) + b"\n"


def _error_line(error: ApiError) -> bytes:
    return json_bytes({"type": "ERROR", "object": error.to_status()}) + b"\n"


def _bookmark_line(rt: ResourceType, resource_version: int, *, initial_end: bool = False) -> bytes:
    metadata: JsonObject = {"resourceVersion": str(resource_version)}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}
    return json_bytes({"type": "BOOKMARK", "object": obj}) + b"\n"
