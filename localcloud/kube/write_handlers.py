"""The write verbs beyond create and update: patches (merge, JSON, strategic, and
server-side apply with field ownership), deletes of one object or a collection, the scale
subresource, and a pod's binding and eviction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Final

from aiohttp import web

from localcloud.kube import managed_fields
from localcloud.kube.apply import shape_of
from localcloud.kube.errors import (
    ApiError,
    BadRequest,
    InternalError,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
    not_found,
)
from localcloud.kube.managed_fields import Writer, require_manager
from localcloud.kube.objects import format_timestamp
from localcloud.kube.resources import ResourceType
from localcloud.kube.store import Store, apply_patch, copy_json
from localcloud.kube.wire import (
    JsonObject,
    flag,
    int_param,
    json_response,
    read_body,
    status_success,
)

PATCH_TYPES: Final = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


class WriteHandlers:
    """The handlers of those verbs over `store`; `clock` stamps server-side apply entries."""

    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def patch(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str | None,
    ) -> web.Response:
        patch_type = PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise UnsupportedMediaType(
                f"the body of the request was in an unknown format ({request.content_type}) - "
                "accepted media types include: application/json-patch+json, "
                "application/merge-patch+json, application/apply-patch+yaml"
            )
        body = await read_body(request)
        if patch_type == "apply":
            return await self._server_side_apply(
                request, rt, name, body, namespace=namespace, subresource=subresource
            )
        return json_response(
            await self._store.patch(
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
        force = flag(request.query.get("force"))
        body.setdefault("metadata", {})["name"] = name
        body["metadata"].pop("managedFields", None)
        if subresource is None and rt.has_status:
            body.pop("status", None)  # status is written through /status only
        shape = shape_of(rt)
        now = replace(writer, time=format_timestamp(self._clock()))
        for _ in range(5):
            live = self._store.get_nowait(rt, name, namespace)
            with self._store.writers.writing(writer, applied=True):
                if live is None:
                    if subresource is not None:  # a subresource's storage never creates
                        raise not_found(rt.plural, name, rt.group)
                    merged = managed_fields.apply(None, body, shape, now, force=force)
                    return json_response(
                        await self._store.create(rt, merged, namespace, copy=False, fresh=True), 201
                    )
                merged = managed_fields.apply(live, body, shape, now, force=force)
                try:
                    return json_response(
                        await self._store.update(
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
            body = await read_body(request)
            if isinstance(body, dict):
                options = body
        query = request.query
        grace = int_param(query.get("gracePeriodSeconds"), "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in options and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan" if options["orphanDependents"] else "Background"
        return options

    async def delete(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        options = await self._delete_options(request)
        deleted = await self._store.delete(
            rt,
            name,
            namespace,
            grace_period_seconds=options.get("gracePeriodSeconds"),
            propagation_policy=options.get("propagationPolicy"),
            preconditions=options.get("preconditions"),
            copy=False,
        )
        # 202 when the object is still there (graceful deletion, finalizers), as kube-apiserver
        still = self._store.get_nowait(rt, name, namespace) if not rt.storage_key else None
        pending = still is not None and still["metadata"]["uid"] == deleted["metadata"]["uid"]
        return json_response(deleted, 202 if pending else 200)

    async def delete_collection(
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.Response:
        options = await self._delete_options(request)
        matched = await self._store.list(
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
                    await self._store.delete(
                        rt,
                        meta["name"],
                        meta.get("namespace"),
                        grace_period_seconds=options.get("gracePeriodSeconds"),
                        propagation_policy=options.get("propagationPolicy"),
                    )
                )
            except NotFound:
                continue  # collected meanwhile, e.g. as a dependent of an earlier item
        return json_response(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self._store.resource_version)},
                "items": deleted,
            }
        )

    async def scale(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        current = await self._store.scale(rt, name, namespace)
        if request.method == "GET":
            return json_response(current)
        if request.method == "PUT":
            body = await read_body(request)
        elif request.method == "PATCH":
            patch_type = PATCH_TYPES.get(request.content_type, "merge")
            patch_type = "merge" if patch_type in ("strategic", "apply") else patch_type
            scale_type = ResourceType("autoscaling", "v1", "scale", "Scale", namespaced=True)
            body = apply_patch(scale_type, copy_json(current), await read_body(request), patch_type)
        else:
            raise MethodNotAllowed(f"{request.method} is not supported on {rt.plural}/scale")
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int):
            raise BadRequest(f"Scale {name}: spec.replicas must be an integer")
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        return json_response(
            await self._store.set_scale(rt, name, replicas, namespace, resource_version=wanted_rv)
        )

    async def bind(self, body: JsonObject, namespace: str, name: str) -> web.Response:
        target = body.get("target") or {}
        if not name or not target.get("name"):
            raise BadRequest(f"binding of pod {name!r}: metadata.name and target.name are required")
        await self._store.bind(namespace, name, str(target["name"]))
        return json_response(status_success(201), 201)

    async def pod_action(
        self, request: web.Request, action: str, namespace: str, name: str
    ) -> web.Response:
        body = await read_body(request)
        if action == "binding":
            return await self.bind(body, namespace, name)
        options = body.get("deleteOptions") or {}
        await self._store.evict(namespace, name, options.get("gracePeriodSeconds"))
        return json_response(status_success(201), 201)
