"""Storage and watch: typed buckets of objects, one global resourceVersion, reads and watches.

`ObjectStorage` is the part of the store that knows nothing of the apiserver's write rules:
which resources are served, where their objects live, the commit that stamps a
resourceVersion and feeds the watchers, and the reads (get, list, watch) over it. `Store`
(`localcloud.kube.store`) adds the write verbs and the controllers that live in the apiserver.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator, Mapping
from functools import partial

from localcloud.kube.errors import BadRequest, Gone, NotFound, Timeout, not_found
from localcloud.kube.objects import Clock, JsonObject, copy_json
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from localcloud.kube.watch import ADDED, DELETED, Bucket, ObjectList, Watcher, WatchEvent


class ObjectStorage:
    """Served types, their objects and change logs, the global resourceVersion and reads."""

    def __init__(self, *, clock: Clock, event_window: int) -> None:
        self._clock = clock
        self._event_window = event_window
        self._rv = 0
        self._dry_run = False
        self._types: dict[str, ResourceType] = {}
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._uids: dict[str, tuple[ResourceType, str, str]] = {}
        # `resource(name)` answers, forgotten whenever the served types change
        self._resolved: dict[str, ResourceType] = {}

    # ----------------------------------------------------------------- types

    def register(self, resource_type: ResourceType) -> None:
        """Serve `resource_type` (replacing a previous registration of the same key)."""
        self._types[resource_type.key] = resource_type
        self._resolved.clear()
        if not resource_type.storage_key:
            self._buckets.setdefault((resource_type.group, resource_type.plural), Bucket())

    def unregister(self, resource_type: ResourceType) -> None:
        self._types.pop(resource_type.key, None)
        self._resolved.clear()

    def resource_types(self) -> list[ResourceType]:
        return list(self._types.values())

    def lookup(self, key: str) -> ResourceType | None:
        """The served type with key `v1/pods` / `apps/v1/deployments`, or None."""
        return self._types.get(key)

    def resource(self, name: str | ResourceType) -> ResourceType:
        """Resolve `pods`, `v1/pods`, `apps/v1/deployments`, `deployments.apps`; NotFound."""
        if isinstance(name, ResourceType):
            return name
        if found := self._resolved.get(name):
            return found
        found = self._types.get(name) or self._resolve(name)
        self._resolved[name] = found
        return found

    def _resolve(self, name: str) -> ResourceType:
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

    def _bucket(self, rt: ResourceType) -> Bucket:
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
        at_resource_version: int | None = None,
    ) -> ObjectList:
        rt = self.resource(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        rt.check_field_labels(fields.labels)
        if at_resource_version is None:
            objects, version = self._bucket(rt).objects, self._rv
        else:
            objects, version = self._objects_at(rt, at_resource_version), at_resource_version
        return ObjectList(self._select(rt, objects, namespace, labels, fields, copy=copy), version)

    def _objects_at(
        self, rt: ResourceType, resource_version: int
    ) -> dict[tuple[str, str], JsonObject]:
        """The objects of `rt` as they were at `resource_version`: today's, with every later
        change undone from the retained log (Gone when it no longer reaches back that far;
        Timeout for a version this store has not reached)."""
        if resource_version > self._rv:
            raise Timeout(
                f"Too large resource version: {resource_version}, current: {self._rv}",
                causes=[
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
            )
        bucket = self._bucket(rt)
        if resource_version < bucket.floor_rv:
            raise Gone(f"too old resource version: {resource_version} ({bucket.floor_rv + 1})")
        objects = dict(bucket.objects)
        for event in reversed(bucket.log):
            if event.resource_version <= resource_version:
                break
            meta = event.object["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if event.type == ADDED:
                objects.pop(key, None)
            else:
                objects[key] = event.previous if event.previous is not None else event.object
        return objects

    def _select(
        self,
        rt: ResourceType,
        objects: Mapping[tuple[str, str], JsonObject],
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        copy: bool,
    ) -> builtins.list[JsonObject]:
        items = []
        for (ns, _), stored in objects.items():
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
                for obj in self._select(rt, bucket.objects, namespace, labels, fields, copy=False)
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
            partial(self._served, rt, copy=copy),
            resource_type=rt,
            bucket=bucket,
            namespace=namespace,
            cursor_rv=since,
            initial=initial,
            label_selector=labels,
            field_selector=fields,
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
        self._on_commit(rt, kind, obj, previous)
        bucket.log.append(WatchEvent(kind, obj, self._rv, previous))
        if len(bucket.log) > 2 * self._event_window:
            dropped = len(bucket.log) - self._event_window
            bucket.floor_rv = bucket.log[dropped - 1].resource_version
            del bucket.log[:dropped]
        bucket.wake()
        return obj

    def _on_commit(
        self, rt: ResourceType, kind: str, obj: JsonObject, previous: JsonObject | None
    ) -> None:
        """Called by every commit once the object is stored, before watchers see the event:
        where the controllers living in the apiserver learn of changes."""
