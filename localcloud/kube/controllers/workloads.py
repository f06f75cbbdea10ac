"""Deployment -> ReplicaSet -> Pods, as kube-controller-manager's two controllers do it.

`ReplicaSetController` keeps `spec.replicas` active pods (not terminal, not being deleted) per
ReplicaSet: it creates missing ones from the template (generateName `<rs>-`, owned by the
ReplicaSet) and, scaling down, deletes the pods kube would pick first: unscheduled before
scheduled, Pending before Running, not ready before ready, newest first. It writes
status.replicas / fullyLabeledReplicas / readyReplicas / availableReplicas / observedGeneration.

`DeploymentController` owns one ReplicaSet per pod template, named `<deployment>-<hash>` with
the `pod-template-hash` label (kube's hash alphabet), sizes the current one to `spec.replicas`,
rolls from the older ones as kube does (RollingUpdate within maxSurge/maxUnavailable, old
unhealthy pods first, paced by the pods' readiness; Recreate: old pods gone first), keeps
`revisionHistoryLimit` old ones, and writes status (replicas,
updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas, observedGeneration,
Available and Progressing conditions) so `kubectl scale` and `kubectl rollout status` work.

Both keep their own index of owned objects, updated at once after their own writes, so a
reconcile never acts twice on a change the watch has not delivered yet.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from localcloud.kube.controllers.informer import Informer, ObjectKey, object_key, resource_types
from localcloud.kube.controllers.reconciler import Reconciler, controller_of, owner_reference
from localcloud.kube.errors import ApiError, NotFound
from localcloud.kube.resources import ResourceType
from localcloud.kube.selectors import label_selector_from_object
from localcloud.kube.store import DELETED, Store, copy_json, format_timestamp

JsonObject = dict[str, Any]
POD_TEMPLATE_HASH: Final = "pod-template-hash"
REVISION_ANNOTATION: Final = "deployment.kubernetes.io/revision"
_HASH_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_PHASE_RANK: Final = {"Pending": 0, "Unknown": 1, "Running": 2}
_TERMINAL: Final = ("Succeeded", "Failed")
# how many pods one reconcile creates at most; the rest come in the next round
_BURST: Final = 500

log = structlog.get_logger("localcloud.kube.controllers.workloads")


def _now() -> datetime:
    return datetime.now(UTC)


def pod_template_hash(template: JsonObject, collision_count: int = 0) -> str:
    """A stable hash of a pod template, spelled as kube spells it (SafeEncodeString of the
    decimal FNV-32a value)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    value = 0x811C9DC5
    for byte in data:
        value ^= byte
        value = (value * 0x01000193) & 0xFFFFFFFF
    return "".join(_HASH_ALPHABET[ord(c) % len(_HASH_ALPHABET)] for c in str(value))


def is_pod_active(pod: JsonObject) -> bool:
    return (
        not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in _TERMINAL
    )


def is_pod_ready(pod: JsonObject) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


class OwnedIndex:
    """Objects by their controller's uid, fed by an informer and by the owner's own writes.

    For pods it also keeps, per owner, which are active and which are ready, so that a
    reconcile of a ReplicaSet with thousands of pods costs O(1) rather than a scan.
    """

    def __init__(self) -> None:
        self.by_owner: dict[str, dict[ObjectKey, JsonObject]] = {}
        self.active: dict[str, set[ObjectKey]] = {}
        self.ready: dict[str, set[ObjectKey]] = {}
        self._owner_of: dict[ObjectKey, str] = {}

    def observe(self, kind: str, obj: JsonObject) -> str | None:
        """Record a change; returns the controller uid to reconcile (old or new), if any."""
        key = object_key(obj)
        old_owner = self._owner_of.pop(key, None)
        if old_owner is not None:
            self.by_owner.get(old_owner, {}).pop(key, None)
            self.active.get(old_owner, set()).discard(key)
            self.ready.get(old_owner, set()).discard(key)
        if kind == DELETED:
            return old_owner
        reference = controller_of(obj)
        if reference is None or not reference.get("uid"):
            return old_owner
        owner = str(reference["uid"])
        self.by_owner.setdefault(owner, {})[key] = obj
        self._owner_of[key] = owner
        if is_pod_active(obj):
            self.active.setdefault(owner, set()).add(key)
            if is_pod_ready(obj):
                self.ready.setdefault(owner, set()).add(key)
        return owner

    def owned(self, owner_uid: str) -> list[JsonObject]:
        return list(self.by_owner.get(owner_uid, {}).values())

    def active_pods(self, owner_uid: str) -> list[JsonObject]:
        objects = self.by_owner.get(owner_uid, {})
        return [objects[k] for k in self.active.get(owner_uid, ())]

    def count_active(self, owner_uid: str) -> int:
        return len(self.active.get(owner_uid, ()))

    def count_ready(self, owner_uid: str) -> int:
        return len(self.ready.get(owner_uid, ()))


