"""Termination of one NodeClaim and its Node: every removal goes through here.

A NodeClaim being deleted (ours: the `daiku.dev/termination` finalizer holds it) is taken down
in this order, each step derived from the API server's state so a restarted leader resumes:

1. **cordon**: the Node gets `daiku.dev/disrupted:NoSchedule` (event `Draining`);
2. **drain**: each pod on the Node is evicted through the Eviction API, so PodDisruptionBudgets
   apply. A refused eviction (429) is retried per pod with jittered exponential backoff
   (`eviction_backoff_*`) and reported once as `DisruptionBlocked: pdb <ns>/<name>`. Left in
   place: DaemonSet pods (the DaemonSet would put them back), mirror pods
   (`kubernetes.io/config.mirror`), finished pods and pods tolerating the disrupted taint (as
   Karpenter does: they asked to stay), and pods stuck terminating (a minute past their
   deletionTimestamp: a dead kubelet will not finish them). Pods annotated
   `daiku.dev/do-not-disrupt` or `karpenter.sh/do-not-disrupt` are not evicted and hold the
   drain while their hold lasts, unless the claim carries `daiku.dev/do-not-disrupt-grace-
   ended` (an expired or drifted node whose NodePool's `doNotDisruptGracePeriod` ran out);
3. **force** (Karpenter v1): when the claim has a `terminationGracePeriod` (its spec, else its
   NodePool's), counted from the claim's deletionTimestamp, or a
   `daiku.dev/nodeclaim-termination-timestamp` annotation (node repair; the earlier wins),
   each pod still to drain is *deleted* (not evicted: PodDisruptionBudgets and do-not-disrupt
   are bypassed) at `deadline - pod.spec.terminationGracePeriodSeconds`, so its own grace
   period still fits before the node goes; the delete's grace is clamped to the time left (event
   `TerminationGracePeriodExpiring` lists them). At the deadline the drain stops waiting (event
   `TerminationGracePeriodExpired` lists the pods still there, e.g. still terminating): they
   go with the instance. Without a grace period a PDB or do-not-disrupt pod holds the drain
   indefinitely;
4. **terminate**: `TerminateNodeClaim` (event `Terminating`), until the instance is
   shutting-down, terminated or unknown to the actuator;
5. **release**: the Node is deleted and loses our finalizer, then the NodeClaim does.

Time comes from `clock` (wall time, UTC; injected in tests, so a grace period passes without
waiting for it); pauses between polls are short real sleeps.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from scheduler_svc.core.disruption.model import (
    DO_NOT_DISRUPT_GRACE_ENDED_ANNOTATION,
    TERMINATION_TIMESTAMP_ANNOTATION,
)
from scheduler_svc.core.disruption.settings import DisruptionSettingsError, parse_duration
from scheduler_svc.core.taints import Taint, TaintEffect, Toleration
from scheduler_svc.errors import (
    ActuatorError,
    InvalidObjectError,
    KubeApiError,
    KubeConflictError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeTooManyRequestsError,
    NotFoundError,
)
from scheduler_svc.kube.convert import tolerations_from_k8s
from scheduler_svc.kube.convert_disruption import do_not_disrupt_holds, pdb_from_k8s
from scheduler_svc.kube.resources import (
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    KubeObject,
)
from scheduler_svc.kube.writer import (
    DISRUPTED_TAINT,
    DISRUPTED_TAINT_KEY,
    KubeWriter,
    name_of,
    parse_timestamp,
    timestamp,
    utc_now,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
GONE_INSTANCE_STATES = frozenset({"shutting-down", "terminated"})
_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
STUCK_TERMINATING_SECONDS = 60.0
# What the API server defaults a pod's spec.terminationGracePeriodSeconds to.
DEFAULT_POD_GRACE_SECONDS = 30
_DISRUPTED = Taint(key=DISRUPTED_TAINT_KEY, effect=TaintEffect.NO_SCHEDULE)


@dataclass(frozen=True, slots=True)
class TerminationSettings:
    """Pacing of a termination (real seconds; the grace period is on the injected clock)."""

    poll_seconds: float = 1.0
    eviction_backoff_base_seconds: float = 1.0
    eviction_backoff_max_seconds: float = 10.0
    instance_poll_seconds: float = 2.0


def _metadata(obj: KubeObject) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _annotations(obj: KubeObject) -> Mapping[str, str]:
    annotations = _metadata(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def pod_key(pod: KubeObject) -> str:
    metadata = _metadata(pod)
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _tolerations(pod: KubeObject) -> tuple[Toleration, ...]:
    """The pod's tolerations, read by the scheduler's converter; none when unreadable (the API
    server refuses such a pod, so only a hand-made object gets here; it is drained)."""
    try:
        return tolerations_from_k8s(pod)
    except InvalidObjectError:
        return ()


def is_drained_by_termination(pod: KubeObject) -> bool:
    """Whether the drain must remove this pod (see the module docstring for who stays)."""
    status = pod.get("status")
    if isinstance(status, dict) and status.get("phase") in _TERMINAL_POD_PHASES:
        return False
    if MIRROR_POD_ANNOTATION in _annotations(pod):
        return False
    owners = _metadata(pod).get("ownerReferences")
    if isinstance(owners, list) and any(
        isinstance(o, dict) and o.get("kind") in ("DaemonSet", "Node") and o.get("controller")
        for o in owners
    ):
        return False
    return not any(t.tolerates(_DISRUPTED) for t in _tolerations(pod))


def is_stuck_terminating(pod: KubeObject, now: datetime) -> bool:
    """Deleted, and a minute past the moment its grace period ended (deletionTimestamp), yet
    still there: its kubelet is not finishing it (dead node), so it must not hold the drain
    (Karpenter's IsStuckTerminating)."""
    deleted = parse_timestamp(_metadata(pod).get("deletionTimestamp"))
    return deleted is not None and now - deleted > timedelta(seconds=STUCK_TERMINATING_SECONDS)


def pod_grace_seconds(pod: KubeObject) -> int:
    """The pod's spec.terminationGracePeriodSeconds (the API server's 30 when absent or
    unreadable; never negative)."""
    raw = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return DEFAULT_POD_GRACE_SECONDS
    return max(0, int(raw))


def pod_delete_time(pod: KubeObject, deadline: datetime) -> datetime:
    """When the force step deletes the pod: its own grace period before the node's deadline
    (Karpenter's podDeleteTimeWithGracePeriod)."""
    return deadline - timedelta(seconds=pod_grace_seconds(pod))


def clamped_grace_seconds(deadline: datetime, now: datetime) -> int:
    """The grace a forced delete gets: the whole seconds left until the deadline, at least 0
    (a pod whose grace is longer than what remains is cut short, as in Karpenter)."""
    return max(0, math.floor((deadline - now).total_seconds()))


def grace_period_seconds(claim: KubeObject, nodepool: KubeObject | None) -> float | None:
    """The claim's `terminationGracePeriod` (else its NodePool template's); None: none set.
    An unreadable value is logged and treated as unset (wait for the PDBs)."""
    where = f"NodeClaim {name_of(claim)}: spec.terminationGracePeriod"
    text = (claim.get("spec") or {}).get("terminationGracePeriod")
    if text is None and nodepool is not None:
        template = ((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}
        text = template.get("terminationGracePeriod")
        where = f"NodePool {name_of(nodepool)}: spec.template.spec.terminationGracePeriod"
    if text is None:
        return None
    try:
        return parse_duration(str(text), where, allow_never=False)
    except DisruptionSettingsError as error:
        log.warning("termination_grace_period_invalid", error=str(error))
        return None


def drain_deadline(claim: KubeObject, nodepool: KubeObject | None) -> datetime | None:
    """When the drain stops waiting: the claim's deletionTimestamp + terminationGracePeriod,
    or its `daiku.dev/nodeclaim-termination-timestamp` (node repair), the earlier; None when
    neither is set (a PDB or do-not-disrupt pod may then hold the drain)."""
    grace = grace_period_seconds(claim, nodepool)
    deleted = parse_timestamp(_metadata(claim).get("deletionTimestamp"))
    stamped = parse_timestamp(_annotations(claim).get(TERMINATION_TIMESTAMP_ANNOTATION))
    deadlines = [] if grace is None or deleted is None else [deleted + timedelta(seconds=grace)]
    if stamped is not None:
        deadlines.append(stamped)
    return min(deadlines, default=None)


class Terminator:
    """Runs the termination of one claim at a time per call of `terminate` (the lifecycle
    controller runs one per deleted claim)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        actuator: Any,
        metrics: SchedulerMetrics,
        settings: TerminationSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._actuator = actuator
        self._metrics = metrics
        self.settings = settings or TerminationSettings()
        self._clock = clock
        self._rng = rng
        self._sleep = sleep
        self.drain_passes = 0  # passes over a node's pods that left some (tests wait on it)

    # -- the flow -----------------------------------------------------------------------------

    async def terminate(self, claim_name: str) -> None:
        """Take the claim down (module docstring); returns once its finalizer is gone."""
        claim = self._mirror.nodeclaim(claim_name)
        if claim is None:
            return
        node = self.node_of(claim)
        bound = log.bind(nodeclaim=claim_name, node=name_of(node) if node else None)
        if node is not None:
            if await self.cordon(node):
                await self.record(claim, node, "Draining", "Draining the node before termination")
            await self._drain(claim_name)
        await self._terminate_instance(claim_name)
        await self._release(claim_name)
        pool = str((_metadata(claim).get("labels") or {}).get("daiku.dev/nodepool", ""))
        self._metrics.nodes_terminated.labels(nodepool=pool or "unknown").inc()
        self._metrics.claim_step(pool, "deleted")
        bound.info("nodeclaim_terminated")

    def node_of(self, claim: KubeObject) -> KubeObject | None:
        provider_id = str((claim.get("status") or {}).get("providerID", ""))
        if provider_id:
            node = self._mirror.node_by_provider_id(provider_id)
            if node is not None:
                return node
        node_name = (claim.get("status") or {}).get("nodeName")
        return self._mirror.get(NODES, node_name) if isinstance(node_name, str) else None

    async def cordon(self, node: KubeObject) -> bool:
        """Taint the Node disrupted:NoSchedule; True when this call added the taint."""
        name = name_of(node)
        added = await self._writer.add_node_taint(name, DISRUPTED_TAINT)
        if added:
            log.info("node_cordoned", node=name)
        return added

    async def _drain(self, claim_name: str) -> None:
        loop = asyncio.get_running_loop()
        retry_at: dict[str, float] = {}
        failures: dict[str, int] = {}
        reported: set[str] = set()
        forced: set[str] = set()  # uids deleted by the force step (the mirror may lag)
        settings = self.settings
        while True:
            claim = self._mirror.nodeclaim(claim_name)
            node = self.node_of(claim) if claim is not None else None
            if claim is None or node is None:
                return
            now = self._clock()
            pods = [
                p
                for p in self._mirror.pods_on_node(name_of(node))
                if is_drained_by_termination(p) and not is_stuck_terminating(p, now)
            ]
            if not pods:
                log.info("node_drained", nodeclaim=claim_name, node=name_of(node))
                return
            deadline = self._deadline(claim)
            if deadline is not None:
                await self._delete_expiring(
                    claim, node, pods, deadline=deadline, now=now, forced=forced
                )
                if now >= deadline:
                    await self._give_up_drain(claim, node, pods)
                    return
            # An expired/drifted node whose do-not-disrupt grace period ran out: those pods
            # are evicted like the others (PDBs still apply).
            grace_ended = DO_NOT_DISRUPT_GRACE_ENDED_ANNOTATION in _annotations(claim)
            for pod in pods:
                key = pod_key(pod)
                if (
                    _metadata(pod).get("deletionTimestamp")
                    or _metadata(pod).get("uid") in forced
                    or loop.time() < retry_at.get(key, 0)
                ):
                    continue
                if not grace_ended and do_not_disrupt_holds(pod, now):
                    if key not in reported:
                        reported.add(key)
                        await self.record(
                            claim,
                            node,
                            "DisruptionBlocked",
                            f"pod {key} has a do-not-disrupt annotation",
                            warning=True,
                        )
                    continue
                blocker = await self._evict(pod)
                if blocker is None:
                    failures.pop(key, None)
                    continue
                failures[key] = failures.get(key, 0) + 1
                retry_at[key] = loop.time() + self.eviction_backoff_seconds(failures[key])
                if blocker not in reported:
                    reported.add(blocker)
                    await self.record(claim, node, "DisruptionBlocked", blocker, warning=True)
            self.drain_passes += 1
            await self._sleep(settings.poll_seconds)

    async def _delete_expiring(
        self,
        claim: KubeObject,
        node: KubeObject,
        pods: list[KubeObject],
        *,
        deadline: datetime,
        now: datetime,
        forced: set[str],
    ) -> None:
        """Delete (bypassing PDBs and do-not-disrupt) each pod whose own grace period no
        longer fits before the deadline; pods already being deleted are left to finish."""
        due = [
            p
            for p in pods
            if not _metadata(p).get("deletionTimestamp")
            and _metadata(p).get("uid") not in forced
            and now >= pod_delete_time(p, deadline)
        ]
        if not due:
            return
        grace = clamped_grace_seconds(deadline, now)
        deleted: list[str] = []
        for pod in due:
            metadata = _metadata(pod)
            namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
            uid = metadata.get("uid")
            try:
                await self._writer.objects.delete(
                    PODS,
                    name,
                    namespace,
                    uid=str(uid) if uid else None,
                    grace_period_seconds=min(grace, pod_grace_seconds(pod)),
                )
            except (KubeNotFoundError, KubeConflictError):
                pass  # gone, or replaced by a namesake (the uid precondition): not ours to delete
            except KubeApiError as error:
                log.warning("pod_force_delete_failed", pod=f"{namespace}/{name}", error=str(error))
                continue
            else:
                deleted.append(f"{namespace}/{name}")
                self._metrics.evictions.labels(result="forced").inc()
            if uid:
                forced.add(str(uid))
        if not deleted:
            return
        log.warning(
            "pods_deleted_for_grace_period", nodeclaim=name_of(claim), pods=deleted, grace=grace
        )
        shown = ", ".join(deleted[:5]) + (
            f" and {len(deleted) - 5} more" if len(deleted) > 5 else ""
        )
        await self.record(
            claim,
            node,
            "TerminationGracePeriodExpiring",
            f"deleted {len(deleted)} pods (PDBs and do-not-disrupt bypassed) with at most "
            f"{grace}s of grace: the node's terminationGracePeriod ends at "
            f"{timestamp(deadline)}: {shown}",
            warning=True,
        )

    def _deadline(self, claim: KubeObject) -> datetime | None:
        labels = _metadata(claim).get("labels") or {}
        pool = self._mirror.get(NODE_POOLS, str(labels.get("daiku.dev/nodepool", "")))
        return drain_deadline(claim, pool)

    def eviction_backoff_seconds(self, failures: int) -> float:
        """Exponential in the failures so far, capped, times a jitter factor in [1/2, 1]."""
        settings = self.settings
        ceiling = min(
            settings.eviction_backoff_max_seconds,
            settings.eviction_backoff_base_seconds * float(2 ** min(failures - 1, 30)),
        )
        return ceiling * (0.5 + self._rng() / 2)

    async def _evict(self, pod: KubeObject) -> str | None:
        """Evict the pod; None when done (or gone), else why it stays (for the event)."""
        metadata = _metadata(pod)
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        try:
            await self._writer.objects.evict(namespace, name)
        except KubeNotFoundError:
            return None
        except KubeTooManyRequestsError:
            self._metrics.evictions.labels(result="blocked").inc()
            pdb = self.pdb_of(pod)
            return f"pdb {pdb}" if pdb else f"eviction of pod {namespace}/{name} refused"
        except KubeApiError as error:
            self._metrics.evictions.labels(result="failed").inc()
            log.warning("pod_eviction_failed", pod=f"{namespace}/{name}", error=str(error))
            return f"eviction of pod {namespace}/{name} failed: {error}"
        self._metrics.evictions.labels(result="evicted").inc()
        log.info("pod_evicted", pod=f"{namespace}/{name}", node=pod_node(pod))
        return None

    def pdb_of(self, pod: KubeObject) -> str | None:
        """`namespace/name` of the PodDisruptionBudget selecting the pod, None if none."""
        metadata = _metadata(pod)
        namespace = metadata.get("namespace")
        labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
        for pdb in self._mirror.objects(POD_DISRUPTION_BUDGETS).values():
            if _metadata(pdb).get("namespace") != namespace:
                continue
            try:
                budget = pdb_from_k8s(pdb)
            except InvalidObjectError:
                continue  # an unreadable budget selects nothing
            if budget.selects(labels or {}):
                return f"{namespace}/{name_of(pdb)}"
        return None

    async def _give_up_drain(
        self, claim: KubeObject, node: KubeObject, pods: list[KubeObject]
    ) -> None:
        """The grace period ran out: the pods left (deleted by the force step, still
        terminating) go with the instance; the pod garbage collector removes what is left of
        them once their Node is gone."""
        keys = sorted(pod_key(p) for p in pods)
        shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        log.warning("drain_grace_period_expired", nodeclaim=name_of(claim), pods=keys)
        await self.record(
            claim,
            node,
            "TerminationGracePeriodExpired",
            f"terminating with {len(keys)} pods still on the node: {shown}",
            warning=True,
        )

    async def _terminate_instance(self, claim_name: str) -> None:
        """TerminateNodeClaim until the instance is going or gone."""
        recorded = False
        while True:
            claim = self._mirror.nodeclaim(claim_name)
            if claim is not None and not recorded:
                recorded = True
                node = self.node_of(claim)
                await self.record(claim, node, "Terminating", "Terminating the instance")
            try:
                state = (await self._actuator.terminate_nodeclaim(claim_name)).state
            except NotFoundError:
                return
            except ActuatorError as error:
                log.warning("nodeclaim_terminate_failed", nodeclaim=claim_name, error=str(error))
                state = ""
            if state in GONE_INSTANCE_STATES:
                return
            await self._sleep(self.settings.instance_poll_seconds)

    async def _release(self, claim_name: str) -> None:
        """Delete the Node, then drop our finalizer from it and from the claim."""
        claim = self._mirror.nodeclaim(claim_name)
        node = self.node_of(claim) if claim is not None else None
        if node is not None:
            node_name = name_of(node)
            try:
                if not _metadata(node).get("deletionTimestamp"):
                    await self._writer.delete_node(node_name)
                await self._without_finalizer(NODES, node_name)
            except KubeApiError as error:
                log.warning("node_release_failed", node=node_name, error=str(error))
        await self._without_finalizer_claim(claim_name)

    async def _without_finalizer(self, resource: Any, name: str) -> None:
        for _attempt in range(5):
            try:
                current = await self._writer.objects.get(resource, name)
            except KubeNotFoundError:
                return
            try:
                if resource == NODES:
                    await self._writer.remove_node_finalizer(current)
                else:
                    await self._writer.remove_nodeclaim_finalizer(current)
            except (KubeConflictError, KubeInvalidError):
                continue  # changed meanwhile (a failed JSON-patch test): read it again
            return

    async def _without_finalizer_claim(self, claim_name: str) -> None:
        await self._without_finalizer(NODE_CLAIMS, claim_name)

    async def record(
        self,
        claim: KubeObject,
        node: KubeObject | None,
        reason: str,
        message: str,
        *,
        warning: bool = False,
    ) -> None:
        """An Event on the claim and on its Node; a failed write is logged, not fatal."""
        involved = [{"apiVersion": "daiku.dev/v1", "kind": "NodeClaim", **claim}]
        if node is not None:
            involved.append({"apiVersion": "v1", "kind": "Node", **node})
        log.info("termination_event", reason=reason, message=message, nodeclaim=name_of(claim))
        for obj in involved:
            try:
                await self._writer.event(obj, reason, message, warning=warning)
            except KubeApiError as error:
                log.warning("event_write_failed", reason=reason, error=str(error))


def pod_node(pod: KubeObject) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")
