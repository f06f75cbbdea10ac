"""The in-memory mirror of the cluster, fed by the watches, read by everything else.

`ClusterMirror.handle` is the handler of every `ResourceWatch`: a `Synced` replaces all objects
of its resource (objects missing from it were deleted while we were not watching, and are
reported as DELETED), an `ObjectEvent` changes one. The mirror keeps the indexes the scheduler
reads on its hot paths (pods by node, pending pods, nodes and NodeClaims by providerID) and
tells listeners about every change, so consumers see one consistent stream of changes whether
it came from a watch event or from a relist.

Stored objects are the watch's dicts and are never mutated, only replaced: a `snapshot()` shares
them by reference (O(objects) pointer copies, no deep copy). Readers must not mutate them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from scheduler_svc.kube.events import EventType, ObjectEvent, Sleep, Synced, WatchEvent
from scheduler_svc.kube.resources import (
    CAPACITY_BUFFERS,
    DAEMON_SETS,
    EC2_NODE_CLASSES,
    NAMESPACES,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    KubeObject,
    Resource,
    object_key,
    resource_version_of,
)
from scheduler_svc.kube.slim import SLIMMERS

if TYPE_CHECKING:
    from scheduler_svc.kube.client import KubeApiClient
    from scheduler_svc.kube.watch import ResourceWatch, WatchSettings


@cache
def _log() -> Any:
    # Imported on first use: structlog (with rich behind it) takes ~0.4 s to import, and
    # `daiku plan` fills a mirror from manifests without ever logging or watching.
    import structlog

    return structlog.get_logger(__name__)


MIRRORED_RESOURCES: tuple[Resource, ...] = (
    PODS,
    NODES,
    NODE_POOLS,
    NODE_CLAIMS,
    EC2_NODE_CLASSES,
    NODE_OVERLAYS,
    CAPACITY_BUFFERS,
    DAEMON_SETS,
    POD_DISRUPTION_BUDGETS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    # Their labels, for pod (anti-)affinity's namespaceSelector.
    NAMESPACES,
)

_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Change:
    """One object added, modified or deleted in the mirror; `old`/`new` are None when absent."""

    resource: Resource
    type: EventType
    key: str
    old: KubeObject | None
    new: KubeObject | None


ChangeListener = Callable[[Change], None]


def pod_node_name(pod: KubeObject) -> str | None:
    """spec.nodeName: the node the pod is bound to, None while unbound."""
    spec = pod.get("spec")
    node_name = spec.get("nodeName") if isinstance(spec, dict) else None
    return node_name if isinstance(node_name, str) and node_name else None


def is_pending_pod(pod: KubeObject) -> bool:
    """Unbound and not finished: waiting for a node (whether kube-scheduler gave up on it yet
    or not; the provisioner applies the stricter Unschedulable test)."""
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return pod_node_name(pod) is None and phase not in _TERMINAL_POD_PHASES


def is_provisionable_pod(pod: KubeObject) -> bool:
    """kube-scheduler gave up on it (PodScheduled=False, reason Unschedulable), and it is not
    bound, not terminating and not a DaemonSet's pod (those follow nodes, never cause them)."""
    if pod_node_name(pod) is not None or not is_pending_pod(pod):
        return False
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("deletionTimestamp"):
        return False
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list) and any(
        isinstance(o, dict) and o.get("kind") == "DaemonSet" and o.get("controller") for o in owners
    ):
        return False
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def _node_provider_id(node: KubeObject) -> str | None:
    spec = node.get("spec")
    provider_id = spec.get("providerID") if isinstance(spec, dict) else None
    return provider_id if isinstance(provider_id, str) and provider_id else None


def _nodeclaim_provider_id(nodeclaim: KubeObject) -> str | None:
    status = nodeclaim.get("status")
    provider_id = status.get("providerID") if isinstance(status, dict) else None
    return provider_id if isinstance(provider_id, str) and provider_id else None


class _Index:
    """Objects of one resource grouped by a derived value (None: not indexed)."""

    def __init__(self, value_of: Callable[[KubeObject], str | None]) -> None:
        self._value_of = value_of
        self._groups: dict[str, dict[str, KubeObject]] = {}

    def remove(self, key: str, obj: KubeObject) -> None:
        value = self._value_of(obj)
        if value is None:
            return
        group = self._groups.get(value)
        if group is not None:
            group.pop(key, None)
            if not group:
                del self._groups[value]

    def add(self, key: str, obj: KubeObject) -> None:
        value = self._value_of(obj)
        if value is not None:
            self._groups.setdefault(value, {})[key] = obj

    def group(self, value: str) -> Mapping[str, KubeObject]:
        return self._groups.get(value, {})

    def values(self) -> Iterable[str]:
        return self._groups.keys()


