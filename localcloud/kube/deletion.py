"""Deletion as kube-apiserver does it, for `Store.delete` and the controllers in the apiserver.

`Deletion.delete` checks the preconditions (uid, resourceVersion), applies the propagation
policy (Orphan strips the dependents' owner references, Foreground holds the owner with the
`foregroundDeletion` finalizer until they are gone), deletes a pod bound to a node gracefully
(deletionTimestamp = now + grace, removed by a later delete with grace 0, the kubelet's job),
keeps an object with finalizers until they are removed, and otherwise removes it at once.
`Deletion.remove` is the final step and what it sets off: dependents collected, foreground
owners settled, a terminating namespace or a deleted CRD finished.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from localcloud.kube.crds import CRD_KEY
from localcloud.kube.disruption_budgets import TERMINAL_PHASES
from localcloud.kube.errors import BadRequest, Conflict
from localcloud.kube.garbage_collector import FOREGROUND
from localcloud.kube.objects import JsonObject, format_timestamp
from localcloud.kube.resources import ResourceType
from localcloud.kube.watch import DELETED, MODIFIED

if TYPE_CHECKING:
    from localcloud.kube.store import Store


class Deletion:
    """The delete verb's rules over `store`; see the module docstring."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def delete(  # noqa: PLR0912 - one branch per deletion rule
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: JsonObject | None = None,
    ) -> JsonObject:
        """Delete as the module docstring says; returns the object as last stored."""
        store = self._store
        old = store._get(rt, name, namespace)
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
        if propagation_policy == "Orphan" and not store._dry_run:
            store._gc.orphan_dependents(old_meta["uid"])
        finalizers = list(old_meta.get("finalizers") or [])
        if (
            propagation_policy == "Foreground"
            and store._gc.has_dependents(old_meta["uid"])
            and FOREGROUND not in finalizers
        ):
            finalizers.append(FOREGROUND)
        grace = self._grace_seconds(rt, old, grace_period_seconds)
        now = store._clock()
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
                    return self.remove(rt, new, old)
                return store._commit(rt, MODIFIED, new, old)
            return old
        if rt.key == "v1/namespaces":
            return store._namespaces.delete(rt, old, now)
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
            new = store._commit(rt, MODIFIED, {**old, "metadata": meta}, old)
            if FOREGROUND in finalizers and not store._dry_run:
                store._gc.delete_dependents(old_meta["uid"])
            return new
        return self.remove(rt, {**old, "metadata": dict(old_meta)}, old)

    def _grace_seconds(self, rt: ResourceType, obj: JsonObject, requested: int | None) -> int:
        """Only pods bound to a node and not yet terminal are deleted gracefully."""
        if rt.key != "v1/pods":
            return 0
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in TERMINAL_PHASES:
            return 0
        if requested is None:
            requested = int(spec.get("terminationGracePeriodSeconds", 30))
        return max(0, int(requested))

    def remove(self, rt: ResourceType, final: JsonObject, old: JsonObject) -> JsonObject:
        """Remove an object for good, then collect its dependents and settle its owners."""
        store = self._store
        final = {**final, "metadata": dict(final["metadata"])}
        removed = store._commit(rt, DELETED, final, old)
        if store._dry_run:
            return removed
        meta = removed["metadata"]
        if rt.key == CRD_KEY:
            store._crds.drop(removed)
        store._gc.delete_dependents(meta["uid"])
        for owner in meta.get("ownerReferences") or []:
            store._gc.settle_foreground_owner(str(owner.get("uid", "")))
        if rt.namespaced:
            store._namespaces.settle(meta["namespace"])
        return removed
