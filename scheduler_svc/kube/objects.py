"""Reads and writes of Kubernetes objects as raw JSON dicts, with typed errors.

The watch loop (`watch.py`) reads collections; everything that writes (NodeClaims and their
status, node labels and taints, Events, evictions, NodePool status) goes through `KubeObjects`.
Bodies go out and come back as plain dicts: no generated client models.

Errors (see `scheduler_svc.errors`): 404 -> KubeNotFoundError, 409 -> KubeConflictError
(KubeAlreadyExistsError for reason AlreadyExists), 422 -> KubeInvalidError, 429 ->
KubeTooManyRequestsError (an eviction blocked by a PodDisruptionBudget, or throttling; carries
Retry-After), anything else -> KubeApiError. Connection failures surface as aiohttp/OS errors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp

from scheduler_svc.errors import (
    KubeAlreadyExistsError,
    KubeApiError,
    KubeConflictError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeTooManyRequestsError,
)
from scheduler_svc.kube.client import KubeApiClient
from scheduler_svc.kube.resources import EVENTS, PODS, KubeObject, Resource

PatchType = Literal["merge", "json", "strategic"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


def _utc_now() -> datetime:
    return datetime.now(UTC)


# Room for the digest in a 253-character object name.
_EVENT_NAME_PREFIX_CHARS = 200


def event_name(involved: KubeObject, reason: str, message: str, event_type: str) -> str:
    """`<object name>.<digest>`: one name per (object uid, reason, message, type), like the
    `<object>.<suffix>` names kubectl shows, but the same for the same fact."""
    metadata = involved.get("metadata") or {}
    identity = metadata.get("uid") or f"{involved.get('kind')}/{metadata.get('name')}"
    digest = hashlib.sha256(
        "\x00".join((str(identity), reason, message, event_type)).encode()
    ).hexdigest()[:16]
    prefix = str(metadata.get("name") or "object")[:_EVENT_NAME_PREFIX_CHARS]
    return f"{prefix}.{digest}"


class KubeObjects:
    """CRUD on any `Resource` over the shared KubeApiClient. `clock` stamps Events."""

    def __init__(
        self,
        api: KubeApiClient,
        *,
        timeout_seconds: float = 30.0,
        component: str = "daiku-scheduler",
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._api = api
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._component = component
        self._clock = clock

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> KubeObject:
        """The object; KubeNotFoundError when absent."""
        return await self.request("GET", resource.object_path(name, namespace))

    async def create(
        self, resource: Resource, obj: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        """Create `obj` (its metadata.namespace, or `namespace`); KubeAlreadyExistsError when
        the name is taken."""
        if resource.namespaced:
            namespace = namespace or (obj.get("metadata") or {}).get("namespace") or "default"
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        return await self.request("POST", resource.collection_path(namespace), body=body)

    async def replace(
        self, resource: Resource, obj: KubeObject, *, subresource: str | None = None
    ) -> KubeObject:
        """PUT `obj` as a whole; its metadata.resourceVersion makes it conditional (a stale
        version raises KubeConflictError)."""
        metadata = obj.get("metadata") or {}
        path = resource.object_path(metadata.get("name", ""), metadata.get("namespace"))
        if subresource:
            path += f"/{subresource}"
        return await self.request("PUT", path, body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
    ) -> KubeObject:
        """Patch one object (`subresource="status"` for status). Merge patch by default; a JSON
        patch with a `test` op makes it conditional."""
        path = resource.object_path(name, namespace)
        if subresource:
            path += f"/{subresource}"
        return await self.request(
            "PATCH", path, body=patch, content_type=_PATCH_CONTENT_TYPES[patch_type]
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> KubeObject:
        """Delete one object (only if its uid is still `uid`, when given). Returns the object
        (with deletionTimestamp while finalizers hold it) or the server's Status."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        return await self.request("DELETE", resource.object_path(name, namespace), body=options)

    async def evict(self, namespace: str, pod_name: str) -> None:
        """Evict a pod through the Eviction API (PodDisruptionBudgets apply): a blocked
        eviction raises KubeTooManyRequestsError."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod_name, "namespace": namespace},
        }
        await self.request("POST", PODS.object_path(pod_name, namespace) + "/eviction", body=body)

    async def record_event(
        self,
        involved: KubeObject,
        *,
        reason: str,
        message: str,
        event_type: Literal["Normal", "Warning"] = "Normal",
    ) -> KubeObject | None:
        """Record a core/v1 Event about `involved` (as `kubectl describe` shows them). Events of
        cluster-scoped objects go to the default namespace, as the API server expects.

        The Event's name is derived from the object, reason, message and type, so the same
        fact told twice (by a restarted or newly elected scheduler) is one Event: the second
        create answers 409 and None is returned. The API server's event TTL (1 h by default)
        lets a fact that recurs later be recorded again."""
        metadata = involved.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "metadata": {
                "name": event_name(involved, reason, message, event_type),
                "namespace": namespace,
            },
            "involvedObject": {
                k: v
                for k, v in {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": metadata.get("name"),
                    "namespace": metadata.get("namespace"),
                    "uid": metadata.get("uid"),
                    "resourceVersion": metadata.get("resourceVersion"),
                }.items()
                if v
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            return await self.create(EVENTS, event, namespace)
        except KubeAlreadyExistsError:
            return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> KubeObject:
        """One raw JSON request to any API path (the verbs above are built on it); an error
        status raises the KubeApiError subclass for its code."""
        response = await self._api.request(
            method,
            path,
            params=list((query or {}).items()),
            headers={"Accept": "application/json"},
            body=body,
            content_type=content_type,
            client_timeout=self._timeout,
        )
        try:
            raw = await response.read()
        finally:
            response.release()
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            decoded = {"message": raw[:300].decode(errors="replace")}
        if 200 <= response.status < 300:
            if not isinstance(decoded, dict):
                raise KubeApiError(
                    f"{method} {path}: answer is not an object", status=response.status
                )
            return decoded
        raise _error_for(response, decoded if isinstance(decoded, dict) else {}, method, path)


def _error_for(
    response: aiohttp.ClientResponse, status: dict[str, Any], method: str, path: str
) -> KubeApiError:
    reason = str(status.get("reason") or "")
    message = f"{method} {path}: {status.get('message') or reason or response.reason}"
    code = response.status
    if code == 404:
        return KubeNotFoundError(message, status=code, reason=reason)
    if code == 409:
        if reason == "AlreadyExists":
            return KubeAlreadyExistsError(message, status=code, reason=reason)
        return KubeConflictError(message, status=code, reason=reason)
    if code == 422:
        return KubeInvalidError(message, status=code, reason=reason)
    if code == 429:
        retry_after: float | None
        try:
            retry_after = float(response.headers.get("Retry-After", ""))
        except ValueError:
            retry_after = None
        return KubeTooManyRequestsError(
            message, status=code, reason=reason, retry_after_seconds=retry_after
        )
    return KubeApiError(message, status=code, reason=reason)