class _Store:
    """Objects of one resource by key, with its indexes kept in step."""

    def __init__(self, indexes: Mapping[str, _Index]) -> None:
        self.objects: dict[str, KubeObject] = {}
        self.indexes = indexes
        self.resource_version: str | None = None
        self.synced = False

    def put(self, key: str, obj: KubeObject) -> KubeObject | None:
        old = self.objects.get(key)
        if old is not None:
            for index in self.indexes.values():
                index.remove(key, old)
        self.objects[key] = obj
        for index in self.indexes.values():
            index.add(key, obj)
        return old

    def remove(self, key: str) -> KubeObject | None:
        old = self.objects.pop(key, None)
        if old is not None:
            for index in self.indexes.values():
                index.remove(key, old)
        return old


_PENDING = "pending"


def _indexes_for(resource: Resource) -> dict[str, _Index]:
    if resource == PODS:
        return {
            "node": _Index(pod_node_name),
            _PENDING: _Index(lambda pod: _PENDING if is_pending_pod(pod) else None),
        }
    if resource == NODES:
        return {"provider_id": _Index(_node_provider_id)}
    if resource == NODE_CLAIMS:
        return {"provider_id": _Index(_nodeclaim_provider_id)}
    return {}


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The cluster as the mirror saw it at one instant, for the solver.

    Tuples of the mirror's own (read-only) objects; `generation` increases with every change, so
    two snapshots with the same generation are identical.
    """

    generation: int
    pods: tuple[KubeObject, ...]
    pending_pods: tuple[KubeObject, ...]
    nodes: tuple[KubeObject, ...]
    node_pools: tuple[KubeObject, ...]
    node_claims: tuple[KubeObject, ...]
    ec2_node_classes: tuple[KubeObject, ...]
    daemon_sets: tuple[KubeObject, ...]
    pod_disruption_budgets: tuple[KubeObject, ...]
    persistent_volume_claims: tuple[KubeObject, ...]
    persistent_volumes: tuple[KubeObject, ...]
    resource_versions: Mapping[str, str]


class ClusterMirror:
    """Objects of `resources`, kept current by `handle(event)`; not thread-safe (one loop)."""

    def __init__(
        self,
        resources: Iterable[Resource] = MIRRORED_RESOURCES,
        *,
        transforms: Mapping[Resource, Callable[[KubeObject], KubeObject]] = SLIMMERS,
    ) -> None:
        """`transforms` trim objects before they are stored (default: `kube.slim.SLIMMERS`,
        which keeps what every scheduler component reads; pass {} to keep objects whole)."""
        self._stores: dict[Resource, _Store] = {r: _Store(_indexes_for(r)) for r in resources}
        self._transforms = dict(transforms)
        self._listeners: list[ChangeListener] = []
        self._all_synced = asyncio.Event()
        self.generation = 0
        # Derived values of stored objects (the core models `CoreSnapshotter`s convert them
        # to), by id(object): shared by every snapshotter of this mirror, so the provisioner
        # and the disruption controller hold one model per pod, not two. An entry keeps its
        # object referenced (its id stays unique) and goes when the object is replaced or
        # removed.
        self.derived: dict[int, tuple[KubeObject, Any]] = {}

    @property
    def resources(self) -> tuple[Resource, ...]:
        return tuple(self._stores)

    # -- feeding ------------------------------------------------------------------------------

    def handle(self, event: WatchEvent) -> None:
        """Apply one watch event (the `ResourceWatch` handler). Events of resources the mirror
        does not hold are ignored; an object without a name is logged and skipped."""
        self._handle(event, transformed=False)

    def _handle_transformed(self, event: WatchEvent) -> None:
        """The handler of the mirror's own watches, which transformed the objects already."""
        self._handle(event, transformed=True)

    def _handle(self, event: WatchEvent, *, transformed: bool) -> None:
        store = self._stores.get(event.resource)
        if store is None:
            return
        transform = None if transformed else self._transforms.get(event.resource)
        if isinstance(event, Synced):
            if transform is not None:
                event = Synced(
                    event.resource,
                    tuple(transform(o) for o in event.objects),
                    event.resource_version,
                )
            self._replace_all(event, store)
        else:
            if transform is not None:
                event = ObjectEvent(event.resource, event.type, transform(event.object))
            self._apply(event, store)

    def _apply(self, event: ObjectEvent, store: _Store) -> None:
        try:
            key = object_key(event.object)
        except ValueError as error:
            _log().warning("mirror_object_invalid", resource=str(event.resource), error=str(error))
            return
        store.resource_version = resource_version_of(event.object) or store.resource_version
        if event.type == "DELETED":
            old = store.remove(key)
            if old is not None:
                self._notify(Change(event.resource, "DELETED", key, old, None))
            return
        old = store.put(key, event.object)
        self._notify(
            Change(event.resource, "ADDED" if old is None else "MODIFIED", key, old, event.object)
        )

    def _replace_all(self, event: Synced, store: _Store) -> None:
        incoming: dict[str, KubeObject] = {}
        for obj in event.objects:
            try:
                incoming[object_key(obj)] = obj
            except ValueError as error:
                _log().warning(
                    "mirror_object_invalid", resource=str(event.resource), error=str(error)
                )
        changes: list[Change] = []
        for key in [k for k in store.objects if k not in incoming]:
            old = store.remove(key)
            changes.append(Change(event.resource, "DELETED", key, old, None))
        for key, obj in incoming.items():
            current = store.objects.get(key)
            if current is None:
                store.put(key, obj)
                changes.append(Change(event.resource, "ADDED", key, None, obj))
            elif resource_version_of(current) != resource_version_of(obj):
                store.put(key, obj)
                changes.append(Change(event.resource, "MODIFIED", key, current, obj))
        store.resource_version = event.resource_version
        first_sync = not store.synced
        store.synced = True
        _log().info(
            "mirror_synced",
            resource=str(event.resource),
            objects=len(store.objects),
            changes=len(changes),
            first_sync=first_sync,
        )
        for change in changes:
            self._notify(change)
        if first_sync and all(s.synced for s in self._stores.values()):
            self._all_synced.set()

    def _notify(self, change: Change) -> None:
        self.generation += 1
        if change.old is not None and change.old is not change.new:
            self.derived.pop(id(change.old), None)
        for listener in self._listeners:
            try:
                listener(change)
            except Exception:
                _log().exception(
                    "mirror_listener_failed", resource=str(change.resource), key=change.key
                )

    def add_listener(self, listener: ChangeListener) -> None:
        """Call `listener` synchronously after every change (its exceptions are logged)."""
        self._listeners.append(listener)

    # -- sync state ---------------------------------------------------------------------------

    def is_synced(self, resource: Resource | None = None) -> bool:
        """True once `resource` (or every mirrored resource) has been listed at least once."""
        if resource is None:
            return self._all_synced.is_set()
        return self._stores[resource].synced

    async def wait_synced(self) -> None:
        """Return once every mirrored resource has been listed at least once."""
        await self._all_synced.wait()

    def resource_version(self, resource: Resource) -> str | None:
        return self._stores[resource].resource_version

    # -- reads --------------------------------------------------------------------------------

    def get(self, resource: Resource, key: str) -> KubeObject | None:
        """The object with this key ("namespace/name", or "name" for cluster-scoped)."""
        return self._stores[resource].objects.get(key)

    def objects(self, resource: Resource) -> Mapping[str, KubeObject]:
        """A read-only live view of every object of `resource` by key."""
        return MappingProxyType(self._stores[resource].objects)

    def pods_on_node(self, node_name: str) -> tuple[KubeObject, ...]:
        """Pods bound to `node_name` (any phase)."""
        return tuple(self._stores[PODS].indexes["node"].group(node_name).values())

    def pending_pods(self) -> tuple[KubeObject, ...]:
        """Pods not bound to a node and not finished (see `is_pending_pod`)."""
        return tuple(self._stores[PODS].indexes[_PENDING].group(_PENDING).values())

    def node_by_provider_id(self, provider_id: str) -> KubeObject | None:
        """The Node whose spec.providerID is `provider_id`."""
        group = self._stores[NODES].indexes["provider_id"].group(provider_id)
        return next(iter(group.values()), None)

    def nodeclaim(self, name: str) -> KubeObject | None:
        """The NodeClaim named `name`."""
        return self._stores[NODE_CLAIMS].objects.get(name)

    def nodeclaim_by_provider_id(self, provider_id: str) -> KubeObject | None:
        """The NodeClaim whose status.providerID is `provider_id`."""
        group = self._stores[NODE_CLAIMS].indexes["provider_id"].group(provider_id)
        return next(iter(group.values()), None)

    def snapshot(self) -> ClusterSnapshot:
        """The mirror's current content, frozen, for one solve."""

        def all_of(resource: Resource) -> tuple[KubeObject, ...]:
            store = self._stores.get(resource)
            return tuple(store.objects.values()) if store is not None else ()

        return ClusterSnapshot(
            generation=self.generation,
            pods=all_of(PODS),
            pending_pods=self.pending_pods() if PODS in self._stores else (),
            nodes=all_of(NODES),
            node_pools=all_of(NODE_POOLS),
            node_claims=all_of(NODE_CLAIMS),
            ec2_node_classes=all_of(EC2_NODE_CLASSES),
            daemon_sets=all_of(DAEMON_SETS),
            pod_disruption_budgets=all_of(POD_DISRUPTION_BUDGETS),
            persistent_volume_claims=all_of(PERSISTENT_VOLUME_CLAIMS),
            persistent_volumes=all_of(PERSISTENT_VOLUMES),
            resource_versions=MappingProxyType(
                {
                    str(r): s.resource_version
                    for r, s in self._stores.items()
                    if s.resource_version is not None
                }
            ),
        )

    # -- wiring -------------------------------------------------------------------------------

    def watches(
        self,
        api: KubeApiClient,
        *,
        settings: WatchSettings | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> list[ResourceWatch]:
        """One ResourceWatch per mirrored resource, each feeding this mirror (objects are
        trimmed by the watch as they are decoded). Run them with
        `scheduler_svc.kube.watch.run_watches`."""
        from scheduler_svc.kube.watch import ResourceWatch  # aiohttp: only when really watching

        return [
            ResourceWatch(
                api,
                resource,
                self._handle_transformed,
                settings=settings,
                sleep=sleep,
                rng=rng,
                transform=self._transforms.get(resource),
            )
            for resource in self._stores
        ]
