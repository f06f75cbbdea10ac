"""The Kubernetes REST API over aiohttp, in front of a `Store`.

Routes: `/version`, `/healthz` (`/livez`, `/readyz`) without auth; everything else needs
`Authorization: Bearer <token>` (401 Status otherwise). `/api`, `/api/v1`, `/apis`,
`/apis/<group>`, `/apis/<group>/<version>` are discovery; resource paths are

    /api/v1[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]
    /apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]

with GET (get, list, `watch=true` streams one JSON event per line over chunked HTTP), POST
(create; pods/binding, pods/eviction), PUT (update; /status, /scale), PATCH (merge, JSON,
strategic merge; `application/apply-patch+yaml` is server-side apply, see below), DELETE (object
or collection). Query booleans are accepted in any case (`watch=True`, `watch=1`). Every error
is a `Status` object. Reads are answered as their `Accept` header asks (`representations`): JSON,
a meta.k8s.io/v1 Table, PartialObjectMetadata or YAML.
Lists honour `limit`/`continue` as kube-apiserver does: a page of at most `limit` items in
(namespace, name) order, `metadata.continue` and `remainingItemCount` while more follow, every
page reporting the first page's resourceVersion; later pages show the objects as they were at
that version (one snapshot, rebuilt from the retained change log), and a watch from it replays
whatever changed since. A token from before a compaction is 410 Expired, a malformed one 400.
`resourceVersion` with `resourceVersionMatch` (Exact: that snapshot; NotOlderThan: now; a version
not yet reached: 504) is honoured as kube-apiserver does. `/openapi/v2` and
`/openapi/v3` answer 404, and kubectl then falls back to its compiled-in types.

Server-side apply (`kubectl apply --server-side`) needs `fieldManager` (400 otherwise), creates
when absent and keeps field ownership in `metadata.managedFields` (`managed_fields`): 409 with
the conflicts in `details.causes` unless `force=true`, fields dropped from a manager's applied
configuration removed when no other manager owns them. Every other write records an Update
entry for its `fieldManager`, or the user agent's first word as kube-apiserver derives it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

import structlog
import yaml
from aiohttp import web

from localcloud.kube import discovery, managed_fields, openapi
from localcloud.kube.apply import shape_of
from localcloud.kube.errors import (
    ApiError,
    BadRequest,
    Gone,
    InternalError,
    MethodNotAllowed,
    NotFound,
    Timeout,
    Unauthorized,
    UnsupportedMediaType,
    not_found,
)
from localcloud.kube.managed_fields import Writer, check_manager, default_manager, require_manager
from localcloud.kube.objects import format_timestamp, from_json, json_bytes
from localcloud.kube.protobuf import decode_object
from localcloud.kube.representations import (
    Representation,
    negotiate,
    partial_metadata,
    partial_metadata_list,
    yaml_bytes,
)
from localcloud.kube.resources import ResourceType
from localcloud.kube.store import Store, WatchEvent, apply_patch, copy_json
from localcloud.kube.tables import to_table

JsonObject = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

log = structlog.get_logger("localcloud.kube.api")

# the one user every token review and whoami names (one bearer token, all-powerful)
ADMIN_USER: Final = "localcloud:admin"
_PUBLIC_PATHS: Final = frozenset({"/version", "/healthz", "/livez", "/readyz"})
_PATCH_TYPES: Final = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_DEFAULT_WATCH_TIMEOUT_SECONDS: Final = 1800.0
_JSON: Final = "application/json"
_CONTINUE_VERSION: Final = "localcloud/v1"


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("true", "1", "yes")


def _int(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as error:
        raise BadRequest(f"invalid value for {name}: {value!r}") from error


def _list_key(obj: JsonObject) -> tuple[str, str]:
    """Where an object sits in a list: the store returns them in this order."""
    metadata = obj["metadata"]
    return str(metadata.get("namespace", "")), str(metadata["name"])


@dataclass(frozen=True)
class _Page:
    """One page of a list: `items` after the continue token's key, at most `limit` of them."""

    items: list[JsonObject]
    resource_version: int
    token_resource_version: int | None
    next_after: tuple[str, str] | None
    remaining: int

    @classmethod
    def of(cls, query: Mapping[str, str], items: list[JsonObject], current_rv: int) -> _Page:
        limit = _int(query.get("limit"), "limit") or 0
        token = query.get("continue", "")
        rv, token_rv = current_rv, None
        if token:
            token_rv, after = _decode_continue(token)
            rv = token_rv
            items = [o for o in items if _list_key(o) > after]
        if limit <= 0 or len(items) <= limit:
            return cls(items, rv, token_rv, None, 0)
        page = items[:limit]
        return cls(page, rv, token_rv, _list_key(page[-1]), len(items) - limit)

    def metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if self.next_after is not None:
            metadata["continue"] = _encode_continue(self.resource_version, self.next_after)
            metadata["remainingItemCount"] = self.remaining
        return metadata


