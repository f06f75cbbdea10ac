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
not yet reached: 504) is honoured as kube-apiserver does. `/openapi/v2` and `/openapi/v3` carry
the schemas of the served kinds (`openapi`).

Server-side apply (`kubectl apply --server-side`) needs `fieldManager` (400 otherwise), creates
when absent and keeps field ownership in `metadata.managedFields` (`managed_fields`): 409 with
the conflicts in `details.causes` unless `force=true`, fields dropped from a manager's applied
configuration removed when no other manager owns them. Every other write records an Update
entry for its `fieldManager`, or the user agent's first word as kube-apiserver derives it.

Layout: `KubeApi` authenticates, routes and serves discovery, get, list, create and update;
`wire` reads parameters and bodies and writes responses, `watch_stream.WatchStreams` serves
watches, `write_handlers.WriteHandlers` patches (server-side apply included), deletes, scales,
binds and evicts.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import structlog
from aiohttp import web

from localcloud.kube import discovery, openapi
from localcloud.kube.errors import (
    ApiError,
    BadRequest,
    InternalError,
    MethodNotAllowed,
    NotFound,
    Unauthorized,
)
from localcloud.kube.managed_fields import Writer, check_manager, default_manager
from localcloud.kube.objects import format_timestamp
from localcloud.kube.representations import (
    Representation,
    partial_metadata,
    partial_metadata_list,
)
from localcloud.kube.resources import ResourceType
from localcloud.kube.store import Store
from localcloud.kube.tables import to_table
from localcloud.kube.watch_stream import WatchStreams
from localcloud.kube.wire import (
    Handler,
    JsonObject,
    flag,
    int_param,
    json_response,
    read_body,
    representation_of,
    yaml_response,
)
from localcloud.kube.write_handlers import WriteHandlers

log = structlog.get_logger("localcloud.kube.api")

