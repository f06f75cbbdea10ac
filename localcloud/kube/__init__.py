"""A Kubernetes API server on loopback that speaks the real wire protocol.

- `Store` (`localcloud.kube.store`): the objects, one global resourceVersion, watches; used
  in-process by the control-plane behaviours in `localcloud.kube.controllers`.
- `KubeApiServer` (`localcloud.kube.server`): the HTTP(S) API in front of a store, with
  bearer-token auth and a kubeconfig writer for kubectl and kubernetes_asyncio.
"""

from localcloud.kube.errors import ApiError
from localcloud.kube.resources import ResourceType
from localcloud.kube.server import KubeApiServer
from localcloud.kube.store import ObjectList, Store, Watcher, WatchEvent

__all__ = [
    "ApiError",
    "KubeApiServer",
    "ObjectList",
    "ResourceType",
    "Store",
    "WatchEvent",
    "Watcher",
]