def _list_snapshot(query: Mapping[str, str], current_rv: int) -> int | None:
    """The resourceVersion a list must show the objects at (None: as they are now).

    A continue token's: its pages are one consistent snapshot. `resourceVersion=N` with
    `resourceVersionMatch=Exact`: N. With `NotOlderThan` (the default for N > 0), now, unless
    N is newer than this server has reached (504 Too large resource version). The apiserver's
    400s for the combinations it refuses."""
    token = query.get("continue", "")
    version = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    if token:
        if version not in ("", "0") or match:
            raise BadRequest("specifying resource version is not allowed when using continue")
        return _decode_continue(token)[0]
    if match and not version:
        raise BadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match not in ("", "Exact", "NotOlderThan"):
        raise BadRequest(
            f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", '
            '"NotOlderThan"'
        )
    if not version:
        return None
    requested = _int(version, "resourceVersion") or 0
    if match == "Exact":
        if requested == 0:
            raise BadRequest('resourceVersionMatch "Exact" is forbidden for resourceVersion "0"')
        return requested
    # NotOlderThan: the current state serves any version already reached
    return requested if requested > current_rv else None


def _encode_continue(resource_version: int, after: tuple[str, str]) -> str:
    raw = json.dumps({"v": _CONTINUE_VERSION, "rv": resource_version, "start": list(after)})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    """The token's resourceVersion and the key the next page starts after; BadRequest when
    it is not one this server wrote."""
    invalid = BadRequest(f"invalid continue token {token!r}")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        rv, (namespace, name) = decoded["rv"], decoded["start"]
    except (ValueError, TypeError, KeyError, binascii.Error) as error:
        raise invalid from error
    if decoded.get("v") != _CONTINUE_VERSION or not isinstance(rv, int):
        raise invalid
    return rv, (str(namespace), str(name))


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json_bytes(body),
        status=status,
        content_type=_JSON,
    )


def _status_success(code: int = 200, details: JsonObject | None = None) -> JsonObject:
    status: JsonObject = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        status["details"] = details
    return status


def _representation(request: web.Request, *, watch: bool = False) -> Representation:
    return negotiate(request.headers.get("Accept", ""), watch=watch)


def _yaml_response(body: Any) -> web.Response:
    return web.Response(body=yaml_bytes(body), content_type="application/yaml")


def _event_line(event: WatchEvent, metadata_only: bool) -> bytes:
    """One watch event as its JSON line: the stored encoding, or only the object's metadata."""
    if not metadata_only:
        return event.encoded()
    line = {"type": event.type, "object": partial_metadata(event.object)}
    return json_bytes(line) + b"\n"


