"""Namespace lifecycle inside the store: a namespace being deleted is Terminating until empty.

Objects are created only in a namespace that exists and is not terminating. Deleting a
namespace marks it Terminating and deletes everything in it; the namespace itself is
removed once its last object is gone (settled after every removal in it).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from localcloud.kube.errors import Forbidden, not_found
from localcloud.kube.objects import JsonObject, format_timestamp
from localcloud.kube.resources import ResourceType
from localcloud.kube.watch import MODIFIED

if TYPE_CHECKING:
    from localcloud.kube.store import Store


class NamespaceLifecycle:
    """Deleting namespaces and removing them once empty, as the namespace controller does."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def admit(self, rt: ResourceType, namespace: str, name: str) -> None:
        """Creating in a namespace needs it to exist and not be terminating."""
        store = self._store
        namespace_obj = store._bucket(store.resource("namespaces")).objects.get(("", namespace))
        if namespace_obj is None:
            raise not_found("namespaces", namespace)
        if namespace_obj["metadata"].get("deletionTimestamp"):
            raise Forbidden(
                f'{rt.plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                kind=rt.plural,
                name=name,
            )

    def delete(self, rt: ResourceType, old: JsonObject, now: datetime) -> JsonObject:
        """Mark the namespace Terminating and delete its content."""
        store = self._store
        name = old["metadata"]["name"]
        meta = {**old["metadata"], "deletionTimestamp": format_timestamp(now)}
        status = {**(old.get("status") or {}), "phase": "Terminating"}
        new = store._commit(rt, MODIFIED, {**old, "metadata": meta, "status": status}, old)
        if store._dry_run:
            return new
        for other in list(store._types.values()):
            if not other.namespaced:
                continue
            for obj_ns, obj_name in [k for k in store._bucket(other).objects if k[0] == name]:
                obj = store._bucket(other).objects.get((obj_ns, obj_name))
                if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                    store._delete(other, obj_name, obj_ns, propagation_policy="Background")
        self.settle(name)
        return store._bucket(rt).objects.get(("", name), new)

    def settle(self, namespace: str) -> None:
        """Remove `namespace` when it is terminating and holds nothing any more."""
        store = self._store
        namespaces = store.resource("namespaces")
        ns_obj = store._bucket(namespaces).objects.get(("", namespace))
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        seen: set[tuple[str, str]] = set()
        for other in store._types.values():
            bucket_key = (other.group, other.plural)
            if not other.namespaced or bucket_key in seen:
                continue
            seen.add(bucket_key)
            if any(k[0] == namespace for k in store._bucket(other).objects):
                return
        store._remove(namespaces, ns_obj, ns_obj)