# the one user every token review and whoami names (one bearer token, all-powerful)
ADMIN_USER: Final = "localcloud:admin"
_PUBLIC_PATHS: Final = frozenset({"/version", "/healthz", "/livez", "/readyz"})
_CONTINUE_VERSION: Final = "localcloud/v1"


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
        limit = int_param(query.get("limit"), "limit") or 0
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
    requested = int_param(version, "resourceVersion") or 0
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
        self._clock = clock
        self._watches = WatchStreams(
            store, bookmark_interval_seconds=bookmark_interval_seconds, clock=clock
        )
        self._writes = WriteHandlers(store, clock)
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
        return self._watches.open_count

    def close_watches(self) -> None:
        self._watches.close()

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
            return json_response(error.to_status(), error.code)
        except web.HTTPException:
            raise
        except Exception as error:
            log.exception("kube_api_internal_error", path=request.path, method=request.method)
            failure = InternalError(f"localcloud apiserver: {type(error).__name__}: {error}")
            return json_response(failure.to_status(), 500)

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
            return json_response(discovery.SERVER_VERSION)
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
                return json_response(discovery.api_versions(request.host))
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) == 1:
                return json_response(discovery.api_group_list(types))
            if len(parts) == 2:
                document = discovery.api_group(parts[1], types)
                if document is None:
                    raise NotFound("the server could not find the requested resource")
                return json_response(document)
            group, version, rest = parts[1], parts[2], parts[3:]
        group_version = f"{group}/{version}" if group else version
        if not rest:
            served = [t for t in types if t.api_version == group_version]
            if not served:
                raise NotFound("the server could not find the requested resource")
            return json_response(discovery.resource_list(group_version, served))
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
            body = await read_body(request)
            pod_name = str((body.get("metadata") or {}).get("name") or "")
            return await self._writes.bind(body, namespace, pod_name)
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
            return json_response(discovery.openapi_v3_root(types))
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
        return json_response(document)

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
        return json_response(openapi.openapi_v2(self.store.resource_types(), info))

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
                if flag(query.get("watch")):
                    return await self._watches.serve(request, rt, namespace)
                return await self._list(request, rt, namespace)
            if method == "POST":
                body = await read_body(request)
                created = await self.store.create(rt, body, namespace, copy=False, fresh=True)
                return json_response(created, 201)
            if method == "DELETE":
                return await self._writes.delete_collection(request, rt, namespace)
            raise MethodNotAllowed(f"{method} is not supported on a collection")
        if subresource == "scale" and rt.has_scale:
            return await self._writes.scale(request, rt, namespace, name)
        if subresource == "token" and rt.key == "v1/serviceaccounts" and method == "POST":
            return await self._token_request(request, rt, namespace or "", name)
        if subresource in ("binding", "eviction") and rt.key == "v1/pods" and method == "POST":
            return await self._writes.pod_action(request, subresource, namespace or "", name)
        if subresource not in (None, "status", "finalize") or (
            subresource == "status" and not rt.has_status
        ):
            raise NotFound("the server could not find the requested resource")
        stored_subresource = "status" if subresource == "status" else None
        if method == "GET":
            representation = representation_of(request)
            obj = await self.store.get(rt, name, namespace, copy=False)
            if representation is Representation.TABLE:
                return json_response(
                    self._table(request, rt, [obj], obj["metadata"]["resourceVersion"])
                )
            if representation is Representation.METADATA:
                return json_response(partial_metadata(obj))
            if representation is Representation.YAML:
                return yaml_response(obj)
            return json_response(obj)
        if method == "PUT":
            body = await read_body(request)
            if isinstance(body.get("metadata"), dict) and body["metadata"].get("name") not in (
                None,
                name,
            ):
                raise BadRequest(
                    f"the name of the object ({body['metadata'].get('name')}) does not match the "
                    f"name on the URL ({name})"
                )
            body.setdefault("metadata", {})["name"] = name
            return json_response(
                await self.store.update(
                    rt, body, namespace, subresource=stored_subresource, copy=False, fresh=True
                )
            )
        if method == "PATCH":
            return await self._writes.patch(request, rt, namespace, name, stored_subresource)
        if method == "DELETE":
            return await self._writes.delete(request, rt, namespace, name)
        raise MethodNotAllowed(f"{method} is not supported on {rt.group_resource}")

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
        representation = representation_of(request)
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
            return json_response(table)
        if representation is Representation.METADATA:
            return json_response(partial_metadata_list(metadata, page.items))
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": page.items,
        }
        if representation is Representation.YAML:
            return yaml_response(body)
        return json_response(body)

    async def _access_review(self, request: web.Request) -> web.Response:
        """One bearer token, one all-powerful user: every review is allowed."""
        if request.method != "POST":
            raise MethodNotAllowed("selfsubjectaccessreviews only support create")
        review = await read_body(request)
        review["status"] = {"allowed": True, "reason": "localcloud: the token holder is admin"}
        return json_response(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", **review},
            201,
        )

    async def _authentication_review(self, request: web.Request, rt: ResourceType) -> web.Response:
        """SelfSubjectReview names the caller; TokenReview says whether a token is this
        server's one. Either way the user is the one all-powerful admin."""
        if request.method != "POST":
            raise MethodNotAllowed(f"{rt.plural} only support create")
        review = await read_body(request)
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
        return json_response(
            {
                **review,
                "apiVersion": rt.api_version,
                "kind": rt.kind,
                "metadata": meta,
                "status": status,
            },
            201,
        )

    async def _token_request(
        self, request: web.Request, rt: ResourceType, namespace: str, name: str
    ) -> web.Response:
        """A TokenRequest for an existing ServiceAccount gets the server's one token (every
        token here is the all-powerful admin), valid for expirationSeconds (an hour by
        default) as far as the answer says."""
        await self.store.get(rt, name, namespace, copy=False)  # 404 for a missing account
        review = await read_body(request)
        spec = dict(review.get("spec") or {})
        seconds = int(spec.get("expirationSeconds") or 3600)
        spec["expirationSeconds"] = seconds
        spec.setdefault("audiences", ["https://kubernetes.default.svc"])
        expires = self._clock() + timedelta(seconds=seconds)
        return json_response(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
                "spec": spec,
                "status": {"token": self.token, "expirationTimestamp": format_timestamp(expires)},
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
