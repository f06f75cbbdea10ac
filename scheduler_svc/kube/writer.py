"""What the scheduler writes to Kubernetes: NodeClaims (create, status, labels, finalizer,
delete), Node registration patches, Events and NodePool/EC2NodeClass status.

Every method states the one API call (or the two) it makes; callers decide what to do on the
typed errors of `scheduler_svc.errors` (`KubeNotFoundError` for an object already gone is
usually "done"). Conditions are written whole: the CRDs declare them a map keyed by type, and a
merge patch replaces the list, so `set_nodeclaim_conditions` computes the new list from the
current one and writes it conditionally on that one's resourceVersion (`update_status`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from scheduler_svc.errors import KubeConflictError, KubeInvalidError, KubeNotFoundError
from scheduler_svc.kube.resources import (
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PODS,
    KubeObject,
    Resource,
)

if TYPE_CHECKING:  # only annotations: the pure helpers here must not pull in aiohttp
    from scheduler_svc.kube.objects import KubeObjects

TERMINATION_FINALIZER = "daiku.dev/termination"
UNREGISTERED_TAINT_KEY = "daiku.dev/unregistered"
# Karpenter's karpenter.sh/disrupted:NoSchedule: on a node being taken away (no new pods).
DISRUPTED_TAINT_KEY = "daiku.dev/disrupted"
DISRUPTED_TAINT: dict[str, str] = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
# Conflicts in a row before a read-modify-write (an object's status, a Node's taints) gives
# up; each attempt reads the object again.
WRITE_ATTEMPTS = 5


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as the API server writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: object) -> datetime | None:
    """An RFC 3339 time from an object, None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def conditions_of(obj: KubeObject) -> list[dict[str, Any]]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def status_of(obj: KubeObject) -> dict[str, Any]:
    """A copy of the object's status (empty when it has none)."""
    status = obj.get("status")
    return dict(status) if isinstance(status, dict) else {}


def condition(obj: KubeObject, condition_type: str) -> dict[str, Any] | None:
    """The status condition of `condition_type`, None when absent."""
    return next((c for c in conditions_of(obj) if c.get("type") == condition_type), None)


def is_condition_true(obj: KubeObject, condition_type: str) -> bool:
    found = condition(obj, condition_type)
    return found is not None and found.get("status") == "True"


