"""NodeClaim lifecycle: launch -> register -> initialize, timeouts, termination, and garbage
collection. Everything it decides comes from the mirror (the API server's state), so a restarted
scheduler carries on where the previous one stopped.

Per claim, on every change of claims or nodes (and every `tick_seconds` for the timeouts):
- **launch**: no `Launched` condition and not being launched by the provisioner -> launch it
  (the actuator is idempotent per claim: a relaunch after a restart finds the instance the first
  launch made); past `launch_timeout` (5 min) -> the claim is deleted.
- **register**: a Node with the claim's providerID -> the Node gets the claim's labels and
  taints, loses `daiku.dev/unregistered`, gets the `daiku.dev/termination` finalizer; the claim
  gets `Registered=True` and status.nodeName. No Node within `registration_timeout` (15 min)
  after launch -> the claim is deleted (and so its instance terminated).
- **initialize**: the Node is Ready and has none of the claim's startup taints (nor the
  unregistered taint) -> `Initialized=True` and `Ready=True`.
- **terminate** (claim deleted, our finalizer on it): `termination.Terminator` cordons and
  drains the Node (PDBs, do-not-disrupt, terminationGracePeriod), terminates the instance and
  removes the finalizers (Node, then claim). A Node deleted directly gets its claim deleted.
Garbage collection every `gc_interval_seconds`: cluster instances whose claim does not exist,
launched more than `orphan_age` (30 s) ago, are terminated; launched claims whose instance is
gone (the actuator says terminated or NOT_FOUND) are deleted.
NodePool status: resources in use (capacity of its claims, node count) and `Ready`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NoReturn

import structlog

from scheduler_svc.core.quantity import resource_units
from scheduler_svc.errors import (
    ActuatorError,
    KubeApiError,
    KubeConflictError,
    KubeNotFoundError,
    NotFoundError,
)
from scheduler_svc.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES, KubeObject
from scheduler_svc.kube.writer import (
    TERMINATION_FINALIZER,
    UNREGISTERED_TAINT_KEY,
    KubeWriter,
    condition,
    is_condition_true,
    name_of,
    parse_timestamp,
    utc_now,
)
from scheduler_svc.lifecycle.termination import (
    GONE_INSTANCE_STATES,
    TerminationSettings,
    Terminator,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.nodeclaim_template import format_quantity
from scheduler_svc.state.cluster import Change, ClusterMirror

log = structlog.get_logger(__name__)

_GONE_STATES = GONE_INSTANCE_STATES


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    launch_timeout_seconds: float = 300.0
    registration_timeout_seconds: float = 900.0
    orphan_age_seconds: float = 30.0
    gc_interval_seconds: float = 10.0
    tick_seconds: float = 5.0
    # Changes arriving closer together than this are handled in one pass (node heartbeats of a
    # thousand nodes must not make the controller rescan on every single one).
    min_interval_seconds: float = 0.05
    # A step this process wrote but the mirror still does not show after this long is done
    # again: the write was lost or undone, and waiting longer would strand the claim.
    step_visible_within_seconds: float = 30.0
    termination: TerminationSettings = field(default_factory=TerminationSettings)


def _metadata(obj: KubeObject) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _pool_of(obj: KubeObject) -> str:
    return str((_metadata(obj).get("labels") or {}).get("daiku.dev/nodepool", ""))


def _is_node_ready(node: KubeObject) -> bool:
    return is_condition_true(node, "Ready")


def _taints(obj: KubeObject) -> list[dict[str, Any]]:
    taints = (obj.get("spec") or {}).get("taints")
    return [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []


class LifecycleController:
    """Reconciles every NodeClaim (see the module docstring); `on_change` is the mirror
    listener. `clock` is wall time (UTC), injectable for the timeouts."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        actuator: Any,
        creator: NodeClaimCreator,
        metrics: SchedulerMetrics,
        settings: LifecycleSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._actuator = actuator
        self._creator = creator
        self._metrics = metrics
        self.settings = settings or LifecycleSettings()
        self._clock = clock
        self._terminator = Terminator(
            mirror=mirror,
            writer=writer,
            actuator=actuator,
            metrics=metrics,
            settings=self.settings.termination,
            clock=clock,
        )
        self._wake = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Steps this process completed (when), until the mirror shows them: no double writes or
        # counts while the watch catches up; see `_awaiting_mirror`.
        self._done: dict[tuple[str, str], datetime] = {}

    @property
    def terminator(self) -> Terminator:
        """The termination flow (interruption handling cordons with it)."""
        return self._terminator

    def on_change(self, change: Change) -> None:
        if change.resource in (NODE_CLAIMS, NODES):
            self._wake.set()

    async def run(self) -> NoReturn:
        """Reconcile on every change (and every tick), garbage-collect every interval."""
        loop = asyncio.get_running_loop()
        next_gc = loop.time() + self.settings.gc_interval_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.tick_seconds):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.reconcile_all()
                await asyncio.sleep(self.settings.min_interval_seconds)
                if loop.time() >= next_gc:
                    next_gc = loop.time() + self.settings.gc_interval_seconds
                    await self.collect_garbage()
            except Exception:
                log.exception("lifecycle_reconcile_failed")

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def _spawn(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` unless work for `key` is already running (one operation per claim)."""
        if key in self._tasks:
            work.close()
            return
        task = asyncio.create_task(work, name=f"lifecycle-{key}")
        self._tasks[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(key) is finished:
                del self._tasks[key]
            if not finished.cancelled() and finished.exception() is not None:
                log.error("lifecycle_task_failed", key=key, error=repr(finished.exception()))
            self._wake.set()  # a step finished: look again (the next step may be due)

        task.add_done_callback(done)

    async def wait_idle(self) -> None:
        """Wait for the claim operations running now (tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    # -- per claim ----------------------------------------------------------------------------

    async def reconcile_all(self) -> None:
        claims = self._mirror.objects(NODE_CLAIMS)
        self._done = {done: at for done, at in self._done.items() if done[0] in claims}
        for name, claim in list(claims.items()):
            self._reconcile(name, claim)
        for node in list(self._mirror.objects(NODES).values()):
            self._reconcile_node(node)
        await self._report_nodepools()

    def _reconcile(self, name: str, claim: KubeObject) -> None:
        metadata = _metadata(claim)
        now = self._clock()
        if metadata.get("deletionTimestamp"):
            if TERMINATION_FINALIZER in (metadata.get("finalizers") or []):
                self._spawn(name, self._terminate(name))
            return
        launched = condition(claim, "Launched")
        if launched is None or launched.get("status") != "True":
            if self._creator.in_flight(name):
                return
            created = parse_timestamp(metadata.get("creationTimestamp")) or now
            if now - created > timedelta(seconds=self.settings.launch_timeout_seconds):
                self._spawn(name, self._expire(name, "launch timed out"))
            else:
                self._spawn(name, self._launch(name))
            return
        provider_id = str((claim.get("status") or {}).get("providerID", ""))
        node = self._mirror.node_by_provider_id(provider_id) if provider_id else None
        if not is_condition_true(claim, "Registered"):
            if self._awaiting_mirror(name, "registered", now):
                return
            if node is not None:
                self._spawn(name, self._register(name, node))
                return
            since = parse_timestamp(launched.get("lastTransitionTime")) or now
            if now - since > timedelta(seconds=self.settings.registration_timeout_seconds):
                self._spawn(name, self._expire(name, "registration timed out"))
            return
        self._done.pop((name, "registered"), None)
        self._reconcile_initialized(name, claim, node, now)

    def _awaiting_mirror(self, name: str, step: str, now: datetime) -> bool:
        """Whether `step` of claim `name` was written by this process recently enough that the
        mirror may just not show it yet; a step older than `step_visible_within_seconds` is
        forgotten (and so done again)."""
        done_at = self._done.get((name, step))
        if done_at is None:
            return False
        if now - done_at <= timedelta(seconds=self.settings.step_visible_within_seconds):
            return True
        log.warning("nodeclaim_step_not_visible", nodeclaim=name, step=step)
        del self._done[(name, step)]
        return False

    def _reconcile_initialized(
        self, name: str, claim: KubeObject, node: KubeObject | None, now: datetime
    ) -> None:
        """Initialized once the Node is Ready, its startup/unregistered taints are gone and it
        reports every extended resource the claim requested (Karpenter's
        RequestedResourcesRegistered: a device plugin, or the resources a NodeOverlay promised,
        may come after the kubelet)."""
        if is_condition_true(claim, "Initialized"):
            self._done.pop((name, "initialized"), None)
        elif node is not None and not self._awaiting_mirror(name, "initialized", now):
            startup_keys = {
                t.get("key")
                for t in (claim.get("spec") or {}).get("startupTaints") or []
                if isinstance(t, dict)
            }
            node_keys = {t.get("key") for t in _taints(node)}
            if (
                _is_node_ready(node)
                and not (startup_keys & node_keys)
                and UNREGISTERED_TAINT_KEY not in node_keys
                and _requested_resources_registered(claim, node)
            ):
                self._spawn(name, self._initialize(name))

    def _reconcile_node(self, node: KubeObject) -> None:
        """A Node of ours deleted directly (kubectl delete node): delete its claim too, whose
        termination then removes the Node's finalizer."""
        metadata = _metadata(node)
        if not metadata.get("deletionTimestamp") or TERMINATION_FINALIZER not in (
            metadata.get("finalizers") or []
        ):
            return
        provider_id = str((node.get("spec") or {}).get("providerID", ""))
        claim = self._mirror.nodeclaim_by_provider_id(provider_id) if provider_id else None
        if claim is None:
            self._spawn(f"node/{name_of(node)}", self._release_node(node))
        elif not _metadata(claim).get("deletionTimestamp"):
            self._spawn(name_of(claim), self._delete_with_node(name_of(claim), name_of(node)))

    async def _launch(self, name: str) -> None:
        claim = self._mirror.nodeclaim(name)
        if claim is not None:
            await self._creator.relaunch(claim)

    async def _expire(self, name: str, why: str) -> None:
        claim = self._mirror.nodeclaim(name)
        log.info("nodeclaim_expired", nodeclaim=name, reason=why)
        if claim is not None:
            self._metrics.claim_step(_pool_of(claim), "failed")
            with contextlib.suppress(KubeApiError):
                await self._writer.event(claim, "NodeClaimDeleted", why, warning=True)
        await self._writer.delete_nodeclaim(name)

    async def _delete_with_node(self, name: str, node_name: str) -> None:
        """The Node was deleted (kubectl delete node): the claim goes too, through the same
        termination (drain, instance, finalizers) as any removal."""
        log.info("nodeclaim_node_deleted", nodeclaim=name, node=node_name)
        await self._writer.delete_nodeclaim(name)

    async def _register(self, name: str, node: KubeObject) -> None:
        claim = self._mirror.nodeclaim(name)
        if claim is None:
            return
        node_name = name_of(node)
        claim_taints = _taints(claim)
        for _attempt in range(5):
            try:
                current = await self._writer.objects.get(NODES, node_name)
            except KubeNotFoundError:
                return
            updated = copy.deepcopy(current)
            metadata = updated.setdefault("metadata", {})
            labels = metadata.setdefault("labels", {})
            labels.update(_metadata(claim).get("labels") or {})
            finalizers = list(metadata.get("finalizers") or [])
            if TERMINATION_FINALIZER not in finalizers:
                finalizers.append(TERMINATION_FINALIZER)
            metadata["finalizers"] = finalizers
            spec = updated.setdefault("spec", {})
            taints = [t for t in _taints(updated) if t.get("key") != UNREGISTERED_TAINT_KEY]
            present = {(t.get("key"), t.get("effect")) for t in taints}
            taints += [t for t in claim_taints if (t.get("key"), t.get("effect")) not in present]
            if taints:
                spec["taints"] = taints
            else:
                spec.pop("taints", None)
            try:
                await self._writer.objects.replace(NODES, updated)
                break
            except KubeConflictError:
                continue
        else:
            log.warning("node_registration_conflicts", nodeclaim=name, node=node_name)
            return
        await self._writer.set_nodeclaim_conditions(
            self._mirror.nodeclaim(name) or claim,
            [("Registered", "True", "Registered", "")],
            extra_status={"nodeName": node_name},
        )
        self._done[(name, "registered")] = self._clock()
        self._metrics.claim_step(_pool_of(claim), "registered")
        log.info("nodeclaim_registered", nodeclaim=name, node=node_name)

    async def _initialize(self, name: str) -> None:
        claim = self._mirror.nodeclaim(name)
        if claim is None:
            return
        await self._writer.set_nodeclaim_conditions(
            claim,
            [
                ("Initialized", "True", "Initialized", ""),
                ("Ready", "True", "Ready", ""),
            ],
        )
        self._done[(name, "initialized")] = self._clock()
        self._metrics.claim_step(_pool_of(claim), "initialized")
        log.info("nodeclaim_initialized", nodeclaim=name)

    async def _terminate(self, name: str) -> None:
        await self._terminator.terminate(name)

    async def _release_node(self, node: KubeObject) -> None:
        with contextlib.suppress(KubeConflictError):
            await self._writer.remove_node_finalizer(node)

    # -- garbage collection -------------------------------------------------------------------

    async def collect_garbage(self) -> None:
        """Terminate orphaned instances; delete claims whose instance is gone."""
        try:
            instances = await self._actuator.list_nodeclaims()
        except ActuatorError as error:
            log.warning("gc_list_failed", error=str(error))
            return
        live = await self._terminate_orphans(instances)
        await self._delete_claims_without_instance(live)

    async def _terminate_orphans(self, instances: Any) -> set[str]:
        """Terminate old instances no claim owns; return the claim names with a live instance."""
        now = self._clock()
        claims = self._mirror.objects(NODE_CLAIMS)
        live: set[str] = set()
        for instance in instances:
            if instance.state in _GONE_STATES:
                continue
            live.add(instance.nodeclaim_name)
            if not instance.nodeclaim_name or instance.nodeclaim_name in claims:
                continue
            launched = instance.launch_time or now
            if now - launched < timedelta(seconds=self.settings.orphan_age_seconds):
                continue
            try:
                await self._actuator.terminate_nodeclaim(instance.nodeclaim_name)
            except NotFoundError:
                continue
            except ActuatorError as error:
                log.warning(
                    "gc_terminate_failed", nodeclaim=instance.nodeclaim_name, error=str(error)
                )
                continue
            self._metrics.instances_garbage_collected.inc()
            log.info(
                "gc_instance_terminated",
                nodeclaim=instance.nodeclaim_name,
                instance_id=instance.instance_id,
            )
        return live

    async def _delete_claims_without_instance(self, live: set[str]) -> None:
        for name, claim in list(self._mirror.objects(NODE_CLAIMS).items()):
            if name in live or _metadata(claim).get("deletionTimestamp"):
                continue
            if not is_condition_true(claim, "Launched") or self._creator.in_flight(name):
                continue
            try:
                instance = await self._actuator.get_nodeclaim(name)
                gone = instance.state in _GONE_STATES
            except NotFoundError:
                gone = True
            except ActuatorError:
                continue
            if gone:
                log.info("gc_nodeclaim_instance_gone", nodeclaim=name)
                await self._writer.delete_nodeclaim(name)

    # -- NodePool status ----------------------------------------------------------------------

    async def _report_nodepools(self) -> None:
        totals: dict[str, dict[str, int]] = {}
        for claim in self._mirror.objects(NODE_CLAIMS).values():
            if _metadata(claim).get("deletionTimestamp"):
                continue
            used = totals.setdefault(_pool_of(claim), {"nodes": 0})
            used["nodes"] += 1
            capacity = (claim.get("status") or {}).get("capacity") or {}
            for resource, quantity in capacity.items():
                try:
                    used[resource] = used.get(resource, 0) + resource_units(resource, quantity)
                except ValueError:
                    continue
        for name, pool in list(self._mirror.objects(NODE_POOLS).items()):
            used = totals.get(name, {"nodes": 0})
            resources = {k: format_quantity(k, v) for k, v in sorted(used.items()) if k != "nodes"}
            resources["nodes"] = str(used["nodes"])
            pool_status = pool.get("status") or {}
            # status.nodes as a number too: the scale subresource's statusReplicasPath.
            if (
                pool_status.get("resources") == resources
                and pool_status.get("nodes") == used["nodes"]
            ):
                continue
            try:
                await self._writer.patch_nodepool_status(
                    name, {"resources": resources, "nodes": used["nodes"]}
                )
            except KubeApiError as error:
                log.warning("nodepool_status_write_failed", nodepool=name, error=str(error))


_BASE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def _requested_resources_registered(claim: KubeObject, node: KubeObject) -> bool:
    """Whether the Node's allocatable has every extended resource the claim requests."""
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return all(
        str(allocatable.get(name, "0")) not in ("0", "")
        for name, amount in requests.items()
        if name not in _BASE_RESOURCES and str(amount) not in ("0", "")
    )
