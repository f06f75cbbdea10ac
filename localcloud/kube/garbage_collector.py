"""Garbage collection by owner references, living inside the store as kube's collector would.

The collector indexes every object's ownerReferences as the store commits it, and:
- deletes the dependents of a removed owner once none of their owners remain (Background);
- holds an owner deleted with `propagationPolicy=Foreground` (finalizer `foregroundDeletion`)
  until its dependents are gone, then removes it; a dependent with dependents of its own is
  deleted in the foreground too, so a chain goes level by level (pods, ReplicaSet, Deployment);
- strips the owner reference from the dependents of an owner deleted with `Orphan`;
- collects, on the next loop iteration, an object created or updated with owner references
  none of which exists.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from localcloud.kube.errors import ApiError
from localcloud.kube.objects import JsonObject
from localcloud.kube.resources import ResourceType
from localcloud.kube.watch import DELETED, MODIFIED

if TYPE_CHECKING:
    from localcloud.kube.store import Store

FOREGROUND: Final = "foregroundDeletion"

# (resource type key, namespace or "", name)
ObjectRef = tuple[str, str, str]


class GarbageCollector:
    """Owner-reference bookkeeping and the deletions it drives; see the module docstring."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._dependents_of: dict[str, set[ObjectRef]] = {}
        self._dangling_refs: set[ObjectRef] = set()
        self._pending_check: asyncio.Handle | None = None

    def has_dependents(self, owner_uid: str) -> bool:
        return bool(self._dependents_of.get(owner_uid))

    def observe(
        self, rt: ResourceType, kind: str, obj: JsonObject, previous: JsonObject | None
    ) -> None:
        """Index a committed change; schedule a check when none of its owners exists."""
        self._index_owners(rt, obj if kind != DELETED else None, previous)
        meta = obj["metadata"]
        if kind != DELETED and meta.get("ownerReferences"):
            uids = self._store._uids
            if not any(o.get("uid") in uids for o in meta["ownerReferences"]):
                self._schedule_dangling_check((rt.key, meta.get("namespace", ""), meta["name"]))

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
                    self._dependents_of.setdefault(owner_uid, set()).add(ref)
                else:
                    dependents = self._dependents_of.get(owner_uid)
                    if dependents is not None:
                        dependents.discard(ref)
                        if not dependents:
                            del self._dependents_of[owner_uid]

    def delete_dependents(self, owner_uid: str) -> None:
        """Delete (in the background) each dependent none of whose owners remains."""
        store = self._store
        for key, namespace, name in sorted(self._dependents_of.get(owner_uid, set())):
            rt = store._types.get(key)
            if rt is None:
                continue
            obj = store._bucket(rt).objects.get((namespace, name))
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = obj["metadata"].get("ownerReferences") or []
            in_foreground = [self._is_deleting_in_foreground(str(o.get("uid"))) for o in owners]
            owner_gone = all(
                o.get("uid") not in store._uids or foreground
                for o, foreground in zip(owners, in_foreground, strict=True)
            )
            if owner_gone:
                # kube's collector deletes a dependent that has dependents of its own in the
                # foreground when an owner waits for it, so the chain goes level by level
                waits = any(in_foreground) and self.has_dependents(str(obj["metadata"]["uid"]))
                policy = "Foreground" if waits else "Background"
                store._delete(rt, name, namespace or None, propagation_policy=policy)

    def _is_deleting_in_foreground(self, uid: str) -> bool:
        store = self._store
        located = store._uids.get(uid)
        if located is None:
            return False
        rt, namespace, name = located
        obj = store._bucket(rt).objects.get((namespace, name))
        return obj is not None and FOREGROUND in (obj["metadata"].get("finalizers") or [])

    def settle_foreground_owner(self, owner_uid: str) -> None:
        """Remove an owner held for foreground deletion once its last dependent is gone."""
        store = self._store
        located = store._uids.get(owner_uid)
        if located is None or self._dependents_of.get(owner_uid):
            return
        rt, namespace, name = located
        owner = store._bucket(rt).objects.get((namespace, name))
        if owner is None or FOREGROUND not in (owner["metadata"].get("finalizers") or []):
            return
        finalizers = [f for f in owner["metadata"]["finalizers"] if f != FOREGROUND]
        new = {**owner, "metadata": {**owner["metadata"], "finalizers": finalizers}}
        if not finalizers:
            del new["metadata"]["finalizers"]
            store._remove(rt, new, owner)
        else:
            store._commit(rt, MODIFIED, new, owner)

    def orphan_dependents(self, owner_uid: str) -> None:
        """Strip the owner reference to `owner_uid` from each of its dependents."""
        store = self._store
        for key, namespace, name in sorted(self._dependents_of.get(owner_uid, set())):
            rt = store._types.get(key)
            obj = None if rt is None else store._bucket(rt).objects.get((namespace, name))
            if rt is None or obj is None:
                continue
            refs = [
                r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid
            ]
            meta = {**obj["metadata"], "ownerReferences": refs}
            if not refs:
                del meta["ownerReferences"]
            store._commit(rt, MODIFIED, {**obj, "metadata": meta}, obj)

    def _schedule_dangling_check(self, ref: ObjectRef) -> None:
        """An object whose owners all do not exist is collected soon, as the garbage
        collector does when it finds a dependent of a missing owner."""
        self._dangling_refs.add(ref)
        if self._pending_check is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._collect_dangling()
                return
            self._pending_check = loop.call_soon(self._collect_dangling)

    def _collect_dangling(self) -> None:
        store = self._store
        self._pending_check = None
        pending, self._dangling_refs = self._dangling_refs, set()
        for key, namespace, name in sorted(pending):
            rt = store._types.get(key)
            obj = None if rt is None else store._bucket(rt).objects.get((namespace, name))
            if rt is None or obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = obj["metadata"].get("ownerReferences") or []
            if owners and not any(o.get("uid") in store._uids for o in owners):
                with contextlib.suppress(ApiError):
                    store._delete(rt, name, namespace or None, propagation_policy="Background")
