"""Everything that talks to the Kubernetes API: client, list/watch loop, resources, writes."""

from scheduler_svc.kube.client import (
    KubeApiClient,
    KubeConfigError,
    api_client_from_kubeconfig,
    api_client_in_cluster,
    new_api_client,
)
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import KubeObject, Resource, object_key, resource_version_of
from scheduler_svc.kube.watch import (
    Backoff,
    ObjectEvent,
    ResourceWatch,
    Synced,
    WatchEvent,
    WatchSettings,
    run_watches,
)

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