def with_condition(
    conditions: Sequence[Mapping[str, Any]],
    condition_type: str,
    status: Literal["True", "False", "Unknown"],
    *,
    reason: str,
    message: str = "",
    now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """`conditions` with one condition set; lastTransitionTime moves only when status does."""
    result: list[dict[str, Any]] = []
    replaced = False
    for current in conditions:
        if current.get("type") != condition_type:
            result.append(dict(current))
            continue
        replaced = True
        changed = current.get("status") != status
        updated: dict[str, Any] = {
            "type": condition_type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": timestamp(now)
            if changed
            else current.get("lastTransitionTime", timestamp(now)),
        }
        if observed_generation is not None:
            updated["observedGeneration"] = observed_generation
        result.append(updated)
    if not replaced:
        added: dict[str, Any] = {
            "type": condition_type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": timestamp(now),
        }
        if observed_generation is not None:
            added["observedGeneration"] = observed_generation
        result.append(added)
    return result


def name_of(obj: KubeObject) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


class KubeWriter:
    """The scheduler's writes, over `KubeObjects`. `clock` stamps condition transitions."""

    def __init__(self, objects: KubeObjects, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.objects = objects
        self._clock = clock

    # -- NodeClaims -----------------------------------------------------------------------------

    async def create_nodeclaim(self, nodeclaim: KubeObject) -> KubeObject:
        """POST the NodeClaim; KubeAlreadyExistsError when its name is taken."""
        return await self.objects.create(NODE_CLAIMS, nodeclaim)

    async def patch_nodeclaim(self, name: str, patch: Mapping[str, Any]) -> KubeObject:
        """Merge-patch the NodeClaim's metadata/spec."""
        return await self.objects.patch(NODE_CLAIMS, name, dict(patch))

    async def set_nodeclaim_conditions(
        self,
        claim: KubeObject,
        updates: Iterable[tuple[str, Literal["True", "False", "Unknown"], str, str]],
        extra_status: Mapping[str, Any] | None = None,
    ) -> KubeObject:
        """Set conditions (type, status, reason, message) on `claim` plus any `extra_status`
        fields, in one status write computed from `claim` (see `update_status`: a stale copy,
        e.g. a slow relaunch recording `Launched` after the lifecycle wrote `Registered`, is
        read again instead of erasing the other writer's condition)."""
        updates = list(updates)

        def new_status(current: KubeObject) -> dict[str, Any]:
            conditions = conditions_of(current)
            now = self._clock()
            for condition_type, status, reason, message in updates:
                conditions = with_condition(
                    conditions, condition_type, status, reason=reason, message=message, now=now
                )
            return {**status_of(current), **(extra_status or {}), "conditions": conditions}

        written = await self.update_status(NODE_CLAIMS, name_of(claim), new_status, current=claim)
        assert written is not None  # new_status always has something to write
        return written

    async def update_status(
        self,
        resource: Resource,
        name: str,
        new_status: Callable[[KubeObject], Mapping[str, Any] | None],
        *,
        current: KubeObject | None = None,
        attempts: int = WRITE_ATTEMPTS,
    ) -> KubeObject | None:
        """Replace the status of `name` with `new_status(object)`, conditional on the
        resourceVersion it was computed from.

        Conditions are lists written whole, and several controllers write the same object
        (the lifecycle and the launcher a NodeClaim; the provisioner and the EC2NodeClass
        controller a class), so an unconditional write from a stale copy would erase another
        writer's condition. On a conflict the object is read again and `new_status` asked
        again, up to `attempts` times; then KubeConflictError. `new_status` returning None
        means nothing to write (None is returned). `current`: the copy to start from (else a
        fresh read). KubeNotFoundError when the object is gone."""
        for attempt in range(attempts):
            if current is None:
                current = await self.objects.get(resource, name)
            status = new_status(current)
            if status is None:
                return None
            patch = [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": (current.get("metadata") or {}).get("resourceVersion"),
                },
                {"op": "add", "path": "/status", "value": dict(status)},
            ]
            try:
                return await self.objects.patch(
                    resource, name, patch, subresource="status", patch_type="json"
                )
            except (KubeConflictError, KubeInvalidError) as error:
                # A failed `test` is a 409 on some servers and a 422 on others.
                if attempt == attempts - 1:
                    raise KubeConflictError(
                        f"{resource.plural}/{name}: the status changed under {attempts} writes",
                        status=409,
                        reason="Conflict",
                    ) from error
                current = None
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def delete_nodeclaim(self, name: str) -> None:
        """DELETE the NodeClaim (its finalizer keeps it until the termination is done);
        an already-deleted claim is fine."""
        try:
            await self.objects.delete(NODE_CLAIMS, name)
        except KubeNotFoundError:
            return

    async def remove_nodeclaim_finalizer(self, claim: KubeObject) -> None:
        """Drop our finalizer from the claim (conditionally on its resourceVersion, so a
        concurrent change is not overwritten); gone already is fine."""
        await self._remove_finalizer(NODE_CLAIMS, claim)

    # -- Nodes ----------------------------------------------------------------------------------

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> KubeObject:
        """Merge-patch a Node (labels, taints, finalizers, unschedulable)."""
        return await self.objects.patch(NODES, name, dict(patch))

    async def add_node_taint(self, name: str, taint: Mapping[str, str]) -> bool:
        """GET the Node, PUT it back with `taint` (conditionally on its resourceVersion; a
        conflict reads it again). True when this call added it; False when a taint with its key
        was there already, the Node is gone or it changed under every attempt."""

        def added(taints: list[Any]) -> list[Any] | None:
            if any(isinstance(t, dict) and t.get("key") == taint["key"] for t in taints):
                return None
            return [*taints, dict(taint)]

        return await self._edit_node_taints(name, added)

    async def remove_node_taint(self, name: str, key: str) -> bool:
        """The reverse of `add_node_taint`: True when this call removed the taints with `key`."""

        def removed(taints: list[Any]) -> list[Any] | None:
            kept = [t for t in taints if not (isinstance(t, dict) and t.get("key") == key)]
            return kept if len(kept) < len(taints) else None

        return await self._edit_node_taints(name, removed)

    async def _edit_node_taints(
        self, name: str, edit: Callable[[list[Any]], list[Any] | None]
    ) -> bool:
        # A merge patch would replace the whole list and lose a taint another writer (the node
        # lifecycle controller, a user) added since our read: read-modify-write instead.
        for _attempt in range(WRITE_ATTEMPTS):
            try:
                current = await self.objects.get(NODES, name)
            except KubeNotFoundError:
                return False
            spec = current.get("spec")
            spec = spec if isinstance(spec, dict) else {}
            taints = spec.get("taints")
            edited = edit(list(taints) if isinstance(taints, list) else [])
            if edited is None:
                return False
            try:
                await self.objects.replace(NODES, {**current, "spec": {**spec, "taints": edited}})
            except KubeConflictError:
                continue
            except KubeNotFoundError:
                return False
            return True
        return False  # changed under us on every attempt: the caller's next pass tries again

    async def pods_on_node(self, name: str) -> list[KubeObject]:
        """The pods the API server has bound to Node `name` now (a list with the field selector
        `spec.nodeName`, not the mirror: a bind the watch has not delivered yet is in it)."""
        answer = await self.objects.request(
            "GET", PODS.collection_path(), query={"fieldSelector": f"spec.nodeName={name}"}
        )
        items = answer.get("items")
        return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []

    async def delete_node(self, name: str) -> None:
        """DELETE the Node; gone already is fine."""
        try:
            await self.objects.delete(NODES, name)
        except KubeNotFoundError:
            return

    async def remove_node_finalizer(self, node: KubeObject) -> None:
        """Drop our finalizer from the Node; gone already is fine."""
        await self._remove_finalizer(NODES, node)

    async def _remove_finalizer(self, resource: Any, obj: KubeObject) -> None:
        metadata = obj.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        if TERMINATION_FINALIZER not in finalizers:
            return
        remaining = [f for f in finalizers if f != TERMINATION_FINALIZER]
        patch = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": metadata.get("resourceVersion"),
            },
            {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
        ]
        try:
            await self.objects.patch(resource, name_of(obj), patch, patch_type="json")
        except KubeNotFoundError:
            return

    # -- Events -------------------------------------------------------------------------------

    async def event(
        self,
        involved: KubeObject,
        reason: str,
        message: str,
        *,
        warning: bool = False,
    ) -> None:
        """Record an Event about `involved` (pod, NodeClaim, NodePool)."""
        await self.objects.record_event(
            involved, reason=reason, message=message, event_type="Warning" if warning else "Normal"
        )

    # -- NodePools and EC2NodeClasses ----------------------------------------------------------

    async def patch_nodepool_status(self, name: str, status: Mapping[str, Any]) -> KubeObject:
        return await self.objects.patch(
            NODE_POOLS, name, {"status": dict(status)}, subresource="status"
        )

    async def patch_ec2nodeclass_status(self, name: str, status: Mapping[str, Any]) -> KubeObject:
        return await self.objects.patch(
            EC2_NODE_CLASSES, name, {"status": dict(status)}, subresource="status"
        )