class OwnerKeys:
    """The key of each owner (ReplicaSet, Deployment, DaemonSet) a controller reconciles, by
    uid: an owner's change enqueues it, and so does a change to an object it owns (seen
    through `index`)."""

    def __init__(self, reconciler: Reconciler, index: OwnedIndex) -> None:
        self._reconciler = reconciler
        self._index = index
        self._by_uid: dict[str, ObjectKey] = {}

    def owner_keys(self) -> list[ObjectKey]:
        return list(self._by_uid.values())

    def on_owner(self, kind: str, owner: JsonObject, previous: JsonObject | None) -> None:
        if kind == DELETED:
            self._by_uid.pop(owner["metadata"]["uid"], None)
            return
        key = object_key(owner)
        self._by_uid[owner["metadata"]["uid"]] = key
        self._reconciler.enqueue(key)

    def on_owned(self, kind: str, obj: JsonObject, previous: JsonObject | None) -> None:
        owner = self._index.observe(kind, obj)
        if owner is not None and owner in self._by_uid:
            self._reconciler.enqueue(self._by_uid[owner])


class ReplicaSetController(Reconciler):
    """Keeps each ReplicaSet's pods; see the module docstring."""

    name = "replicaset"

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = _now) -> None:
        super().__init__()
        self.store = store
        self._rt = resource_types(store)
        self.clock = clock
        self.pods_index = OwnedIndex()
        owners = OwnerKeys(self, self.pods_index)
        self.replicasets = Informer(store, "replicasets", owners.on_owner)
        self.pods = Informer(store, "pods", owners.on_owned)

    async def run(self) -> None:
        await self.run_with(self.replicasets, self.pods)

    async def reconcile(self, key: ObjectKey) -> None:
        rs = self.replicasets.cache.get(key)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        uid = rs["metadata"]["uid"]
        spec = rs.get("spec") or {}
        wanted = int(spec.get("replicas", 1))
        active = self.pods_index.count_active(uid)
        if active < wanted:
            await self._create_pods(rs, min(wanted - active, _BURST))
            if wanted - active > _BURST:
                self.enqueue(key)
        elif active > wanted:
            pods = sorted(self.pods_index.active_pods(uid), key=_deletion_rank)
            await self._delete_pods(pods[: active - wanted])
        await self._write_status(rs)

    async def _create_pods(self, rs: JsonObject, count: int) -> None:
        template = (rs.get("spec") or {}).get("template") or {}
        meta = rs["metadata"]
        for _ in range(count):
            pod = {
                "metadata": {
                    **copy_json(template.get("metadata") or {}),
                    "generateName": f"{meta['name']}-",
                    "namespace": meta["namespace"],
                    "ownerReferences": [owner_reference(rs)],
                },
                "spec": copy_json(template.get("spec") or {}),
            }
            pod["metadata"].pop("name", None)
            try:
                created = await self.store.create(self._rt["pods"], pod, meta["namespace"])
            except ApiError as error:
                log.warning("pod_create_failed", replicaset=meta["name"], error=str(error))
                return
            self.pods_index.observe("ADDED", created)

    async def _delete_pods(self, pods: list[JsonObject]) -> None:
        for pod in pods:
            meta = pod["metadata"]
            try:
                gone = await self.store.delete(
                    self._rt["pods"],
                    meta["name"],
                    meta["namespace"],
                    preconditions={"uid": meta["uid"]},
                )
            except NotFound:
                continue
            except ApiError as error:
                log.warning("pod_delete_failed", pod=meta["name"], error=str(error))
                continue
            if gone["metadata"].get("deletionTimestamp"):
                self.pods_index.observe("MODIFIED", gone)
            else:
                self.pods_index.observe(DELETED, gone)

    async def _write_status(self, rs: JsonObject) -> None:
        uid = rs["metadata"]["uid"]
        active = self.pods_index.count_active(uid)
        ready = self.pods_index.count_ready(uid)
        status = {
            "replicas": active,
            # pods are made from the template, so all carry its labels (relabelled pods would
            # not; they are not counted apart here)
            "fullyLabeledReplicas": active,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        current = rs.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        await _update_status(self.store, self._rt["replicasets"], rs, {**current, **status})


class DeploymentController(Reconciler):
    """Keeps each Deployment's ReplicaSets; see the module docstring."""

    name = "deployment"

    def __init__(self, store: Store, *, clock: Callable[[], datetime] = _now) -> None:
        super().__init__()
        self.store = store
        self._rt = resource_types(store)
        self.clock = clock
        self.rs_index = OwnedIndex()
        owners = OwnerKeys(self, self.rs_index)
        self.deployments = Informer(store, "deployments", owners.on_owner)
        self.replicasets = Informer(store, "replicasets", owners.on_owned)

    async def run(self) -> None:
        await self.run_with(self.deployments, self.replicasets)

    async def reconcile(self, key: ObjectKey) -> None:
        deployment = self.deployments.cache.get(key)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        if label_selector_from_object(spec.get("selector")).is_empty:
            log.warning("deployment_selector_empty", deployment=f"{key[0]}/{key[1]}")
            return
        wanted = int(spec.get("replicas", 1))
        owned = self.rs_index.owned(deployment["metadata"]["uid"])
        template_hash = pod_template_hash(template)
        current = next(
            (
                rs
                for rs in owned
                if (rs["metadata"].get("labels") or {}).get(POD_TEMPLATE_HASH) == template_hash
            ),
            None,
        )
        old = [rs for rs in owned if rs is not current]
        if not spec.get("paused"):
            live_old = [rs for rs in old if _spec_replicas(rs) or _status(rs, "replicas")]
            if current is None:
                first = 0 if live_old else wanted
                current = await self._create_replicaset(deployment, template_hash, first, old)
            if current is not None:
                if not live_old:
                    if _spec_replicas(current) != wanted:
                        current = await self._scale(current, wanted)
                elif (spec.get("strategy") or {}).get("type") == "Recreate":
                    current = await self._recreate(current, live_old, wanted)
                else:
                    current = await self._roll(spec, current, live_old, wanted)
            await self._prune_history(deployment, old)
        await self._write_status(deployment, current)

    async def _recreate(
        self, current: JsonObject, old: list[JsonObject], wanted: int
    ) -> JsonObject:
        """Recreate: every old pod goes before the new ReplicaSet grows."""
        for rs in old:
            if _spec_replicas(rs):
                await self._scale(rs, 0)
        if all(not _status(rs, "replicas") for rs in old) and _spec_replicas(current) != wanted:
            current = await self._scale(current, wanted)
        return current

    async def _roll(
        self, spec: JsonObject, current: JsonObject, old: list[JsonObject], wanted: int
    ) -> JsonObject:
        """One RollingUpdate step, as kube's deployment controller takes it: grow the new
        ReplicaSet within maxSurge, then shrink the old ones (unhealthy pods first) while at
        least replicas - maxUnavailable pods stay available."""
        if any(
            _status(rs, "observedGeneration") < int(rs["metadata"].get("generation", 1))
            for rs in (current, *old)
        ):
            return current  # a ReplicaSet's counts are stale; its status update brings us back
        surge, unavailable = _rolling_limits(spec, wanted)
        total = _spec_replicas(current) + sum(_spec_replicas(rs) for rs in old)
        if total < wanted + surge and _spec_replicas(current) < wanted:
            grown = min(wanted, _spec_replicas(current) + wanted + surge - total)
            current = await self._scale(current, grown)
        min_available = wanted - unavailable
        all_sets = [current, *old]
        total = sum(_spec_replicas(rs) for rs in all_sets)
        new_unavailable = max(0, _spec_replicas(current) - _status(current, "availableReplicas"))
        cleanup = total - min_available - new_unavailable
        old_by_age = sorted(old, key=_revision)
        for index, rs in enumerate(old_by_age):
            if cleanup <= 0:
                break
            unhealthy = max(0, _spec_replicas(rs) - _status(rs, "availableReplicas"))
            take = min(unhealthy, cleanup)
            if take:
                old_by_age[index] = await self._scale(rs, _spec_replicas(rs) - take)
                cleanup -= take
        available = sum(_status(rs, "availableReplicas") for rs in all_sets)
        scale_down = available - min_available
        for rs in old_by_age:
            if scale_down <= 0:
                break
            take = min(_spec_replicas(rs), scale_down)
            if take:
                await self._scale(rs, _spec_replicas(rs) - take)
                scale_down -= take
        return current

    async def _create_replicaset(
        self, deployment: JsonObject, template_hash: str, replicas: int, old: list[JsonObject]
    ) -> JsonObject | None:
        meta = deployment["metadata"]
        spec = deployment.get("spec") or {}
        template = copy_json(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = (
            template_hash
        )
        selector = copy_json(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = template_hash
        revision = 1 + max(
            (
                int((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0") or 0)
                for rs in old
            ),
            default=0,
        )
        rs = {
            "metadata": {
                "name": f"{meta['name']}-{template_hash}",
                "namespace": meta["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    REVISION_ANNOTATION: str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                    "deployment.kubernetes.io/max-replicas": str(replicas),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": int(spec.get("minReadySeconds", 0)),
                "selector": selector,
                "template": template,
            },
        }
        try:
            created = await self.store.create(self._rt["replicasets"], rs, meta["namespace"])
        except ApiError as error:
            log.warning("replicaset_create_failed", deployment=meta["name"], error=str(error))
            return None
        self.rs_index.observe("ADDED", created)
        log.info("replicaset_created", replicaset=created["metadata"]["name"], replicas=replicas)
        return created

    async def _scale(self, rs: JsonObject, replicas: int) -> JsonObject:
        new = copy_json(rs)
        new["spec"]["replicas"] = replicas
        annotations = new["metadata"].setdefault("annotations", {})
        annotations["deployment.kubernetes.io/desired-replicas"] = str(replicas)
        annotations["deployment.kubernetes.io/max-replicas"] = str(replicas)
        try:
            updated = await self.store.update(self._rt["replicasets"], new)
        except ApiError as error:
            log.info("replicaset_scale_failed", replicaset=rs["metadata"]["name"], error=str(error))
            return rs
        self.rs_index.observe("MODIFIED", updated)
        return updated

    async def _prune_history(self, deployment: JsonObject, old: list[JsonObject]) -> None:
        limit = int((deployment.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [
            rs
            for rs in old
            if int((rs.get("spec") or {}).get("replicas", 0)) == 0
            and int((rs.get("status") or {}).get("replicas", 0)) == 0
        ]
        idle.sort(
            key=lambda rs: int(
                (rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0") or 0
            )
        )
        for rs in idle[: max(0, len(idle) - limit)]:
            try:
                gone = await self.store.delete(
                    self._rt["replicasets"], rs["metadata"]["name"], rs["metadata"]["namespace"]
                )
            except ApiError:
                continue
            self.rs_index.observe(DELETED, gone)

    async def _write_status(self, deployment: JsonObject, current: JsonObject | None) -> None:
        spec = deployment.get("spec") or {}
        wanted = int(spec.get("replicas", 1))
        everything = self.rs_index.owned(deployment["metadata"]["uid"])

        def total(field: str, sets: list[JsonObject]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in sets)

        replicas = total("replicas", everything)
        updated = total("replicas", [current] if current else [])
        ready = total("readyReplicas", everything)
        available = total("availableReplicas", everything)
        now = format_timestamp(self.clock())
        previous = deployment.get("status") or {}
        old_conditions = {c.get("type"): c for c in previous.get("conditions") or []}

        def condition(kind: str, status: str, reason: str, message: str) -> JsonObject:
            before = old_conditions.get(kind) or {}
            same = before.get("status") == status
            return {
                "type": kind,
                "status": status,
                "lastUpdateTime": before.get("lastUpdateTime", now)
                if same and before.get("reason") == reason
                else now,
                "lastTransitionTime": before.get("lastTransitionTime", now) if same else now,
                "reason": reason,
                "message": message,
            }

        rs_name = current["metadata"]["name"] if current else ""
        complete = updated == wanted and replicas == wanted and available == wanted
        status: JsonObject = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(0, wanted - available),
            "conditions": [
                condition(
                    "Available",
                    "True" if available >= wanted else "False",
                    "MinimumReplicasAvailable"
                    if available >= wanted
                    else "MinimumReplicasUnavailable",
                    "Deployment has minimum availability."
                    if available >= wanted
                    else "Deployment does not have minimum availability.",
                ),
                condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                    f'ReplicaSet "{rs_name}" has successfully progressed.'
                    if complete
                    else f'ReplicaSet "{rs_name}" is progressing.',
                ),
            ],
        }
        for field in ("readyReplicas", "availableReplicas", "unavailableReplicas"):
            if status[field] == 0:
                del status[field]  # kube omits zero counts (omitempty)
        if status == previous:
            return
        await _update_status(self.store, self._rt["deployments"], deployment, status)


def _spec_replicas(obj: JsonObject) -> int:
    return int((obj.get("spec") or {}).get("replicas", 0))


def _status(obj: JsonObject, field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0))


def _revision(rs: JsonObject) -> int:
    return int((rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION, "0") or 0)


def _scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        scaled = total * int(value[:-1]) / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def _rolling_limits(spec: JsonObject, wanted: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) in pods: surge rounds up, unavailable down; never both 0."""
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _scaled_value(rolling.get("maxSurge", "25%"), wanted, round_up=True)
    unavailable = _scaled_value(rolling.get("maxUnavailable", "25%"), wanted, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _deletion_rank(pod: JsonObject) -> tuple[int, int, int, str, str]:
    """Pods kube deletes first sort first: unscheduled, Pending, not ready, newest."""
    status = pod.get("status") or {}
    meta = pod["metadata"]
    return (
        1 if (pod.get("spec") or {}).get("nodeName") else 0,
        _PHASE_RANK.get(str(status.get("phase")), 0),
        1 if is_pod_ready(pod) else 0,
        _negated(str(meta.get("creationTimestamp", ""))),
        _negated(str(meta.get("name", ""))),
    )


def _negated(text: str) -> str:
    """A string that sorts in the reverse order of `text` (for 'newest first')."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


async def _update_status(
    store: Store, resource: ResourceType, obj: JsonObject, status: JsonObject
) -> None:
    meta = obj["metadata"]
    body = {**obj, "metadata": dict(meta), "status": status}
    try:
        await store.update(resource, body, meta.get("namespace"), subresource="status")
    except (NotFound, ApiError) as error:
        # a stale read: the change that made it stale enqueues the object again
        log.debug("status_update_skipped", resource=resource, name=meta["name"], error=str(error))