class KubeApi:
    """The aiohttp application serving `store`; `close_watches()` ends every open watch."""

    def __init__(
        self,
        store: Store,
        token: str,
        *,
        bookmark_interval_seconds: float = 10.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.token = token
        self.bookmark_interval_seconds = bookmark_interval_seconds
        self._clock = clock
        self._closing = False
        self._watchers: set[Any] = set()
        # every fieldValidation warning served, "PATCH /apis/...: unknown field ..."; tests of
        # the whole stack assert daiku's own writes produce none
        self.field_warnings: list[str] = []

    def application(self) -> web.Application:
        app = web.Application(
            middlewares=[self._errors, self._authenticate], client_max_size=64 << 20
        )
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @property
    def open_watches(self) -> int:
        """How many watch streams are being served right now."""
        return len(self._watchers)

    def close_watches(self) -> None:
        self._closing = True
        for watcher in list(self._watchers):
            watcher.close()

    # ----------------------------------------------------------------- middleware

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as error:
            if error.code >= 500:
                log.warning(
                    "kube_api_error", path=request.path, method=request.method, error=str(error)
                )
            return _json_response(error.to_status(), error.code)
        except web.HTTPException:
            raise
        except Exception as error:
            log.exception("kube_api_internal_error", path=request.path, method=request.method)
            failure = InternalError(f"localcloud apiserver: {type(error).__name__}: {error}")
            return _json_response(failure.to_status(), 500)

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _PUBLIC_PATHS:
            header = request.headers.get("Authorization", "")
            scheme, _, presented = header.partition(" ")
            if scheme.lower() != "bearer" or presented.strip() != self.token:
                raise Unauthorized("Unauthorized")
        return await handler(request)

    # ----------------------------------------------------------------- routing

    async def _dispatch(  # noqa: PLR0911, PLR0912 - one branch per discovery path
        self, request: web.Request
    ) -> web.StreamResponse:
        path = request.path
        if len(path) > 1:
            path = path.rstrip("/")  # kube-apiserver serves `/version/` as `/version`
        if path == "/version":
            return _json_response(discovery.SERVER_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi_v3(parts[2:])
        if parts == ["openapi", "v2"]:
            return self._openapi_v2(request)
        if not parts or parts[0] not in ("api", "apis"):
            raise NotFound("the server could not find the requested resource")
        types = self.store.resource_types()
        if parts[0] == "api":
            if len(parts) == 1:
                return _json_response(discovery.api_versions(request.host))
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) == 1:
                return _json_response(discovery.api_group_list(types))
            if len(parts) == 2:
                document = discovery.api_group(parts[1], types)
                if document is None:
                    raise NotFound("the server could not find the requested resource")
                return _json_response(document)
            group, version, rest = parts[1], parts[2], parts[3:]
        group_version = f"{group}/{version}" if group else version
        if not rest:
            served = [t for t in types if t.api_version == group_version]
            if not served:
                raise NotFound("the server could not find the requested resource")
            return _json_response(discovery.resource_list(group_version, served))
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise NotFound("the server could not find the requested resource")
        if group_version == "v1" and rest[0] == "bindings" and len(rest) == 1:
            # the legacy Binding collection: POST /api/v1/namespaces/<ns>/bindings
            if request.method != "POST" or namespace is None:
                raise MethodNotAllowed("bindings only support create")
            body = await self._body(request)
            pod_name = str((body.get("metadata") or {}).get("name") or "")
            return await self._bind(body, namespace, pod_name)
        key = f"{group_version}/{rest[0]}"
        rt = self.store.lookup(key)
        if rt is None:
            raise NotFound("the server could not find the requested resource")
        if namespace is not None and not rt.namespaced:
            raise NotFound("the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if rt.namespaced and name is not None and namespace is None:
            raise NotFound("the server could not find the requested resource")
        return await self._serve(request, rt, namespace, name, subresource)

    def _openapi_v3(self, rest: list[str]) -> web.Response:
        types = self.store.resource_types()
        if not rest:
            return _json_response(discovery.openapi_v3_root(types))
        if rest[0] == "api" and len(rest) == 2:
            document = discovery.openapi_v3_group_version(rest[1], types)
        elif rest[0] == "apis" and len(rest) == 3:
            document = discovery.openapi_v3_group_version(f"{rest[1]}/{rest[2]}", types)
        else:
            document = None
        if document is None:
            raise NotFound("the server could not find the requested resource")
        group_version = "/".join(rest[1:])
        served = [t for t in types if t.api_version == group_version]
        document["components"]["schemas"] = openapi.schemas(served)
        return _json_response(document)

    def _openapi_v2(self, request: web.Request) -> web.Response:
        """Swagger 2.0 as JSON. client-go asks for it as protobuf only (gnostic), which is not
        served: that request gets 404, and kubectl uses OpenAPI v3 or its compiled-in types."""
        accept = request.headers.get("Accept", "")
        if accept and "json" not in accept and "*/*" not in accept:
            raise NotFound("the server could not find the requested resource")
        info = {
            "title": "Kubernetes (localcloud)",
            "version": discovery.SERVER_VERSION["gitVersion"],
        }
        return _json_response(openapi.openapi_v2(self.store.resource_types(), info))

    async def _serve(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
    ) -> web.StreamResponse:
        method = request.method
        if method not in ("POST", "PUT", "PATCH"):
            return await self._serve_now(request, rt, namespace, name, subresource)
        # the handler awaits only the body before the store call, so the store-wide flags
        # below hold for this request alone once the body is read
        await request.read()
        dry_run = request.query.get("dryRun")
        if dry_run and dry_run != "All":
            raise BadRequest(f"unsupported dryRun value {dry_run!r}")
        mode = request.query.get("fieldValidation") or "Warn"
        manager = request.query.get("fieldManager") or default_manager(
            request.headers.get("User-Agent", "")
        )
        check_manager(manager)
        sub = subresource if subresource in ("status", "scale") else ""
        with (
            self.store.fields.requested(mode) as warnings,
            self.store.writers.writing(Writer(manager, rt.api_version, sub)),
            self.store.dry_run() if dry_run else contextlib.nullcontext(),
        ):
            response = await self._serve_now(request, rt, namespace, name, subresource)
        self.field_warnings.extend(f"{method} {request.path}: {w}" for w in warnings)
        for warning in warnings:
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            response.headers.add("Warning", f'299 - "{escaped}"')
        return response

    async def _serve_now(  # noqa: PLR0911, PLR0912 - one branch per verb and subresource
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
    ) -> web.StreamResponse:
        method = request.method
        query = request.query
        if rt.key == "authorization.k8s.io/v1/selfsubjectaccessreviews":
            return await self._access_review(request)
        if rt.group == "authentication.k8s.io":
            return await self._authentication_review(request, rt)
        if subresource == "log" and rt.key == "v1/pods" and method == "GET":
            return await self._pod_log(rt, namespace or "", str(name))
        if name is None:
            if method == "GET":
                if _flag(query.get("watch")):
                    return await self._watch(request, rt, namespace)
                return await self._list(request, rt, namespace)
            if method == "POST":
                body = await self._body(request)
                created = await self.store.create(rt, body, namespace, copy=False, fresh=True)
                return _json_response(created, 201)
            if method == "DELETE":
                return await self._delete_collection(request, rt, namespace)
            raise MethodNotAllowed(f"{method} is not supported on a collection")
        if subresource == "scale" and rt.has_scale:
            return await self._scale(request, rt, namespace, name)
        if subresource in ("binding", "eviction") and rt.key == "v1/pods" and method == "POST":
            return await self._pod_action(request, subresource, namespace or "", name)
        if subresource not in (None, "status", "finalize") or (
            subresource == "status" and not rt.has_status
        ):
            raise NotFound("the server could not find the requested resource")
        stored_subresource = "status" if subresource == "status" else None
        if method == "GET":
            representation = _representation(request)
            obj = await self.store.get(rt, name, namespace, copy=False)
            if representation is Representation.TABLE:
                return _json_response(
                    self._table(request, rt, [obj], obj["metadata"]["resourceVersion"])
                )
            if representation is Representation.METADATA:
                return _json_response(partial_metadata(obj))
            if representation is Representation.YAML:
                return _yaml_response(obj)
            return _json_response(obj)
        if method == "PUT":
            body = await self._body(request)
            if isinstance(body.get("metadata"), dict) and body["metadata"].get("name") not in (
                None,
                name,
            ):
                raise BadRequest(
                    f"the name of the object ({body['metadata'].get('name')}) does not match the "
                    f"name on the URL ({name})"
                )
            body.setdefault("metadata", {})["name"] = name
            return _json_response(
                await self.store.update(
                    rt, body, namespace, subresource=stored_subresource, copy=False, fresh=True
                )
            )
        if method == "PATCH":
            return await self._patch(request, rt, namespace, name, stored_subresource)
        if method == "DELETE":
            return await self._delete(request, rt, namespace, name)
        raise MethodNotAllowed(f"{method} is not supported on {rt.group_resource}")

    # ----------------------------------------------------------------- bodies

    async def _body(self, request: web.Request) -> JsonObject:
        raw = await request.read()
        if not raw.strip():
            return {}
        content_type = request.content_type
        if content_type == "application/vnd.kubernetes.protobuf":
            return decode_object(raw)
        try:
            body = yaml.safe_load(raw) if "yaml" in content_type else from_json(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise BadRequest(f"the request body is not valid {content_type}: {error}") from error
        if not isinstance(body, dict | list):
            raise BadRequest("the request body must be a JSON object")
        return body  # type: ignore[return-value]  # lists only reach the JSON-patch path

    # ----------------------------------------------------------------- reads

    def _table(
        self, request: web.Request, rt: ResourceType, objects: list[JsonObject], rv: str
    ) -> JsonObject:
        include = request.query.get("includeObject", "PartialObjectMetadata")
        return to_table(rt, objects, self._clock(), resource_version=rv, include_object=include)

    async def _list(
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.Response:
        query = request.query
        representation = _representation(request)
        snapshot = _list_snapshot(query, self.store.resource_version)
        if query.get("continue") and snapshot is not None:
            self.store.require_retained(rt, snapshot)
        # copy=False: the HTTP layer only serialises the stored objects
        listed = await self.store.list(
            rt,
            namespace,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            copy=False,
            at_resource_version=snapshot,
        )
        page = _Page.of(query, listed.items, listed.resource_version)
        metadata = page.metadata()
        if representation is Representation.TABLE:
            table = self._table(request, rt, page.items, metadata["resourceVersion"])
            table["metadata"] = {**table.get("metadata", {}), **metadata}
            return _json_response(table)
        if representation is Representation.METADATA:
            return _json_response(partial_metadata_list(metadata, page.items))
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": page.items,
        }
        if representation is Representation.YAML:
            return _yaml_response(body)
        return _json_response(body)

    async def _watch(  # noqa: PLR0912, PLR0915 - the watch stream's states in one place
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        query = request.query
        timeout = _int(query.get("timeoutSeconds"), "timeoutSeconds")
        timeout_seconds = float(timeout) if timeout else _DEFAULT_WATCH_TIMEOUT_SECONDS
        bookmarks = _flag(query.get("allowWatchBookmarks"))
        send_initial = _flag(query.get("sendInitialEvents"))
        representation = _representation(request, watch=True)
        table = representation is Representation.TABLE
        metadata_only = representation is Representation.METADATA
        include = query.get("includeObject", "PartialObjectMetadata")
        failure: ApiError | None = None
        watcher = None
        try:
            watcher = self.store.watch(
                rt,
                namespace,
                query.get("resourceVersion") or None,
                query.get("labelSelector", ""),
                query.get("fieldSelector", ""),
                copy=False,
            )
        except (Gone, Timeout) as error:
            failure = error  # sent as an ERROR event on a 200 stream, as kube-apiserver does
        response = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
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
                    events = await watcher.poll(min(remaining, self.bookmark_interval_seconds))
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
                    watcher.cursor_rv = max(watcher.cursor_rv, self.store.resource_version)
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

    # ----------------------------------------------------------------- writes

    async def _patch(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str | None,
    ) -> web.Response:
        patch_type = _PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format ({request.content_type}) - "
                "accepted media types include: application/json-patch+json, "
                "application/merge-patch+json, application/apply-patch+yaml"
            )
        body = await self._body(request)
        if patch_type == "apply":
            return await self._server_side_apply(
                request, rt, name, body, namespace=namespace, subresource=subresource
            )
        return _json_response(
            await self.store.patch(
                rt,
                name,
                body,
                patch_type,
                namespace=namespace,
                subresource=subresource,
                copy=False,
            )
        )

    async def _server_side_apply(
        self,
        request: web.Request,
        rt: ResourceType,
        name: str,
        body: JsonObject,
        *,
        namespace: str | None,
        subresource: str | None,
    ) -> web.Response:
        """Apply `body` as `fieldManager` (see `managed_fields.apply`): create when absent,
        else merge with field ownership; retried when another write lands in between."""
        if not isinstance(body, dict):
            raise BadRequest("an apply patch must be an object")
        writer = Writer(
            require_manager(request.query.get("fieldManager")), rt.api_version, subresource or ""
        )
        force = _flag(request.query.get("force"))
        body.setdefault("metadata", {})["name"] = name
        body["metadata"].pop("managedFields", None)
        if subresource is None and rt.has_status:
            body.pop("status", None)  # status is written through /status only
        shape = shape_of(rt)
        now = replace(writer, time=format_timestamp(self._clock()))
        for _ in range(5):
            live = self.store.get_nowait(rt, name, namespace)
            with self.store.writers.writing(writer, applied=True):
                if live is None:
                    if subresource is not None:  # a subresource's storage never creates
                        raise not_found(rt.plural, name, rt.group)
                    merged = managed_fields.apply(None, body, shape, now, force=force)
                    return _json_response(
                        await self.store.create(rt, merged, namespace, copy=False, fresh=True), 201
                    )
                merged = managed_fields.apply(live, body, shape, now, force=force)
                try:
                    return _json_response(
                        await self.store.update(
                            rt, merged, namespace, subresource=subresource, copy=False, fresh=True
                        )
                    )
                except ApiError as error:
                    if error.code != 409 or error.reason != "Conflict":
                        raise
        raise InternalError(f"apply of {rt.kind} {name!r} kept racing other writes")

    async def _delete_options(self, request: web.Request) -> JsonObject:
        options: JsonObject = {}
        if request.can_read_body:
            body = await self._body(request)
            if isinstance(body, dict):
                options = body
        query = request.query
        grace = _int(query.get("gracePeriodSeconds"), "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in options and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan" if options["orphanDependents"] else "Background"
        return options

    async def _delete(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        options = await self._delete_options(request)
        deleted = await self.store.delete(
            rt,
            name,
            namespace,
            grace_period_seconds=options.get("gracePeriodSeconds"),
            propagation_policy=options.get("propagationPolicy"),
            preconditions=options.get("preconditions"),
            copy=False,
        )
        # 202 when the object is still there (graceful deletion, finalizers), as kube-apiserver
        still = self.store.get_nowait(rt, name, namespace) if not rt.storage_key else None
        pending = still is not None and still["metadata"]["uid"] == deleted["metadata"]["uid"]
        return _json_response(deleted, 202 if pending else 200)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.Response:
        options = await self._delete_options(request)
        matched = await self.store.list(
            rt,
            namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
            copy=False,
        )
        deleted = []
        for obj in matched.items:
            meta = obj["metadata"]
            try:
                deleted.append(
                    await self.store.delete(
                        rt,
                        meta["name"],
                        meta.get("namespace"),
                        grace_period_seconds=options.get("gracePeriodSeconds"),
                        propagation_policy=options.get("propagationPolicy"),
                    )
                )
            except NotFound:
                continue  # collected meanwhile, e.g. as a dependent of an earlier item
        return _json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": deleted,
            }
        )

    async def _scale(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        current = await self.store.scale(rt, name, namespace)
        if request.method == "GET":
            return _json_response(current)
        if request.method == "PUT":
            body = await self._body(request)
        elif request.method == "PATCH":
            patch_type = _PATCH_TYPES.get(request.content_type, "merge")
            patch_type = "merge" if patch_type in ("strategic", "apply") else patch_type
            scale_type = ResourceType("autoscaling", "v1", "scale", "Scale", namespaced=True)
            body = apply_patch(
                scale_type, copy_json(current), await self._body(request), patch_type
            )
        else:
            raise MethodNotAllowed(f"{request.method} is not supported on {rt.plural}/scale")
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int):
            raise BadRequest(f"Scale {name}: spec.replicas must be an integer")
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        return _json_response(
            await self.store.set_scale(rt, name, replicas, namespace, resource_version=wanted_rv)
        )

    async def _access_review(self, request: web.Request) -> web.Response:
        """One bearer token, one all-powerful user: every review is allowed."""
        if request.method != "POST":
            raise MethodNotAllowed("selfsubjectaccessreviews only support create")
        review = await self._body(request)
        review["status"] = {"allowed": True, "reason": "localcloud: the token holder is admin"}
        return _json_response(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", **review},
            201,
        )

    async def _authentication_review(self, request: web.Request, rt: ResourceType) -> web.Response:
        """SelfSubjectReview names the caller; TokenReview says whether a token is this
        server's one. Either way the user is the one all-powerful admin."""
        if request.method != "POST":
            raise MethodNotAllowed(f"{rt.plural} only support create")
        review = await self._body(request)
        if not isinstance(review, dict):
            raise BadRequest(f"the body of a {rt.kind} must be an object")
        user = {"username": ADMIN_USER, "groups": ["system:masters", "system:authenticated"]}
        if rt.kind == "SelfSubjectReview":
            status: JsonObject = {"userInfo": user}
        else:
            token = str((review.get("spec") or {}).get("token") or "")
            valid = secrets.compare_digest(token, self.token)
            status = {"authenticated": True, "user": user} if valid else {"authenticated": False}
        meta = {**(review.get("metadata") or {}), "creationTimestamp": None}
        return _json_response(
            {
                **review,
                "apiVersion": rt.api_version,
                "kind": rt.kind,
                "metadata": meta,
                "status": status,
            },
            201,
        )

    async def _pod_log(self, rt: ResourceType, namespace: str, name: str) -> web.Response:
        """Containers here run nothing: a running pod has an empty log, others are waiting."""
        pod = await self.store.get(rt, name, namespace, copy=False)
        if (pod.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed"):
            container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
            raise BadRequest(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        return web.Response(text="", content_type="text/plain")

    async def _bind(self, body: JsonObject, namespace: str, name: str) -> web.Response:
        target = body.get("target") or {}
        if not name or not target.get("name"):
            raise BadRequest(f"binding of pod {name!r}: metadata.name and target.name are required")
        await self.store.bind(namespace, name, str(target["name"]))
        return _json_response(_status_success(201), 201)

    async def _pod_action(
        self, request: web.Request, action: str, namespace: str, name: str
    ) -> web.Response:
        body = await self._body(request)
        if action == "binding":
            return await self._bind(body, namespace, name)
        options = body.get("deleteOptions") or {}
        await self.store.evict(namespace, name, options.get("gracePeriodSeconds"))
        return _json_response(_status_success(201), 201)


def _error_line(error: ApiError) -> bytes:
    return json_bytes({"type": "ERROR", "object": error.to_status()}) + b"\n"


def _bookmark_line(rt: ResourceType, resource_version: int, *, initial_end: bool = False) -> bytes:
    metadata: JsonObject = {"resourceVersion": str(resource_version)}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}
    return json_bytes({"type": "BOOKMARK", "object": obj}) + b"\n"
