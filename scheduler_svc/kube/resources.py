"""The Kubernetes resources the scheduler reads and writes, addressed by group/version/plural.

The watch loop and the writers build request paths from these; nothing else in the service
spells an API path by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler_svc.errors import InvalidObjectError

# A Kubernetes object as decoded from the API server's JSON. Untyped by nature; converted to
# the core's frozen dataclasses at the edge (`scheduler_svc.kube.convert`).
KubeObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: `group` is "" for the core group (served under /api)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The apiVersion objects of this resource carry, e.g. "v1" or "daiku.dev/v1"."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """The URL path of the collection, across all namespaces unless one is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        """The URL path of one object."""
        if self.namespaced and namespace is None:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        return f"{self.collection_path(namespace)}/{name}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


DAIKU_GROUP = "daiku.dev"

PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NODE_POOLS = Resource(DAIKU_GROUP, "v1", "nodepools", "NodePool", namespaced=False)
NODE_CLAIMS = Resource(DAIKU_GROUP, "v1", "nodeclaims", "NodeClaim", namespaced=False)
EC2_NODE_CLASSES = Resource(DAIKU_GROUP, "v1", "ec2nodeclasses", "EC2NodeClass", namespaced=False)
NODE_OVERLAYS = Resource(DAIKU_GROUP, "v1alpha1", "nodeoverlays", "NodeOverlay", namespaced=False)
CAPACITY_BUFFERS = Resource(
    DAIKU_GROUP, "v1alpha1", "capacitybuffers", "CapacityBuffer", namespaced=False
)


def object_key(obj: KubeObject) -> str:
    """ "namespace/name" for namespaced objects, "name" otherwise (client-go's key format)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise InvalidObjectError(
            kind=str(obj.get("kind")), name=None, field="metadata.name", reason="missing"
        )
    namespace = metadata.get("namespace")
    name: str = metadata["name"]
    return f"{namespace}/{name}" if namespace else name


def resource_version_of(obj: KubeObject) -> str | None:
    """metadata.resourceVersion, or None when the object lacks one."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        version = metadata.get("resourceVersion")
        if isinstance(version, str) and version:
            return version
    return None
