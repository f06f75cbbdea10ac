"""The object store behind the local Kubernetes API server, usable in-process by controllers.

Everything the HTTP layer serves goes through `Store`, and in-process control-plane behaviours
(scheduler, kubelets, controllers) use the same calls, so they see exactly what kubectl sees.

Objects are JSON-like dicts (the wire form: `apiVersion`, `kind`, `metadata`, `spec`, `status`),
keyed by (resource, namespace, name). A resource is named by a `ResourceType` or a string:
`"pods"`, `"v1/pods"`, `"apps/v1/deployments"`, `"deployments.apps"`, or for custom resources
`"daiku.dev/v1/nodepools"` / `"nodepools.daiku.dev"`. Cluster-scoped resources take
`namespace=None`.

Contract (every method is a coroutine unless marked; none of them blocks on I/O):

- `get(resource, name, namespace=None) -> dict`; NotFound.
- `list(resource, namespace=None, label_selector="", field_selector="", copy=True) -> ObjectList`
  with `.items` and `.resource_version` (int, the global version the list is consistent at).
  Selectors are strings in the API's syntax (see `selectors`); BadRequest on bad syntax.
- `create(resource, obj, namespace=None) -> dict`: fills uid, creationTimestamp,
  resourceVersion, generation (1), apiVersion/kind, name from `generateName`; drops `status`
  for resources with a status subresource (except nodes), applies the apiserver's defaults
  (pods start `Pending`). AlreadyExists, NotFound (namespace), Forbidden (namespace
  terminating), Invalid (bad name, pod without containers).
- `update(resource, obj, namespace=None, subresource=None) -> dict`: optimistic concurrency on
  `metadata.resourceVersion` (stale -> Conflict; absent -> unconditional). With a status
  subresource, the main endpoint keeps the stored status and `subresource="status"` keeps
  everything but the status. generation is bumped when anything outside metadata/status
  changes. An update that changes nothing writes nothing (no new resourceVersion, no event).
  Removing the last finalizer of an object being deleted removes it.
- `patch(resource, name, body, patch_type, namespace=None, subresource=None) -> dict` with
  patch_type "merge" | "json" | "strategic" (UnsupportedMediaType for strategic on custom
  resources, as the real apiserver); then the same rules as update.
- `delete(resource, name, namespace=None, grace_period_seconds=None, propagation_policy=None,
  preconditions=None) -> dict`: an object with finalizers gets `deletionTimestamp` and stays
  until they are removed; a pod bound to a node (not yet terminal) is deleted gracefully
  (deletionTimestamp = now + grace, `deletionGracePeriodSeconds`) and removed by a later delete
  with grace 0 (the kubelet's job); otherwise it is removed at once. Dependents (by
  ownerReferences uid) of a removed object are deleted in the background when none of their
  owners remain; "Foreground" holds the owner (finalizer `foregroundDeletion`) until they are
  gone, "Orphan" strips the owner reference instead. An object created or updated with owner
  references none of which exists is collected on the next loop iteration, as kube's garbage
  collector does. A namespace being deleted is Terminating
  until everything in it is gone. Returns the object as last stored.
- `bind(namespace, pod_name, node_name)`: sets spec.nodeName + PodScheduled=True; Conflict when
  already bound.
- `evict(namespace, pod_name, grace_period_seconds=None)`: deletes the pod unless a matching
  PodDisruptionBudget would be violated (TooManyRequests, reason DisruptionBudget).
- `scale(resource, name, namespace)` / `set_scale(resource, name, replicas, namespace,
  resource_version=None)`: the autoscaling/v1 Scale view of deployments and replicasets.
- `watch(resource, namespace=None, since_rv=None, label_selector="", field_selector="",
  copy=True) -> Watcher` (sync). A Watcher is an async iterator of `WatchEvent`s (unpack as
  `(type, obj)`; type ADDED | MODIFIED | DELETED). `since_rv=None` or 0 first yields ADDED for
  every current object, then changes; a positive `since_rv` yields exactly the changes after
  it; one beyond the store's version (a client from before a restart) raises Timeout (504,
  cause ResourceVersionTooLarge) as kube-apiserver does. Raises Gone (410) when events after
  `since_rv` are no longer retained (the window holds `event_window` events per resource;
  `compact()` drops them all); a watcher that falls behind
  the window also gets Gone from its next read. With selectors, an object that starts matching
  arrives as ADDED and one that stops matching as DELETED. `Watcher.poll(timeout)` returns the
  next batch, or [] after `timeout` seconds with nothing new (the HTTP layer sends a BOOKMARK
  then). `Watcher.close()` ends the iteration.
- `register(resource_type)` / `unregister(resource_type)` (sync): serve another resource.
  Creating a CustomResourceDefinition registers its served versions (status Established), and
  deleting it removes the type and all its objects.
- `resource(name) -> ResourceType`, `lookup(key)`, `resource_types()`, `resource_version`
  (sync).
- `with store.dry_run(): await store.create(...)` validates and returns the result without
  storing it (what `dryRun=All` does). Only wrap a single call: the flag is store-wide.

`copy=True` (the default of every read and write) hands out private deep copies; `copy=False`
hands out the stored dicts, which the store never mutates after storing, so they are safe to
read but must not be modified (the HTTP layer and hot-path controllers use it to skip copying).
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import contextlib
import json
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from localcloud.kube.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    Timeout,
    TooManyRequests,
    UnsupportedMediaType,
    not_found,
)
from localcloud.kube.patches import json_patch, merge_patch, strategic_merge_patch
from localcloud.kube.resources import BUILTIN_RESOURCES, ResourceType, resource_types_from_crd
from localcloud.kube.schema import Violation, apply_structural_schema, validate
from localcloud.kube.selectors import (
    FieldSelector,
    LabelSelector,
    label_selector_from_object,
    label_selector_to_string,
    parse_field_selector,
    parse_label_selector,
)

JsonObject = dict[str, Any]
Clock = Callable[[], datetime]

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL_PHASES: Final = ("Succeeded", "Failed")
_FOREGROUND: Final = "foregroundDeletion"
_ORPHAN: Final = "orphan"


def copy_json(value: Any) -> Any:
    """Deep copy of a JSON-like value, several times faster than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class WatchEvent:
    """One change: `type`, `object`, its `resource_version`; unpacks as `(type, object)`."""

    __slots__ = ("_line", "object", "previous", "resource_version", "type")

    def __init__(
        self,
        type: str,
        obj: JsonObject,
        resource_version: int,
        previous: JsonObject | None = None,
    ) -> None:
        self.type = type
        self.object = obj
        self.resource_version = resource_version
        self.previous = previous
        self._line: bytes | None = None

    def __iter__(self) -> Any:
        return iter((self.type, self.object))

    def __repr__(self) -> str:
        meta = self.object.get("metadata", {})
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        return f"WatchEvent({self.type}, {where}, rv={self.resource_version})"

    def encoded(self) -> bytes:
        """The event as one JSON line, as the watch stream carries it (computed once)."""
        if self._line is None:
            self._line = (
                json.dumps({"type": self.type, "object": self.object}, separators=(",", ":")) + "\n"
            ).encode()
        return self._line


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[JsonObject]
    resource_version: int


