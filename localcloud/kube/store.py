"""The object store behind the local Kubernetes API server, usable in-process by controllers.

Everything the HTTP layer serves goes through `Store`, and in-process control-plane behaviours
(scheduler, kubelets, controllers) use the same calls, so they see exactly what kubectl sees.

Layout: `storage.ObjectStorage` (types, buckets, the commit, get/list/watch; `watch` holds the
events and watchers) under `Store` (the write verbs and their admission rules, `validation`),
with the controllers that live in the apiserver beside it: `deletion` (graceful deletion,
finalizers, propagation), `garbage_collector`, `disruption_budgets` (eviction), `namespaces`,
`crds` and `subresources` (binding, scale).

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
- `create(resource, obj, namespace=None, fresh=False) -> dict`: fills uid, creationTimestamp,
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

Writes copy the object they are given unless `fresh=True` says it is the caller's to give
away (the HTTP layer's decoded bodies). `copy=True` (the default of every read and write)
hands out private deep copies; `copy=False`
hands out the stored dicts, which the store never mutates after storing, so they are safe to
read but must not be modified (the HTTP layer and hot-path controllers use it to skip copying).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from typing import Any, Final

from localcloud.kube.builtin_rules import event_v1_violations
from localcloud.kube.crds import CRD_KEY, CustomResourceDefinitions
from localcloud.kube.deletion import Deletion
from localcloud.kube.disruption_budgets import DisruptionBudgets
from localcloud.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from localcloud.kube.fields import FieldValidation
from localcloud.kube.garbage_collector import GarbageCollector
from localcloud.kube.managed_fields import Writers
from localcloud.kube.namespaces import NamespaceLifecycle
from localcloud.kube.objects import Clock, JsonObject, copy_json, format_timestamp, utc_now
from localcloud.kube.patches import apply_patch
from localcloud.kube.priority import PRIORITY_CLASSES_KEY, admit_pod
from localcloud.kube.resources import BUILTIN_RESOURCES, ResourceType
from localcloud.kube.schema import apply_structural_schema, validate
from localcloud.kube.services import SERVICE_KEY, ServiceAddresses, carry_cluster_ip
from localcloud.kube.storage import ObjectStorage
from localcloud.kube.subresources import Subresources
from localcloud.kube.validation import (
    check_immutable,
    name_hint,
    raise_violations,
    spec_of,
    validate_name,
    validate_object,
)
from localcloud.kube.watch import (
    ADDED,
    DELETED,
    MODIFIED,
    Bucket,
    ObjectList,
    Watcher,
    WatchEvent,
)

EVENTS_V1_KEY: Final = "events.k8s.io/v1/events"
DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")

_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


class Store(ObjectStorage):
    """The apiserver's write verbs over `ObjectStorage`; see the module docstring."""

    def __init__(
        self,
        *,
        clock: Clock = utc_now,
        event_window: int = 10_000,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    ) -> None:
        super().__init__(clock=clock, event_window=event_window)
        self._gc = GarbageCollector(self)
        self._budgets = DisruptionBudgets(self)
        self._namespaces = NamespaceLifecycle(self)
        self._crds = CustomResourceDefinitions(self)
        self._subresources = Subresources(self)
        self._deletion = Deletion(self)
        self._service_addresses = ServiceAddresses()
        # the fieldValidation of the HTTP write being served (see `fields`)
        self.fields = FieldValidation()
        # the fieldManager of the HTTP write being served (see `managed_fields`)
        self.writers = Writers()
        for resource_type in BUILTIN_RESOURCES:
            self.register(resource_type)
        for name in namespaces:
            self._create(self.resource("namespaces"), {"metadata": {"name": name}}, None)

    def _on_commit(
        self, rt: ResourceType, kind: str, obj: JsonObject, previous: JsonObject | None
    ) -> None:
        self._gc.observe(rt, kind, obj, previous)
        if rt.key in ("v1/pods", "policy/v1/poddisruptionbudgets"):
            self._budgets.schedule_status(obj["metadata"].get("namespace", ""))

    # ----------------------------------------------------------------- create

    async def create(
        self,
        resource: str | ResourceType,
        obj: JsonObject,
        namespace: str | None = None,
        *,
        copy: bool = True,
        fresh: bool = False,
    ) -> JsonObject:
        """`fresh`: `obj` is the caller's to give away (a decoded request body), so the store
        keeps it instead of a copy."""
        rt = self.resource(resource)
        if rt.key == EVENTS_V1_KEY:
            raise_violations(rt, name_hint(obj), event_v1_violations(obj))
        stored = self._create(
            self._storage_type(rt), self._to_storage(rt, obj), namespace, fresh=fresh
        )
        return self._served(rt, stored, copy=copy)

    def _create(  # noqa: PLR0912 - one step per apiserver admission rule
        self, rt: ResourceType, body: JsonObject, namespace: str | None, *, fresh: bool = False
    ) -> JsonObject:
        if not isinstance(body, dict):
            raise BadRequest(f"the body of a {rt.kind} must be an object")
        obj = body if fresh else copy_json(body)
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
            self._namespaces.admit(rt, ns, str(meta.get("name", "")))
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
        validate_name(rt, name)
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
        obj = self._admitted(rt, obj, name, bucket)
        self.writers.record(rt, None, obj, self._clock)
        if rt.key == CRD_KEY:
            self._crds.establish(obj)
        return self._commit(rt, ADDED, obj, None)

    def _admitted(self, rt: ResourceType, obj: JsonObject, name: str, bucket: Bucket) -> JsonObject:
        """A new object as admission leaves it: fields checked, defaulted (a Service with its
        clusterIP), validated."""
        obj = self._checked_fields(rt, obj, None)
        if rt.key == "v1/pods":
            self._admit_priority(obj)
        if rt.defaulter is not None:
            rt.defaulter(obj)
        if rt.key == SERVICE_KEY:
            taken = bucket.objects.values()
            raise_violations(rt, name, self._service_addresses.assign(obj, taken))
        validate_object(rt, obj)
        return obj

    def _admit_priority(self, pod: JsonObject) -> None:
        """The Priority admission plugin (priority.py) against the stored PriorityClasses."""
        classes = self._bucket(self._types[PRIORITY_CLASSES_KEY]).objects
        admit_pod(pod, lambda name: classes.get(("", name)), classes.values)

    def _checked_fields(
        self, rt: ResourceType, obj: JsonObject, old: JsonObject | None
    ) -> JsonObject:
        """`obj` without unknown fields (reported per the request's fieldValidation), and for
        custom resources defaulted and validated by the CRD's schema."""
        if rt.schema is None:
            return self.fields.check_builtin(rt, obj)
        pruned: list[str] = []
        # pruning edits in place: an update works on a private copy, never on stored subtrees
        obj = apply_structural_schema(obj if old is None else copy_json(obj), rt.schema, pruned)
        self.fields.report(rt, pruned)
        raise_violations(rt, name_hint(obj), validate(obj, rt.schema, old))
        return obj

    # ----------------------------------------------------------------- update

    async def update(
        self,
        resource: str | ResourceType,
        obj: JsonObject,
        namespace: str | None = None,
        subresource: str | None = None,
        *,
        copy: bool = True,
        fresh: bool = False,
    ) -> JsonObject:
        """`fresh` as for `create`."""
        rt = self.resource(resource)
        stored = self._update(
            self._storage_type(rt), self._to_storage(rt, obj), namespace, subresource, fresh=fresh
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
            new = {
                **{k: v for k, v in old.items() if k != "status"},
                "metadata": _status_write_metadata(old_meta, body["metadata"]),
            }
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
        if rt.key == SERVICE_KEY:
            carry_cluster_ip(new, old)
        if subresource != "status" and rt.defaulter is not None and rt.key != "v1/pods":
            rt.defaulter(new)
        new = self._checked_fields(rt, new, old)
        meta = new["metadata"]
        if subresource is None:
            check_immutable(rt, new, old)
        validate_object(rt, new, old)
        self.writers.record(rt, old, new, self._clock)
        if new == old:
            return old
        if rt.has_generation and spec_of(rt, new) != spec_of(rt, old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if rt.key == CRD_KEY:
            self._crds.establish(new)
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

    def _delete(
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: JsonObject | None = None,
    ) -> JsonObject:
        """`delete` of a resolved storage type (see `deletion.Deletion.delete`); the
        controllers living in the apiserver delete through it."""
        return self._deletion.delete(
            rt,
            name,
            namespace,
            grace_period_seconds=grace_period_seconds,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )

    def _remove(self, rt: ResourceType, final: JsonObject, old: JsonObject) -> JsonObject:
        """Remove an object for good (see `deletion.Deletion.remove`)."""
        return self._deletion.remove(rt, final, old)

    # ------------------------------------------------------------ subresources

    async def bind(self, namespace: str, pod_name: str, node_name: str) -> JsonObject:
        """Bind a pending pod to a node (what the pods/binding subresource does)."""
        return self._subresources.bind(namespace, pod_name, node_name)

    async def evict(
        self, namespace: str, pod_name: str, grace_period_seconds: int | None = None
    ) -> JsonObject:
        """Delete a pod unless that would violate its PodDisruptionBudget (see
        `DisruptionBudgets.evict`)."""
        return self._budgets.evict(namespace, pod_name, grace_period_seconds)

    async def scale(
        self, resource: str | ResourceType, name: str, namespace: str | None = None
    ) -> JsonObject:
        """The autoscaling/v1 Scale of a deployment or replicaset."""
        return self._subresources.scale(resource, name, namespace)

    async def set_scale(
        self,
        resource: str | ResourceType,
        name: str,
        replicas: int,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Set the replicas of a deployment or replicaset through its Scale."""
        return self._subresources.set_scale(resource, name, replicas, namespace, resource_version)


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


def _status_write_metadata(old_meta: JsonObject, body_meta: JsonObject) -> JsonObject:
    """A status write keeps the stored metadata, except managedFields: the apiserver's status
    strategy resets the rest, and an apply to /status brings its manager's entry."""
    meta = dict(old_meta)
    if "managedFields" in body_meta:
        meta["managedFields"] = body_meta["managedFields"]
    return meta
