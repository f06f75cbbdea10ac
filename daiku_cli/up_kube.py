"""The Kubernetes calls `daiku up` makes, on raw JSON over the scheduler's KubeApiClient.

Objects of any kind are addressed through API discovery (`/api/v1`, `/apis/<group>/<version>`),
so CRDs applied a moment ago are usable as soon as the API server serves them. `apply` creates
an object or replaces the existing one (the last write wins, as `kubectl apply --force` would).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.client import KubeApiClient, api_client_from_kubeconfig
from scheduler_svc.kube.objects import KubeObjects

KubeObject = dict[str, Any]
DEFAULT_NAMESPACE = "default"


class KubeCallError(RuntimeError):
    """An API call answered with an error status; `status` is the HTTP code."""

    def __init__(self, message: str, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ApiResource:
    """Where objects of one kind live."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection_path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.api_version}" if "/" in self.api_version else "/api/v1"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None) -> str:
        return f"{self.collection_path(namespace if self.namespaced else None)}/{name}"


class KubeClient:
    """A few verbs over raw JSON; see the module docstring. Close it with `close()`."""

    def __init__(self, api: KubeApiClient, request_timeout_seconds: float = 30.0) -> None:
        self._api = api
        self._objects = KubeObjects(api, timeout_seconds=request_timeout_seconds)
        self._resources: dict[str, list[ApiResource]] = {}

    @classmethod
    async def from_kubeconfig(cls, path: Path) -> KubeClient:
        return cls(await api_client_from_kubeconfig(path))

    async def close(self) -> None:
        await self._api.close()

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> KubeObject:
        """One request; the decoded JSON object, or KubeCallError naming method and path."""
        try:
            return await self._objects.request(
                method, path, body=body, content_type=content_type, query=query
            )
        except KubeApiError as error:
            raise KubeCallError(str(error), status=error.status, reason=error.reason) from error

    # -- discovery -----------------------------------------------------------------------------

    async def _group_version(self, api_version: str, refresh: bool = False) -> list[ApiResource]:
        if refresh or api_version not in self._resources:
            path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            try:
                listing = await self.call("GET", path)
            except KubeCallError as error:
                if error.status == 404:
                    return []
                raise
            self._resources[api_version] = [
                ApiResource(api_version, r["kind"], r["name"], bool(r.get("namespaced")))
                for r in listing.get("resources") or []
                if "/" not in r.get("name", "/")
            ]
        return self._resources[api_version]

    async def resource(self, api_version: str, kind: str) -> ApiResource:
        """The resource serving `kind` in `api_version`; KubeCallError 404 when none does."""
        for refresh in (False, True):
            for resource in await self._group_version(api_version, refresh=refresh):
                if resource.kind == kind:
                    return resource
        raise KubeCallError(f"the API server serves no {kind} in {api_version}", status=404)

    async def resource_for_kind(self, kind: str) -> ApiResource:
        """The resource serving `kind` in any group (its preferred version)."""
        groups = await self.call("GET", "/apis")
        versions = ["v1"] + [
            g["preferredVersion"]["groupVersion"]
            for g in groups.get("groups") or []
            if g.get("preferredVersion")
        ]
        for api_version in versions:
            for resource in await self._group_version(api_version, refresh=True):
                if resource.kind == kind:
                    return resource
        raise KubeCallError(f"the API server serves no kind {kind!r}", status=404)

    async def wait_until_served(
        self, api_version: str, kind: str, timeout_seconds: float = 30.0
    ) -> None:
        """Poll discovery until `kind` is served (a CRD just created becomes Established)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            try:
                await self.resource(api_version, kind)
            except KubeCallError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
            else:
                return

    # -- verbs ---------------------------------------------------------------------------------

    async def apply(self, obj: Mapping[str, Any]) -> str:
        """Create `obj`, or replace it when it exists; returns "created" or "replaced"."""
        resource = await self.resource(str(obj["apiVersion"]), str(obj["kind"]))
        body = json.loads(json.dumps(obj))  # a deep copy we may annotate
        metadata = body.setdefault("metadata", {})
        namespace: str | None = None
        if resource.namespaced:
            namespace = metadata.setdefault("namespace", DEFAULT_NAMESPACE)
            await self.ensure_namespace(str(namespace))
        else:
            metadata.pop("namespace", None)
        try:
            await self.call("POST", resource.collection_path(namespace), body)
        except KubeCallError as error:
            if error.status != 409:
                raise
        else:
            return "created"
        path = resource.object_path(str(metadata["name"]), namespace)
        for _ in range(5):
            current = await self.call("GET", path)
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                await self.call("PUT", path, body)
            except KubeCallError as error:
                if error.status != 409:  # someone else wrote in between: read again
                    raise
            else:
                return "replaced"
        raise KubeCallError(f"PUT {path}: kept conflicting with other writers", status=409)

    async def ensure_namespace(self, namespace: str) -> None:
        try:
            await self.call("GET", f"/api/v1/namespaces/{namespace}")
        except KubeCallError as error:
            if error.status != 404:
                raise
            try:
                await self.call(
                    "POST",
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
            except KubeCallError as create_error:
                if create_error.status != 409:
                    raise

    async def delete(
        self, kind: str, name: str, namespace: str | None, api_version: str | None = None
    ) -> bool:
        """Delete (foreground for workloads' pods to go too); False when it did not exist."""
        resource = (
            await self.resource(api_version, kind)
            if api_version
            else await self.resource_for_kind(kind)
        )
        path = resource.object_path(name, namespace or DEFAULT_NAMESPACE)
        try:
            await self.call(
                "DELETE",
                path,
                {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        except KubeCallError as error:
            if error.status == 404:
                return False
            raise
        return True

    async def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        await self.call(
            "PATCH",
            f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            {"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )

    async def list(self, api_version: str, kind: str) -> list[KubeObject]:
        """Every object of `kind` across namespaces; [] when the kind is not served (yet)."""
        try:
            resource = await self.resource(api_version, kind)
        except KubeCallError as error:
            if error.status == 404:
                return []
            raise
        listing = await self.call("GET", resource.collection_path())
        items = listing.get("items") or []
        return [item for item in items if isinstance(item, dict)]