class _Bucket:
    """The objects of one (group, plural) and the window of their recent changes."""

    __slots__ = ("changed", "floor_rv", "log", "objects")

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], JsonObject] = {}
        self.log: list[WatchEvent] = []
        # events with resource_version <= floor_rv may have been dropped from the log
        self.floor_rv = 0
        self.changed = asyncio.Event()


def _rv_of(event: WatchEvent) -> int:
    return event.resource_version


class Watcher:
    """A subscription to one resource's changes; see the module docstring for the contract."""

    def __init__(
        self,
        store: Store,
        *,
        resource_type: ResourceType,
        bucket: _Bucket,
        namespace: str | None,
        cursor_rv: int,
        initial: list[WatchEvent],
        label_selector: LabelSelector,
        field_selector: FieldSelector,
        copy: bool,
    ) -> None:
        self._store = store
        self.resource_type = resource_type
        self._bucket = bucket
        self._namespace = namespace
        self.cursor_rv = cursor_rv
        self._pending = initial
        self._labels = label_selector
        self._fields = field_selector
        self._copy = copy
        self._closed = False
        self._filtered = (
            namespace is not None or not label_selector.is_empty or not (field_selector.is_empty)
        )

    def close(self) -> None:
        """End the iteration; a `poll` waiting right now returns [] at once."""
        self._closed = True
        self._store.wake(self._bucket)

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        while not self._closed:
            for event in await self.poll(None):
                yield event

    def _matches(self, obj: JsonObject | None) -> bool:
        if obj is None:
            return False
        if self.resource_type.from_storage is not None:
            obj = self.resource_type.from_storage(obj)
        meta = obj.get("metadata") or {}
        if self._namespace is not None and meta.get("namespace") != self._namespace:
            return False
        return self._labels.matches(meta.get("labels")) and self._fields.matches(obj)

    def _view(self, event: WatchEvent) -> WatchEvent | None:
        if not self._filtered:
            return event
        now_matches = self._matches(event.object)
        if event.type == MODIFIED:
            was_matching = self._matches(event.previous)
            if now_matches and not was_matching:
                return WatchEvent(ADDED, event.object, event.resource_version)
            if was_matching and not now_matches:
                return WatchEvent(DELETED, event.object, event.resource_version)
        return event if now_matches else None

    def _deliver(self, events: list[WatchEvent]) -> list[WatchEvent]:
        out = []
        for event in events:
            served = self._store._served(self.resource_type, event.object, copy=self._copy)
            if served is event.object:
                out.append(event)  # shared, with its encoded line cached once for all watchers
            else:
                out.append(WatchEvent(event.type, served, event.resource_version))
        return out

    def take(self) -> list[WatchEvent]:
        """The events available now, without waiting (raises Gone when fallen behind)."""
        if self._pending:
            pending, self._pending = self._pending, []
            return self._deliver(pending)
        bucket = self._bucket
        if self.cursor_rv < bucket.floor_rv:
            self._closed = True
            raise Gone(f"too old resource version: {self.cursor_rv} ({bucket.floor_rv + 1})")
        log = bucket.log
        if not log or log[-1].resource_version <= self.cursor_rv:
            return []
        start = bisect.bisect_right(log, self.cursor_rv, key=_rv_of)
        events = log[start:]
        self.cursor_rv = events[-1].resource_version
        views = [v for v in map(self._view, events) if v is not None]
        return self._deliver(views)

    async def poll(self, timeout_seconds: float | None) -> list[WatchEvent]:
        """Wait for the next batch of events; [] when `timeout_seconds` pass with none."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while not self._closed:
            events = self.take()
            if events:
                return events
            changed = self._bucket.changed
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return []
            try:
                # not wait_for: on 3.11 it can swallow a cancellation (bpo-42130)
                async with asyncio.timeout(remaining):
                    await changed.wait()
            except TimeoutError:
                return []
        return []


class Store:
    """In-memory objects with one global resourceVersion; see the module docstring."""

    def __init__(
        self,
        *,
        clock: Clock = _utc_now,
        event_window: int = 10_000,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    ) -> None:
        self._clock = clock
        self._event_window = event_window
        self._rv = 0
        self._dry_run = False
        self._pdb_dirty: set[str] = set()
        self._pdb_refresh: asyncio.Handle | None = None
        self._dangling: set[tuple[str, str, str]] = set()
        self._dangling_check: asyncio.Handle | None = None
        self._types: dict[str, ResourceType] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._uids: dict[str, tuple[ResourceType, str, str]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        for resource_type in BUILTIN_RESOURCES:
            self.register(resource_type)
        for name in namespaces:
            self._create(self.resource("namespaces"), {"metadata": {"name": name}}, None)

    # ----------------------------------------------------------------- types

    def register(self, resource_type: ResourceType) -> None:
        """Serve `resource_type` (replacing a previous registration of the same key)."""
        self._types[resource_type.key] = resource_type
        if not resource_type.storage_key:
            self._buckets.setdefault((resource_type.group, resource_type.plural), _Bucket())

    def unregister(self, resource_type: ResourceType) -> None:
        self._types.pop(resource_type.key, None)

    def resource_types(self) -> list[ResourceType]:
        return list(self._types.values())

    def lookup(self, key: str) -> ResourceType | None:
        """The served type with key `v1/pods` / `apps/v1/deployments`, or None."""
        return self._types.get(key)

    def resource(self, name: str | ResourceType) -> ResourceType:
        """Resolve `pods`, `v1/pods`, `apps/v1/deployments`, `deployments.apps`; NotFound."""
        if isinstance(name, ResourceType):
            return name
        if found := self._types.get(name):
            return found
        candidates = [
            t for t in self._types.values() if name in (t.plural, f"{t.plural}.{t.group}", t.kind)
        ]
        if not candidates:
            raise NotFound(f'the server could not find the requested resource "{name}"')
        # the core group wins, as it does for kubectl's short names
        candidates.sort(key=lambda t: (t.group != "", t.group))
        return candidates[0]

    @property
    def resource_version(self) -> int:
        return self._rv

    def _bucket(self, rt: ResourceType) -> _Bucket:
        return (
            self._buckets[(rt.group, rt.plural)]
            if not rt.storage_key
            else (self._bucket(self._types[rt.storage_key]))
        )

    def _storage_type(self, rt: ResourceType) -> ResourceType:
        return self._types[rt.storage_key] if rt.storage_key else rt

    @staticmethod
    def _to_storage(rt: ResourceType, obj: JsonObject) -> JsonObject:
        return rt.to_storage(obj) if rt.to_storage is not None else obj

    def _check_scope(self, rt: ResourceType, namespace: str | None) -> str:
        if rt.namespaced:
            if not namespace:
                raise BadRequest(f"{rt.group_resource} is namespaced: a namespace is required")
            return namespace
        return ""

    # ----------------------------------------------------------------- reads

    async def get(
        self,
        resource: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        copy: bool = True,
    ) -> JsonObject:
        rt = self.resource(resource)
        return self._served(rt, self._get(rt, name, namespace), copy=copy)

    def get_nowait(
        self, resource: str | ResourceType, name: str, namespace: str | None = None
    ) -> JsonObject | None:
        """The stored object (not a copy: do not modify it) or None; for hot-path readers."""
        rt = self.resource(resource)
        ns = self._check_scope(rt, namespace)
        return self._bucket(rt).objects.get((ns, name))

    def _get(self, rt: ResourceType, name: str, namespace: str | None) -> JsonObject:
        ns = self._check_scope(rt, namespace)
        obj = self._bucket(rt).objects.get((ns, name))
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def _served(self, rt: ResourceType, obj: JsonObject, *, copy: bool) -> JsonObject:
        if rt.from_storage is not None:
            obj = rt.from_storage(obj)
        elif obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        return copy_json(obj) if copy else obj

    async def list(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        *,
        copy: bool = True,
    ) -> ObjectList:
        rt = self.resource(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        rt.check_field_labels(fields.labels)
        return ObjectList(self._select(rt, namespace, labels, fields, copy=copy), self._rv)

    def _select(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        copy: bool,
    ) -> builtins.list[JsonObject]:
        items = []
        for (ns, _), stored in self._bucket(rt).objects.items():
            if namespace and rt.namespaced and ns != namespace:
                continue
            obj = stored if rt.from_storage is None else rt.from_storage(stored)
            meta = obj["metadata"]
            if labels.requirements and not labels.matches(meta.get("labels")):
                continue
            if fields.requirements and not fields.matches(obj):
                continue
            items.append(self._served(rt, obj, copy=copy))
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return items

    def watch(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        since_rv: int | str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        *,
        copy: bool = True,
    ) -> Watcher:
        rt = self.resource(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        rt.check_field_labels(fields.labels)
        bucket = self._bucket(rt)
        namespace = namespace if rt.namespaced and namespace else None
        try:
            since = int(since_rv) if since_rv not in (None, "") else 0
        except ValueError as error:
            raise BadRequest(f"invalid resourceVersion {since_rv!r}") from error
        initial: list[WatchEvent] = []
        if since <= 0:
            since = self._rv
            initial = [
                WatchEvent(ADDED, obj, int(obj["metadata"]["resourceVersion"]))
                for obj in self._select(rt, namespace, labels, fields, copy=False)
            ]
        elif since < bucket.floor_rv:
            raise Gone(f"too old resource version: {since} ({bucket.floor_rv + 1})")
        elif since > self._rv:
            # a version this store never reached (it restarted): the client must relist
            raise Timeout(
                f"Too large resource version: {since}, current: {self._rv}",
                causes=[
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
            )
        return Watcher(
            self,
            resource_type=rt,
            bucket=bucket,
            namespace=namespace,
            cursor_rv=since,
            initial=initial,
            label_selector=labels,
            field_selector=fields,
            copy=copy,
        )

    def require_retained(self, resource: str | ResourceType, resource_version: int) -> None:
        """Raise Gone (410 Expired) when changes of `resource` after `resource_version` were
        compacted away: a list continued from then could no longer be made consistent."""
        bucket = self._bucket(self.resource(resource))
        if resource_version < bucket.floor_rv:
            raise Gone(
                f"The provided continue parameter is too old: resource version "
                f"{resource_version} ({bucket.floor_rv + 1})"
            )

    def compact(self) -> None:
        """Forget every retained change, as an etcd compaction does: older watches get 410."""
        for bucket in self._buckets.values():
            bucket.log.clear()
            bucket.floor_rv = self._rv

    @contextlib.contextmanager
    def using_clock(self, clock: Clock) -> Iterator[None]:
        """Stamp creation, deletion and condition times from `clock` inside the block (tests
        that move a scheduler's clock move the API server's with it, as one cluster's clocks
        agree)."""
        previous, self._clock = self._clock, clock
        try:
            yield
        finally:
            self._clock = previous

    @contextlib.contextmanager
    def dry_run(self) -> Iterator[None]:
        """Writes inside this block validate and return their result but store nothing
        (the API's `dryRun=All`). The store's calls are synchronous underneath, so nothing
        else runs while the flag is set."""
        self._dry_run = True
        try:
            yield
        finally:
            self._dry_run = False

    # ----------------------------------------------------------------- commits

    def _commit(
        self,
        rt: ResourceType,
        kind: str,
        obj: JsonObject,
        previous: JsonObject | None,
    ) -> JsonObject:
        if self._dry_run:
            # a dry run validates and shows the result, and stores nothing
            obj["metadata"]["resourceVersion"] = (
                previous["metadata"]["resourceVersion"] if previous else ""
            )
            return obj
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self._bucket(rt)
        uid = meta["uid"]
        if kind == DELETED:
            bucket.objects.pop(key, None)
            self._uids.pop(uid, None)
        else:
            bucket.objects[key] = obj
            self._uids[uid] = (rt, key[0], key[1])
        self._index_owners(rt, obj if kind != DELETED else None, previous)
        if kind != DELETED and meta.get("ownerReferences"):
            owners = meta["ownerReferences"]
            if not any(o.get("uid") in self._uids for o in owners):
                self._schedule_dangling_check((rt.key, key[0], key[1]))
        if rt.key in ("v1/pods", "policy/v1/poddisruptionbudgets"):
            self._schedule_budget_status(key[0])
        bucket.log.append(WatchEvent(kind, obj, self._rv, previous))
        if len(bucket.log) > 2 * self._event_window:
            dropped = len(bucket.log) - self._event_window
            bucket.floor_rv = bucket.log[dropped - 1].resource_version
            del bucket.log[:dropped]
        self.wake(bucket)
        return obj

    @staticmethod
    def wake(bucket: _Bucket) -> None:
        """Wake every watcher waiting on `bucket` (they re-check their position)."""
        changed, bucket.changed = bucket.changed, asyncio.Event()
        changed.set()

    def _index_owners(
        self, rt: ResourceType, obj: JsonObject | None, previous: JsonObject | None
    ) -> None:
        for source, add in ((previous, False), (obj, True)):
            if source is None:
                continue
            meta = source["metadata"]
            ref = (rt.key, meta.get("namespace", ""), meta["name"])
            for owner in meta.get("ownerReferences") or []:
                owner_uid = owner.get("uid")
                if not owner_uid:
                    continue
                if add:
                    self._dependents.setdefault(owner_uid, set()).add(ref)
                else:
                    dependents = self._dependents.get(owner_uid)
                    if dependents is not None:
                        dependents.discard(ref)
                        if not dependents:
                            del self._dependents[owner_uid]

    # ----------------------------------------------------------------- create

    async def create(
        self,
        resource: str | ResourceType,
        obj: JsonObject,
        namespace: str | None = None,
        *,
        copy: bool = True,
    ) -> JsonObject:
        rt = self.resource(resource)
        stored = self._create(self._storage_type(rt), self._to_storage(rt, obj), namespace)
        return self._served(rt, stored, copy=copy)

    def _create(  # noqa: PLR0912, PLR0915 - one step per apiserver admission rule
        self, rt: ResourceType, body: JsonObject, namespace: str | None
    ) -> JsonObject:
        if not isinstance(body, dict):
            raise BadRequest(f"the body of a {rt.kind} must be an object")
        obj = copy_json(body)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            ns = namespace or body_ns or ""
            if not ns:
                raise BadRequest(f"{rt.kind} {meta.get('name')!r}: a namespace is required")
            meta["namespace"] = ns
            namespace_obj = self._bucket(self.resource("namespaces")).objects.get(("", ns))
            if namespace_obj is None:
                raise not_found("namespaces", ns)
            if namespace_obj["metadata"].get("deletionTimestamp"):
                raise Forbidden(
                    f'{rt.plural} "{meta.get("name", "")}" is forbidden: unable to create new '
                    f"content in namespace {ns} because it is being terminated",
                    kind=rt.plural,
                    name=str(meta.get("name", "")),
                )
        else:
            meta.pop("namespace", None)
            ns = ""
        bucket = self._bucket(rt)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise Invalid(
                    f"{rt.kind} is invalid: metadata.name: Required value: name or "
                    "generateName is required",
                    kind=rt.kind,
                )
            for _ in range(100):
                name = prefix + "".join(random.choices(_GENERATE_ALPHABET, k=5))
                if (ns, name) not in bucket.objects:
                    break
            meta["name"] = name
        name = str(meta["name"])
        self._validate_name(rt, name)
        if (ns, name) in bucket.objects:
            raise AlreadyExists(
                f'{rt.group_resource} "{name}" already exists',
                kind=rt.plural,
                name=name,
                group=rt.group,
            )
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if meta.get("resourceVersion"):
            raise BadRequest("resourceVersion should not be set on objects to be created")
        for server_field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = format_timestamp(self._clock())
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.has_status and not rt.status_on_create:
            obj.pop("status", None)
        if rt.schema is not None:
            apply_structural_schema(obj, rt.schema)
            _raise_violations(rt, name_hint(obj), validate(obj, rt.schema))
        if rt.defaulter is not None:
            rt.defaulter(obj)
        self._validate(rt, obj)
        if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
            self._establish_crd(obj)
        return self._commit(rt, ADDED, obj, None)

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if len(name) > 253 or not _NAME.match(name):
            raise Invalid(
                f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a '
                "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                kind=rt.kind,
                name=name,
                group=rt.group,
            )

    def _validate(self, rt: ResourceType, obj: JsonObject) -> None:
        name = obj["metadata"]["name"]
        for key, value in (obj["metadata"].get("labels") or {}).items():
            if not isinstance(value, str):
                raise Invalid(
                    f'{rt.kind} "{name}" is invalid: metadata.labels[{key}]: label values '
                    "must be strings",
                    kind=rt.kind,
                    name=name,
                )
        for index, owner in enumerate(obj["metadata"].get("ownerReferences") or []):
            for field in ("apiVersion", "kind", "name", "uid"):
                if not (isinstance(owner, dict) and owner.get(field)):
                    raise Invalid(
                        f'{rt.kind} "{name}" is invalid: '
                        f"metadata.ownerReferences[{index}].{field}: Required value",
                        kind=rt.kind,
                        name=name,
                    )
        if rt.key == "v1/pods" and not (obj.get("spec") or {}).get("containers"):
            raise Invalid(
                f'Pod "{name}" is invalid: spec.containers: Required value',
                kind="Pod",
                name=name,
            )

    def _establish_crd(self, crd: JsonObject) -> None:
        types = resource_types_from_crd(crd)
        names = (crd.get("spec") or {}).get("names") or {}
        now = format_timestamp(self._clock())
        crd["status"] = {
            "acceptedNames": copy_json(names),
            "storedVersions": [t.version for t in types[:1]],
            "conditions": [
                {
                    "type": condition,
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
                for condition, reason, message in (
                    ("NamesAccepted", "NoConflicts", "no conflicts found"),
                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                )
            ],
        }
        if not self._dry_run:
            for resource_type in types:
                self.register(resource_type)

    # ----------------------------------------------------------------- update

    async def update(
        self,
        resource: str | ResourceType,
        obj: JsonObject,
        namespace: str | None = None,
        subresource: str | None = None,
        *,
        copy: bool = True,
    ) -> JsonObject:
        rt = self.resource(resource)
        stored = self._update(
            self._storage_type(rt), self._to_storage(rt, obj), namespace, subresource
        )
        return self._served(rt, stored, copy=copy)

    def _update(  # noqa: PLR0912 - one step per apiserver update rule
        self,
        rt: ResourceType,
        body: JsonObject,
        namespace: str | None,
        subresource: str | None,
        *,
        fresh: bool = False,
    ) -> JsonObject:
        """Store `body` over the current object; `fresh` means body is already a private copy."""
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            raise BadRequest(f"the body of a {rt.kind} update must be an object with metadata")
        if subresource not in (None, "status"):
            raise NotFound(f"{rt.group_resource} has no subresource {subresource!r}")
        name = str(body["metadata"].get("name") or "")
        if rt.namespaced:
            body_ns = body["metadata"].get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            namespace = namespace or body_ns
        old = self._get(rt, name, namespace)
        old_meta = old["metadata"]
        wanted_rv = body["metadata"].get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
                kind=rt.plural,
                name=name,
                group=rt.group,
            )
        new = body if fresh else copy_json(body)
        if subresource == "status":
            new = {**{k: v for k, v in old.items() if k != "status"}, "metadata": dict(old_meta)}
            if "status" in body:
                new["status"] = body["status"] if fresh else copy_json(body["status"])
        elif rt.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        meta = new["metadata"] = dict(new["metadata"])
        for immutable in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if subresource != "status" and rt.defaulter is not None and rt.key != "v1/pods":
            rt.defaulter(new)
        if rt.schema is not None:
            # pruning edits in place: work on a private copy, never on shared stored subtrees
            new = apply_structural_schema(copy_json(new), rt.schema)
            meta = new["metadata"]
            _raise_violations(rt, name, validate(new, rt.schema, old))
        self._validate(rt, new)
        if subresource is None:
            _check_immutable(rt, new, old)
        if new == old:
            return old
        if rt.has_generation and _spec_of(rt, new) != _spec_of(rt, old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
            self._establish_crd(new)
        if (
            old_meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(rt, new, old)
        return self._commit(rt, MODIFIED, new, old)

    async def patch(
        self,
        resource: str | ResourceType,
        name: str,
        body: Any,
        patch_type: str = "merge",
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        copy: bool = True,
    ) -> JsonObject:
        rt = self.resource(resource)
        return self._served(
            rt,
            self._patch(rt, name, body, patch_type, namespace, subresource=subresource),
            copy=copy,
        )

    def _patch(
        self,
        rt: ResourceType,
        name: str,
        body: Any,
        patch_type: str,
        namespace: str | None,
        *,
        subresource: str | None,
    ) -> JsonObject:
        storage = self._storage_type(rt)
        old = self._served(rt, self._get(storage, name, namespace), copy=False)
        patched = apply_patch(rt, old, body, patch_type)
        if not isinstance(patched, dict):
            raise Invalid(f'{rt.kind} "{name}": the patch did not produce an object')
        meta = patched.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise Invalid(f'{rt.kind} "{name}": metadata must be an object')
        # a patch may carry a resourceVersion precondition; otherwise it applies to `old`
        if meta.get("resourceVersion") in (None, ""):
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = old["metadata"]["namespace"]
        return self._update(
            storage, self._to_storage(rt, patched), namespace, subresource, fresh=True
        )

    # ----------------------------------------------------------------- delete

    async def delete(
        self,
        resource: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: JsonObject | None = None,
        copy: bool = True,
    ) -> JsonObject:
        rt = self.resource(resource)
        obj = self._delete(
            self._storage_type(rt),
            name,
            namespace,
            grace_period_seconds=grace_period_seconds,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )
        return self._served(rt, obj, copy=copy)

    def _delete(  # noqa: PLR0912 - one branch per deletion rule
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: JsonObject | None = None,
    ) -> JsonObject:
        old = self._get(rt, name, namespace)
        old_meta = old["metadata"]
        for field, stored in (
            ("uid", old_meta["uid"]),
            ("resourceVersion", old_meta["resourceVersion"]),
        ):
            expected = (preconditions or {}).get(field)
            if expected and str(expected) != stored:
                raise Conflict(
                    f'Operation cannot be fulfilled on {rt.group_resource} "{name}": '
                    f"Precondition failed: {field}: {expected}, {field} in object meta: {stored}",
                    kind=rt.plural,
                    name=name,
                    group=rt.group,
                )
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise BadRequest(f"invalid propagationPolicy {propagation_policy!r}")
        if propagation_policy == "Orphan" and not self._dry_run:
            self._orphan_dependents(old_meta["uid"])
        finalizers = list(old_meta.get("finalizers") or [])
        dependents = self._dependents.get(old_meta["uid"])
        if propagation_policy == "Foreground" and dependents and _FOREGROUND not in finalizers:
            finalizers.append(_FOREGROUND)
        grace = self._grace_seconds(rt, old, grace_period_seconds)
        now = self._clock()
        if old_meta.get("deletionTimestamp"):
            current_grace = int(old_meta.get("deletionGracePeriodSeconds") or 0)
            if grace < current_grace or finalizers != list(old_meta.get("finalizers") or []):
                new = {**old, "metadata": {**old_meta, "finalizers": finalizers}}
                if grace < current_grace:
                    new["metadata"]["deletionGracePeriodSeconds"] = grace
                    new["metadata"]["deletionTimestamp"] = format_timestamp(
                        now + timedelta(seconds=grace)
                    )
                if not new["metadata"]["finalizers"]:
                    del new["metadata"]["finalizers"]
                if not finalizers and grace == 0:
                    return self._remove(rt, new, old)
                return self._commit(rt, MODIFIED, new, old)
            return old
        if rt.key == "v1/namespaces":
            return self._delete_namespace(rt, old, now)
        if finalizers or grace > 0:
            meta = {
                **old_meta,
                "deletionTimestamp": format_timestamp(now + timedelta(seconds=grace)),
                "deletionGracePeriodSeconds": grace,
            }
            if finalizers:
                meta["finalizers"] = finalizers
            if rt.has_generation:
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
            new = self._commit(rt, MODIFIED, {**old, "metadata": meta}, old)
            if _FOREGROUND in finalizers and not self._dry_run:
                self._delete_dependents(old_meta["uid"])
            return new
        return self._remove(rt, {**old, "metadata": dict(old_meta)}, old)

    def _grace_seconds(self, rt: ResourceType, obj: JsonObject, requested: int | None) -> int:
        """Only pods bound to a node and not yet terminal are deleted gracefully."""
        if rt.key != "v1/pods":
            return 0
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in _TERMINAL_PHASES:
            return 0
        if requested is None:
            requested = int(spec.get("terminationGracePeriodSeconds", 30))
        return max(0, int(requested))

    def _remove(self, rt: ResourceType, final: JsonObject, old: JsonObject) -> JsonObject:
        """Remove an object for good, then collect its dependents and settle its owners."""
        final = {**final, "metadata": dict(final["metadata"])}
        removed = self._commit(rt, DELETED, final, old)
        if self._dry_run:
            return removed
        meta = removed["metadata"]
        if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
            self._drop_crd(removed)
        self._delete_dependents(meta["uid"])
        for owner in meta.get("ownerReferences") or []:
            self._settle_foreground_owner(str(owner.get("uid", "")))
        if rt.namespaced:
            self._settle_namespace(meta["namespace"])
        return removed

    def _delete_dependents(self, owner_uid: str) -> None:
        for key, namespace, name in sorted(self._dependents.get(owner_uid, set())):
            rt = self._types.get(key)
            if rt is None:
                continue
            obj = self._bucket(rt).objects.get((namespace, name))
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = obj["metadata"].get("ownerReferences") or []
            owner_gone = all(
                o.get("uid") not in self._uids or self._is_deleting_in_foreground(str(o.get("uid")))
                for o in owners
            )
            if owner_gone:
                self._delete(rt, name, namespace or None, propagation_policy="Background")

    def _is_deleting_in_foreground(self, uid: str) -> bool:
        located = self._uids.get(uid)
        if located is None:
            return False
        rt, namespace, name = located
        obj = self._bucket(rt).objects.get((namespace, name))
        return obj is not None and _FOREGROUND in (obj["metadata"].get("finalizers") or [])

    def _settle_foreground_owner(self, owner_uid: str) -> None:
        located = self._uids.get(owner_uid)
        if located is None or self._dependents.get(owner_uid):
            return
        rt, namespace, name = located
        owner = self._bucket(rt).objects.get((namespace, name))
        if owner is None or _FOREGROUND not in (owner["metadata"].get("finalizers") or []):
            return
        finalizers = [f for f in owner["metadata"]["finalizers"] if f != _FOREGROUND]
        new = {**owner, "metadata": {**owner["metadata"], "finalizers": finalizers}}
        if not finalizers:
            del new["metadata"]["finalizers"]
            self._remove(rt, new, owner)
        else:
            self._commit(rt, MODIFIED, new, owner)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for key, namespace, name in sorted(self._dependents.get(owner_uid, set())):
            rt = self._types.get(key)
            obj = None if rt is None else self._bucket(rt).objects.get((namespace, name))
            if rt is None or obj is None:
                continue
            refs = [
                r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
            ]
            meta = {**obj["metadata"], "ownerReferences": refs}
            if not refs:
                del meta["ownerReferences"]
            self._commit(rt, MODIFIED, {**obj, "metadata": meta}, obj)

    def _delete_namespace(self, rt: ResourceType, old: JsonObject, now: datetime) -> JsonObject:
        name = old["metadata"]["name"]
        meta = {**old["metadata"], "deletionTimestamp": format_timestamp(now)}
        status = {**(old.get("status") or {}), "phase": "Terminating"}
        new = self._commit(rt, MODIFIED, {**old, "metadata": meta, "status": status}, old)
        if self._dry_run:
            return new
        for other in list(self._types.values()):
            if not other.namespaced:
                continue
            for obj_ns, obj_name in [k for k in self._bucket(other).objects if k[0] == name]:
                obj = self._bucket(other).objects.get((obj_ns, obj_name))
                if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                    self._delete(other, obj_name, obj_ns, propagation_policy="Background")
        self._settle_namespace(name)
        return self._bucket(rt).objects.get(("", name), new)

    def _settle_namespace(self, namespace: str) -> None:
        namespaces = self.resource("namespaces")
        ns_obj = self._bucket(namespaces).objects.get(("", namespace))
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        seen: set[tuple[str, str]] = set()
        for other in self._types.values():
            bucket_key = (other.group, other.plural)
            if not other.namespaced or bucket_key in seen:
                continue
            seen.add(bucket_key)
            if any(k[0] == namespace for k in self._bucket(other).objects):
                return
        self._remove(namespaces, ns_obj, ns_obj)

    def _drop_crd(self, crd: JsonObject) -> None:
        try:
            types = resource_types_from_crd(crd)
        except Invalid:
            return
        for resource_type in types:
            bucket = self._bucket(resource_type)
            for obj in list(bucket.objects.values()):
                self._remove(resource_type, obj, obj)
            self.unregister(resource_type)

    # ----------------------------------------------------------------- pods

    async def bind(self, namespace: str, pod_name: str, node_name: str) -> JsonObject:
        """Bind a pending pod to a node (what the pods/binding subresource does)."""
        rt = self.resource("pods")
        pod = self._get(rt, pod_name, namespace)
        if pod.get("spec", {}).get("nodeName"):
            raise Conflict(
                f'Operation cannot be fulfilled on pods/binding "{pod_name}": pod {pod_name} is '
                f'already assigned to node "{pod["spec"]["nodeName"]}"',
                kind="pods/binding",
                name=pod_name,
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise Conflict(f'pod "{pod_name}" is being deleted, cannot be assigned to a host')
        status = copy_json(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": format_timestamp(self._clock()),
            }
        )
        status["conditions"] = conditions
        new = {
            **pod,
            "metadata": dict(pod["metadata"]),
            "spec": {**pod["spec"], "nodeName": node_name},
            "status": status,
        }
        return self._served(rt, self._commit(rt, MODIFIED, new, pod), copy=True)

    async def evict(
        self, namespace: str, pod_name: str, grace_period_seconds: int | None = None
    ) -> JsonObject:
        """Delete a pod unless that would violate its PodDisruptionBudget.

        Raises NotFound, TooManyRequests (budget exhausted; details.causes reason
        DisruptionBudget) or InternalError when more than one budget selects the pod, as the
        real eviction API does. Pods that are already terminating, Pending or terminal are
        evicted without consulting budgets.
        """
        pods = self.resource("pods")
        pod = self._get(pods, pod_name, namespace)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in (*_TERMINAL_PHASES, "Pending"):
            return self._served(
                pods,
                self._delete(pods, pod_name, namespace, grace_period_seconds=grace_period_seconds),
                copy=True,
            )
        budgets = [
            pdb
            for pdb in self._bucket(self.resource("poddisruptionbudgets")).objects.values()
            if pdb["metadata"]["namespace"] == namespace
            and label_selector_from_object((pdb.get("spec") or {}).get("selector")).matches(
                pod["metadata"].get("labels")
            )
            and (pdb.get("spec") or {}).get("selector") is not None
        ]
        if len(budgets) > 1:
            raise InternalError(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support."
            )
        if budgets:
            self._check_budget(budgets[0], pods, namespace)
        return self._served(
            pods,
            self._delete(pods, pod_name, namespace, grace_period_seconds=grace_period_seconds),
            copy=True,
        )

    def _check_budget(self, pdb: JsonObject, pods: ResourceType, namespace: str) -> None:
        _, healthy, desired = self._budget_counts(pdb, pods, namespace)
        if healthy - desired <= 0:
            name = pdb["metadata"]["name"]
            raise TooManyRequests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} needs {desired} healthy pods "
                        f"and has {healthy} currently",
                    }
                ],
            )

    # ---------------------------------------------------- disruption budget status

    def _schedule_dangling_check(self, ref: tuple[str, str, str]) -> None:
        """An object whose owners all do not exist is collected soon, as the garbage
        collector does when it finds a dependent of a missing owner."""
        self._dangling.add(ref)
        if self._dangling_check is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._collect_dangling()
                return
            self._dangling_check = loop.call_soon(self._collect_dangling)

    def _collect_dangling(self) -> None:
        self._dangling_check = None
        pending, self._dangling = self._dangling, set()
        for key, namespace, name in sorted(pending):
            rt = self._types.get(key)
            obj = None if rt is None else self._bucket(rt).objects.get((namespace, name))
            if rt is None or obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = obj["metadata"].get("ownerReferences") or []
            if owners and not any(o.get("uid") in self._uids for o in owners):
                with contextlib.suppress(ApiError):
                    self._delete(rt, name, namespace or None, propagation_policy="Background")

    def _schedule_budget_status(self, namespace: str) -> None:
        """Refresh the status of the namespace's PodDisruptionBudgets soon (coalesced), as the
        disruption controller does; eviction itself always counts live."""
        budgets = self._bucket(self.resource("poddisruptionbudgets")).objects
        if not any(ns == namespace for ns, _ in budgets):
            return
        self._pdb_dirty.add(namespace)
        if self._pdb_refresh is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._refresh_budget_status()
                return
            self._pdb_refresh = loop.call_soon(self._refresh_budget_status)

    def _refresh_budget_status(self) -> None:
        self._pdb_refresh = None
        dirty, self._pdb_dirty = self._pdb_dirty, set()
        pdbs = self.resource("poddisruptionbudgets")
        pods = self.resource("pods")
        for (namespace, _), pdb in list(self._bucket(pdbs).objects.items()):
            if namespace not in dirty:
                continue
            expected, healthy, desired = self._budget_counts(pdb, pods, namespace)
            allowed = max(0, healthy - desired)
            old_status = pdb.get("status") or {}
            old_conditions = old_status.get("conditions") or [{}]
            condition_status = "True" if allowed > 0 else "False"
            status = {
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": condition_status,
                        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                        "message": "",
                        "observedGeneration": pdb["metadata"].get("generation", 1),
                        "lastTransitionTime": old_conditions[0].get("lastTransitionTime")
                        if old_conditions[0].get("status") == condition_status
                        else format_timestamp(self._clock()),
                    }
                ],
            }
            if status != old_status:
                new = {**pdb, "metadata": dict(pdb["metadata"]), "status": status}
                self._commit(pdbs, MODIFIED, new, pdb)
        self._pdb_dirty.clear()  # our own status writes marked the namespaces again

    def _budget_counts(
        self, pdb: JsonObject, pods: ResourceType, namespace: str
    ) -> tuple[int, int, int]:
        """(expected pods, currently healthy, desired healthy) for a PodDisruptionBudget."""
        spec = pdb.get("spec") or {}
        selector = label_selector_from_object(spec.get("selector"))
        selected = [
            p
            for p in self._bucket(pods).objects.values()
            if p["metadata"]["namespace"] == namespace
            and selector.matches(p["metadata"].get("labels"))
            and (p.get("status") or {}).get("phase") not in _TERMINAL_PHASES
        ]
        healthy = sum(
            1 for p in selected if not p["metadata"].get("deletionTimestamp") and _is_ready(p)
        )
        expected = len(selected)
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        return expected, healthy, desired

    # ----------------------------------------------------------------- scale

    async def scale(
        self, resource: str | ResourceType, name: str, namespace: str | None = None
    ) -> JsonObject:
        """The autoscaling/v1 Scale of a deployment or replicaset."""
        rt = self.resource(resource)
        if not rt.has_scale:
            raise NotFound(f"{rt.group_resource} has no scale subresource")
        return _scale_of(self._get(rt, name, namespace))

    async def set_scale(
        self,
        resource: str | ResourceType,
        name: str,
        replicas: int,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        rt = self.resource(resource)
        if not rt.has_scale:
            raise NotFound(f"{rt.group_resource} has no scale subresource")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise Invalid(
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas}: must be greater than or equal to 0"
            )
        current = self._get(rt, name, namespace)
        body = {
            **current,
            "metadata": {**current["metadata"], "resourceVersion": resource_version or ""},
            "spec": {**current.get("spec", {}), "replicas": replicas},
        }
        return _scale_of(self._update(rt, body, namespace, None, fresh=True))


def apply_patch(rt: ResourceType, old: JsonObject, body: Any, patch_type: str) -> Any:
    """Apply a patch of `patch_type` (merge | json | strategic) to a copy of `old`."""
    if patch_type == "json":
        return json_patch(old, body)
    if not isinstance(body, dict):
        raise BadRequest(f"a {patch_type} patch must be a JSON object")
    if patch_type == "merge":
        return merge_patch(old, body)
    if patch_type == "strategic":
        if not rt.strategic_patch:
            raise UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml"
            )
        return strategic_merge_patch(old, body)
    raise UnsupportedMediaType(f"unsupported patch type {patch_type!r}")


# What a pod update may change in spec (k8s.io/kubernetes ValidatePodUpdate).
_POD_MUTABLE_CONTAINER_FIELDS: Final = ("image",)
_POD_MUTABLE_SPEC_FIELDS: Final = (
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "tolerations",
    "schedulingGates",
)


def _pod_spec_shape(spec: JsonObject) -> JsonObject:
    shape = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC_FIELDS}
    for field in ("containers", "initContainers"):
        if field in shape:
            shape[field] = [
                {k: v for k, v in c.items() if k not in _POD_MUTABLE_CONTAINER_FIELDS}
                for c in shape[field]
            ]
    return shape


def _check_immutable(rt: ResourceType, new: JsonObject, old: JsonObject) -> None:
    """The apiserver's update validation for the fields daiku's objects hold fixed."""
    name = new["metadata"]["name"]
    if rt.key == "v1/pods":
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if _pod_spec_shape(new_spec) != _pod_spec_shape(old_spec):
            raise Invalid(
                f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields '
                "other than `spec.containers[*].image`, `spec.initContainers[*].image`, "
                "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                "if it was previously negative)",
                kind="Pod",
                name=name,
            )
    elif rt.group == "apps" and rt.plural in ("deployments", "replicasets", "daemonsets"):
        old_selector = (old.get("spec") or {}).get("selector")
        if (new.get("spec") or {}).get("selector") != old_selector:
            raise Invalid(
                f'{rt.kind}.apps "{name}" is invalid: spec.selector: Invalid value: '
                "field is immutable",
                kind=rt.kind,
                name=name,
                group="apps",
            )


def name_hint(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _raise_violations(rt: ResourceType, name: str, violations: list[Violation]) -> None:
    """Invalid (422) listing every violation, worded like the apiserver's field errors."""
    if not violations:
        return
    details = ", ".join(f"{v.path}: {v.message}" for v in violations)
    qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    raise Invalid(
        f'{qualified} "{name}" is invalid: {details}',
        kind=rt.kind,
        name=name,
        group=rt.group,
        causes=[
            {"reason": "FieldValueInvalid", "message": v.message, "field": v.path}
            for v in violations
        ],
    )


def _spec_of(rt: ResourceType, obj: JsonObject) -> JsonObject:
    """What generation tracks: all but metadata, and but status when it is a subresource."""
    skipped = ("metadata", "status") if rt.has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skipped}


def _is_ready(pod: JsonObject) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        percent = int(value[:-1])
        scaled = total * percent / 100
        return int(-(-scaled // 1)) if round_up else int(scaled)
    return int(value)


def _scale_of(obj: JsonObject) -> JsonObject:
    meta = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 0))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": label_selector_to_string((obj.get("spec") or {}).get("selector")),
        },
    }


__all__ = [
    "ADDED",
    "DEFAULT_NAMESPACES",
    "DELETED",
    "MODIFIED",
    "ObjectList",
    "Store",
    "WatchEvent",
    "Watcher",
    "apply_patch",
    "copy_json",
    "format_timestamp",
]
