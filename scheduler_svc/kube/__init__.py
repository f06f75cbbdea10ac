"""Everything that talks to the Kubernetes API: client, list/watch loop, resources, writes.

The names below are re-exported lazily: importing a pure submodule (``kube.convert``,
``kube.resources``) must not import aiohttp and structlog, which only the client, the watch
and the writers need (`daiku plan` reads manifests without them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler_svc.kube.client import (
        KubeApiClient,
        KubeConfigError,
        api_client_from_kubeconfig,
        api_client_in_cluster,
        new_api_client,
    )
    from scheduler_svc.kube.events import ObjectEvent, Synced, WatchEvent
    from scheduler_svc.kube.objects import KubeObjects
    from scheduler_svc.kube.resources import KubeObject, Resource, object_key, resource_version_of
    from scheduler_svc.kube.watch import Backoff, ResourceWatch, WatchSettings, run_watches

_MODULE_OF: dict[str, str] = {
    "KubeApiClient": "client",
    "KubeConfigError": "client",
    "api_client_from_kubeconfig": "client",
    "api_client_in_cluster": "client",
    "new_api_client": "client",
    "KubeObjects": "objects",
    "KubeObject": "resources",
    "Resource": "resources",
    "object_key": "resources",
    "resource_version_of": "resources",
    "Backoff": "watch",
    "ObjectEvent": "events",
    "ResourceWatch": "watch",
    "Synced": "events",
    "WatchEvent": "events",
    "WatchSettings": "watch",
    "run_watches": "watch",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "Backoff",
    "KubeApiClient",
    "KubeConfigError",
    "KubeObject",
    "KubeObjects",
    "ObjectEvent",
    "Resource",
    "ResourceWatch",
    "Synced",
    "WatchEvent",
    "WatchSettings",
    "api_client_from_kubeconfig",
    "api_client_in_cluster",
    "new_api_client",
    "object_key",
    "resource_version_of",
    "run_watches",
]
