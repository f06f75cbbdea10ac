"""A scriptable Kubernetes API endpoint for one collection, served over real HTTP on loopback.

It speaks the list/watch wire protocol (paginated list with resourceVersion and continue,
watch streams of JSON lines replayed from a resourceVersion, BOOKMARK and ERROR events) and
lets a test inject the faults a real API server produces only under load: cut streams, 410
Gone (as HTTP status or ERROR event), 429 with Retry-After, garbage lines, silence.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_CUT = object()  # close the connection abruptly
_END = object()  # end the stream cleanly


@dataclass
class _Failure:
    status: int
    headers: dict[str, str]
    body: dict[str, Any] | bytes


@dataclass
class ApiServerDouble:
    """One collection (`path`) of `kind` objects; `url` is set once started."""

    path: str
    kind: str
    api_version: str = "v1"
    token: str = "test-token"
    url: str = ""
    resource_version: int = 100
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    compacted_rv: int = 0
    requests: list[dict[str, str]] = field(default_factory=list)
    watchers: list[asyncio.Queue[Any]] = field(default_factory=list)
    failures: list[_Failure] = field(default_factory=list)
    gone_as_error_event: bool = False
    expire_continue_tokens: int = 0
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> ApiServerDouble:
        app = web.Application()
        app.router.add_get(self.path, self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for queue in self.watchers:
            queue.put_nowait(_CUT)
        assert self._runner is not None
        await self._runner.cleanup()

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "double", "user": {"token": self.token}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": "double"}}],
            "current-context": "double",
        }

    # -- mutations, as the API server would make them -----------------------------------------

    def _record(self, event_type: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.resource_version += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("kind", self.kind)
        stored.setdefault("apiVersion", self.api_version)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        self.history.append((self.resource_version, event_type, stored))
        for queue in self.watchers:
            queue.put_nowait({"type": event_type, "object": stored})
        return stored

    def create(self, name: str, namespace: str | None = "default", **spec: Any) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
        if namespace:
            metadata["namespace"] = namespace
        obj = {"metadata": metadata, "spec": dict(spec)}
        stored = self._record("ADDED", obj)
        self.objects[_key(stored)] = stored
        return stored

    def update(self, name: str, namespace: str | None = "default", **spec: Any) -> dict[str, Any]:
        key = f"{namespace}/{name}" if namespace else name
        obj = copy.deepcopy(self.objects[key])
        obj["spec"].update(spec)
        stored = self._record("MODIFIED", obj)
        self.objects[key] = stored
        return stored

    def delete(self, name: str, namespace: str | None = "default") -> None:
        key = f"{namespace}/{name}" if namespace else name
        obj = self.objects.pop(key)
        self._record("DELETED", obj)

    # -- faults ---------------------------------------------------------------------------------

    def compact(self) -> None:
        """Forget the history: watching from any older resourceVersion now gets 410 Gone."""
        self.compacted_rv = self.resource_version

    def bookmark(self) -> None:
        """Send a BOOKMARK at a new resourceVersion to every open watch (as after a write to
        another resource sharing the same etcd)."""
        self.resource_version += 1
        for queue in self.watchers:
            queue.put_nowait(
                {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": self.kind,
                        "apiVersion": self.api_version,
                        "metadata": {"resourceVersion": str(self.resource_version)},
                    },
                }
            )

    def send_raw(self, line: bytes | dict[str, Any]) -> None:
        for queue in self.watchers:
            queue.put_nowait(line)

    def cut_streams(self) -> None:
        """Close every open watch connection abruptly."""
        for queue in self.watchers:
            queue.put_nowait(_CUT)

    def end_streams(self) -> None:
        """End every open watch cleanly (as the server does at timeoutSeconds)."""
        for queue in self.watchers:
            queue.put_nowait(_END)

    def fail_next(
        self, status: int, headers: dict[str, str] | None = None, reason: str = "Injected"
    ) -> None:
        """The next request gets `status` (queued: several calls fail several requests)."""
        body = {"kind": "Status", "status": "Failure", "code": status, "reason": reason}
        self.failures.append(_Failure(status, headers or {}, body))

    def answer_next_with(self, raw_body: bytes, status: int = 200) -> None:
        """The next request gets `raw_body` verbatim (e.g. a proxy's HTML error page)."""
        self.failures.append(_Failure(status, {"Content-Type": "text/html"}, raw_body))

    def watch_requests(self) -> list[dict[str, str]]:
        return [r for r in self.requests if r.get("watch") == "true"]

    def list_requests(self) -> list[dict[str, str]]:
        return [r for r in self.requests if r.get("watch") != "true"]

    # -- wire -------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append(query)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure.body, bytes):
                return web.Response(
                    body=failure.body, status=failure.status, headers=failure.headers
                )
            return web.json_response(failure.body, status=failure.status, headers=failure.headers)
        if query.get("watch") == "true":
            return await self._watch(request, int(query["resourceVersion"]))
        return self._list(query)

    def _list(self, query: dict[str, str]) -> web.StreamResponse:
        limit = int(query.get("limit", "0")) or len(self.objects) or 1
        continue_token = query.get("continue")
        if continue_token:
            if self.expire_continue_tokens:
                self.expire_continue_tokens -= 1
                return _gone_response()
            offset_text, rv = continue_token.split(":")
            offset = int(offset_text)
        else:
            offset, rv = 0, str(self.resource_version)
        # Pages of one list all show the list's snapshot: sort for a stable order.
        ordered = [self.objects[k] for k in sorted(self.objects)]
        page = [_without_kind(o) for o in ordered[offset : offset + limit]]
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if offset + limit < len(ordered):
            metadata["continue"] = f"{offset + limit}:{rv}"
        return web.json_response(
            {
                "kind": f"{self.kind}List",
                "apiVersion": self.api_version,
                "metadata": metadata,
                "items": page,
            }
        )

    async def _watch(self, request: web.Request, since_rv: int) -> web.StreamResponse:
        if since_rv < self.compacted_rv:
            if not self.gone_as_error_event:
                return _gone_response()
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(
                json.dumps({"type": "ERROR", "object": _gone_status()}).encode() + b"\n"
            )
            await response.write_eof()
            return response
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for rv, event_type, obj in self.history:
            if rv > since_rv:
                queue.put_nowait({"type": event_type, "object": obj})
        self.watchers.append(queue)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            while True:
                item = await queue.get()
                if item is _CUT:
                    if request.transport is not None:
                        request.transport.close()
                    return response
                if item is _END:
                    await response.write_eof()
                    return response
                line = item if isinstance(item, bytes) else json.dumps(item).encode() + b"\n"
                await response.write(line)
        except (ConnectionResetError, asyncio.CancelledError):
            return response
        finally:
            self.watchers.remove(queue)


def _key(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    return (
        f"{metadata['namespace']}/{metadata['name']}"
        if metadata.get("namespace")
        else metadata["name"]
    )


def _without_kind(obj: dict[str, Any]) -> dict[str, Any]:
    # Real list items carry no kind/apiVersion.
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _gone_status() -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too old resource version",
        "reason": "Expired",
        "code": 410,
    }


def _gone_response() -> web.Response:
    return web.json_response(_gone_status(), status=410)
