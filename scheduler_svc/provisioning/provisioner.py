"""Pending pods -> NodeClaims -> launches: one round per closed batch window.

A round:
1. snapshots the mirror (`CoreSnapshotter`) with the provisionable pods (kube-scheduler marked
   them Unschedulable; unbound, not terminating, not a DaemonSet's). In-flight NodeClaims come
   from the mirror as nodes, so pods an in-flight claim will take are placed on it and never
   get a second claim, also after a restart (nothing is remembered in memory);
2. validates NodePools and their EC2NodeClasses (`PoolValidator`); an invalid one is reported
   on its status (`ValidationSucceeded=False` with the message) and left out, the others carry
   on;
3. solves with the core, per group of NodePools sharing one instance-type catalog (allocatable
   depends on the EC2NodeClass's kubelet settings) and capacity reservations (the class's
   status: reserved offerings, `core.reservations`), highest weight first, exhausted offerings
   (`UnavailableOfferingsCache`) excluded; each reservation goes to no more new claims than it
   has free instances (less those its nodes and claims in flight hold), counted by the solver;
4. writes one NodeClaim per new claim and launches them all concurrently (`NodeClaimCreator`,
   which disruption's replacements go through too);
   the round ends when the mirror shows what it wrote (so the next solve counts it, and
   NodePool limits hold across rounds);
5. records Events (`PodEvents`): `Nominated` (which claim takes the pod) and
   `FailedProvisioning` (the core's reason), each once per pod and claim/reason.

RESOURCE_EXHAUSTED from a launch deletes the claim and marks its offerings: the next round
(triggered at once) solves those pods without them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NoReturn

import structlog

from scheduler_svc.core import solve
from scheduler_svc.core.catalog_index import BASE_DIMENSIONS, CatalogCache
from scheduler_svc.core.model import (
    MinValuesPolicy,
    NodeClaimPlan,
    SchedulingInput,
    UnschedulablePod,
)
from scheduler_svc.core.reservations import (
    CapacityReservation,
    reservation_room,
    room_after,
    with_reserved_offerings,
)
from scheduler_svc.errors import (
    ActuatorError,
    InvalidObjectError,
)
from scheduler_svc.kube.resources import (
    CAPACITY_BUFFERS,
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    PODS,
    resource_version_of,
)
from scheduler_svc.kube.writer import (
    KubeWriter,
    conditions_of,
    utc_now,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.nodeclass.readiness import first_unresolved
from scheduler_svc.provisioning.batcher import Batcher, BatchWindow
from scheduler_svc.provisioning.catalog import CatalogKey, InstanceTypeCatalog
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.headroom import (
    BufferReport,
    buffer_reports,
    headroom_pods,
    is_headroom,
)
from scheduler_svc.provisioning.launch import LaunchOutcome, LaunchResult
from scheduler_svc.provisioning.pod_events import PodEvents
from scheduler_svc.provisioning.pool_validation import PoolValidator, ValidPool
from scheduler_svc.provisioning.root_volume import with_root_volume_caps
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.state.cluster import Change, ClusterMirror, is_provisionable_pod
from scheduler_svc.state.core_snapshot import CoreSnapshot, CoreSnapshotter
from scheduler_svc.state.nominations import Nominations

log = structlog.get_logger(__name__)

# Retrying a round whose catalog was unavailable: 1, 2, 4 … seconds, capped.
_CATALOG_RETRY_FIRST_SECONDS = 1.0
_CATALOG_RETRY_MAX_SECONDS = 30.0


@dataclass
class RoundResult:
    """What one provisioning round did (for tests, logs and the benchmark)."""

    pending_pods: int = 0
    claims_created: list[str] = field(default_factory=list)
    plans: dict[str, NodeClaimPlan] = field(default_factory=dict)
    launches: dict[str, LaunchOutcome] = field(default_factory=dict)
    unschedulable: tuple[UnschedulablePod, ...] = ()
    invalid: list[str] = field(default_factory=list)
    solve_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds it took
    # The actuator could not list instance types: the round must be tried again, since no pod
    # change will come to trigger it.
    catalog_unavailable: bool = False
    headroom_pods: int = 0  # CapacityBuffers' virtual pods solved after the real ones
    first_launch_sent_at: float | None = None  # loop time
    last_launch_sent_at: float | None = None


class Provisioner:
    """Runs provisioning rounds as batches close; `on_change` is the mirror listener."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        catalog: InstanceTypeCatalog,
        creator: NodeClaimCreator,
        unavailable: UnavailableOfferingsCache,
        metrics: SchedulerMetrics,
        batcher: Batcher,
        catch_up_timeout_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        catalogs: CatalogCache | None = None,
        nominations: Nominations | None = None,
        wall_clock: Callable[[], datetime] = utc_now,
        min_values_policy: MinValuesPolicy = MinValuesPolicy.STRICT,
        on_headroom: Callable[[tuple[BufferReport, ...]], None] = lambda _: None,
    ) -> None:
        self._mirror = mirror
        # What each round made of the CapacityBuffers (their status controller listens).
        self._on_headroom = on_headroom
        # Karpenter's --min-values-policy: BestEffort lowers a NodePool's minValues the
        # catalog cannot meet instead of leaving the pods pending.
        self._min_values_policy = min_values_policy
        # Pods planned onto nodes/claims, for disruption's nomination window (None: not kept).
        self._nominations = nominations
        self._catalog = catalog
        self._creator = creator
        self._unavailable = unavailable
        self._metrics = metrics
        self.batcher = batcher
        self._catch_up_timeout_seconds = catch_up_timeout_seconds
        self._clock = clock
        # Reserved capacity depends on the time of day: a Capacity Block about to end offers
        # nothing (its nodes would be drained at once).
        self._wall_clock = wall_clock
        self._snapshotter = CoreSnapshotter(mirror)
        # Catalog indexes built once per catalog, not on every solve (tens of ms each); shared
        # with the disruption controller's simulations when the service passes one.
        self._catalogs = catalogs if catalogs is not None else CatalogCache()
        self._validator = PoolValidator(mirror=mirror, writer=writer)
        self._events = PodEvents(mirror=mirror, writer=writer, metrics=metrics)
        self.rounds = 0
        self.last_round: RoundResult | None = None
        self.last_window: BatchWindow | None = None
        metrics.track_pending_pods(self.provisionable_pod_count)

    # -- triggers ---------------------------------------------------------------------------

    def provisionable_pod_count(self) -> int:
        return sum(1 for p in self._mirror.pending_pods() if is_provisionable_pod(p))

    def on_change(self, change: Change) -> None:
        """Mirror listener: open/extend a batch when a pod becomes provisionable, capacity goes
        away (a claim deleted) or a NodePool/EC2NodeClass/NodeOverlay changes; observe pod
        binding."""
        resource = change.resource
        if resource == PODS:
            new, old = change.new, change.old
            if new is not None and is_provisionable_pod(new):
                if old is None or not is_provisionable_pod(old):
                    self.batcher.trigger()
            elif new is not None and old is not None:
                self._events.observe_binding(old, new)
                if self.has_headroom() and (new.get("spec") or {}).get("nodeName") != (
                    old.get("spec") or {}
                ).get("nodeName"):
                    self.batcher.trigger()  # a pod took room: the buffers may need more
        elif resource == CAPACITY_BUFFERS:
            self.batcher.trigger()
        elif resource == NODE_CLAIMS:
            if change.type == "DELETED":
                self.batcher.trigger()
        elif resource in (NODE_POOLS, EC2_NODE_CLASSES, NODE_OVERLAYS) and change.type != "DELETED":
            old_spec = (change.old or {}).get("spec")
            if change.new is not None and change.new.get("spec") != old_spec:
                self.batcher.trigger()
            elif (
                resource == EC2_NODE_CLASSES
                and change.old is not None
                and change.new is not None
                and first_unresolved(conditions_of(change.old)) is not None
                and first_unresolved(conditions_of(change.new)) is None
            ):
                self.batcher.trigger()  # its selectors resolve again: its pools take pods

    async def run(self) -> NoReturn:
        """Provision each batch as it closes, forever; a failed round is logged, not fatal."""
        if self.provisionable_pod_count():
            self.batcher.trigger()  # pods pending from before we started (or led)
        await self._warm_catalog()
        catalog_retry_seconds = _CATALOG_RETRY_FIRST_SECONDS
        while True:
            window = await self.batcher.wait()
            self.last_window = window
            self._metrics.batch_window_seconds.observe(window.duration_seconds)
            try:
                self.last_round = await self.provision_once()
            except Exception:
                log.exception("provisioning_round_failed")
                await asyncio.sleep(1.0)
                self.batcher.trigger()
                continue
            if self.last_round.catalog_unavailable:
                log.info("provisioning_retry_after_catalog", seconds=catalog_retry_seconds)
                await asyncio.sleep(catalog_retry_seconds)
                catalog_retry_seconds = min(2 * catalog_retry_seconds, _CATALOG_RETRY_MAX_SECONDS)
                self.batcher.trigger()
            else:
                catalog_retry_seconds = _CATALOG_RETRY_FIRST_SECONDS

    async def _warm_catalog(self) -> None:
        """Fetch and index the instance types of every EC2NodeClass now, so the first batch does
        not wait for ListInstanceTypes or the index (best effort: a failure is retried by the
        first round)."""
        for node_class in list(self._mirror.objects(EC2_NODE_CLASSES).values()):
            try:
                types = await self._catalog.instance_types(node_class)
                self._catalogs.index(types, BASE_DIMENSIONS, self._unavailable.active())
            except (ActuatorError, InvalidObjectError) as error:
                log.info("catalog_warm_failed", error=str(error))

    async def close(self) -> None:
        """Wait briefly for the events being sent, then cancel what is left."""
        await self._events.close()

    # -- one round ------------------------------------------------------------------------------

    async def provision_once(self) -> RoundResult:
        """One round over the mirror as it is now (see the module docstring)."""
        self.rounds += 1
        result = RoundResult()
        started = self._clock()
        snapshot = self._snapshotter.snapshot(pod_filter=is_provisionable_pod)
        result.timings["snapshot"] = self._clock() - started
        result.pending_pods = len(snapshot.pending_pods)
        pools = await self._validator.valid_pools(snapshot.nodepools, snapshot.invalid, result)
        if not snapshot.pending_pods:
            if snapshot.buffers:
                await self._headroom(pools, result)
            return result
        result.timings["validate"] = self._clock() - started - result.timings["snapshot"]
        plans, placements, unschedulable = await self._solve(snapshot, pools, result)
        result.unschedulable = tuple(unschedulable.values())
        result.solve_seconds = self._clock() - started
        self._metrics.scheduling_seconds.observe(result.solve_seconds)
        log.info(
            "provisioning_solved",
            pending_pods=len(snapshot.pending_pods),
            new_claims=len(plans),
            on_in_flight_claims=len(placements),
            unschedulable=len(unschedulable),
            solve_seconds=round(result.solve_seconds, 4),
        )
        pools_by_name = {p.model.name: p for p in pools}
        launched = await self._create_and_launch(plans, pools_by_name, result)
        for name, outcome in result.launches.items():
            if outcome is LaunchOutcome.EXHAUSTED:
                log.info("provisioning_retry_without_exhausted_offerings", nodeclaim=name)
                self.batcher.trigger()
        await self._catch_up(launched, result)
        self._nominate(result)
        self._events.send(result, placements)
        if snapshot.buffers:
            await self._headroom(pools, result)
        return result

    async def _headroom(self, pools: list[ValidPool], result: RoundResult) -> None:
        """Provision the CapacityBuffers' room after the real pods (scheduler_svc.core.headroom):
        a fresh snapshot holds the claims this round wrote, the virtual pods are solved with
        the real pending pods, and only claims holding nothing but virtual pods are launched,
        so room never takes a real pod's place."""
        snapshot = self._snapshotter.snapshot(pod_filter=is_provisionable_pod)
        pending, reports = headroom_pods(snapshot, pools, self._metrics)
        if not pending:
            self._on_headroom(reports)
            return
        ahead = dataclasses.replace(snapshot, pending_pods=(*snapshot.pending_pods, *pending))
        plans, _, unschedulable = await self._solve(ahead, pools, result)
        reports = buffer_reports(reports, unschedulable)
        self._on_headroom(reports)
        for report in reports:
            self._metrics.headroom_unplaced_pods.labels(capacitybuffer=report.buffer.name).set(
                report.unplaced
            )
        room = [p for p in plans if p.pods and all(is_headroom(k) for k in p.pods)]
        result.headroom_pods = len(pending)
        if not room:
            return
        log.info("headroom_claims", new_claims=len(room), virtual_pods=len(pending))
        launched = await self._create_and_launch(room, {p.model.name: p for p in pools}, result)
        await self._catch_up(launched, result)
        self._nominate(result)

    def has_headroom(self) -> bool:
        """Whether any CapacityBuffer exists (rounds then run without pending pods too)."""
        return CAPACITY_BUFFERS in self._mirror.resources and bool(
            self._mirror.objects(CAPACITY_BUFFERS)
        )

    def _nominate(self, result: RoundResult) -> None:
        """Record the launched claims' planned pods (existing nodes' are recorded at solve)."""
        if self._nominations is None:
            return
        for name, plan in result.plans.items():
            if result.launches.get(name) is LaunchOutcome.LAUNCHED:
                self._nominations.nominate(name, plan.pods)

    async def _solve(
        self, snapshot: CoreSnapshot, pools: list[ValidPool], result: RoundResult
    ) -> tuple[list[NodeClaimPlan], dict[str, str], dict[str, UnschedulablePod]]:
        """Solve per catalog group, highest weight first; pods one group cannot place go to
        the next. Returns the plans, pods placed on in-flight claims, and the unschedulable."""
        pods_by_key = {p.key: p for p in snapshot.pending_pods}
        remaining = list(snapshot.pending_pods)
        plans: list[NodeClaimPlan] = []
        placements: dict[str, str] = {}
        unschedulable: dict[str, UnschedulablePod] = {}
        groups: dict[tuple[CatalogKey, tuple[CapacityReservation, ...]], list[ValidPool]] = {}
        for pool in pools:
            if not pool.model.is_static:  # a static pool's count is its replicas, not pods
                groups.setdefault((pool.catalog_key, pool.reservations), []).append(pool)
        # Free instances per reservation (less what nodes and claims in flight hold), shared
        # by every group's claims this round; each solve counts them as it plans.
        now = self._wall_clock()
        room = reservation_room(
            {r.id: r for p in pools for r in p.reservations}.values(), snapshot.nodes, now=now
        )
        ordered = sorted(groups.values(), key=lambda g: -max(p.model.weight for p in g))
        if not ordered:
            for pod in remaining:
                unschedulable[pod.key] = UnschedulablePod(pod.key, "no valid NodePool")
        unavailable = self._unavailable.active()
        in_flight = {n.name for n in snapshot.nodes if n.is_in_flight}
        for group in ordered:
            if not remaining:
                break
            try:
                fetch_started = self._clock()
                instance_types = with_reserved_offerings(
                    await self._catalog.instance_types(group[0].node_class),
                    group[0].reservations,
                    now=now,
                    room=room,
                )
                result.timings["catalog"] = self._clock() - fetch_started
            except ActuatorError as error:
                log.warning("instance_types_unavailable", error=str(error))
                result.catalog_unavailable = True
                for pod in remaining:
                    unschedulable[pod.key] = UnschedulablePod(
                        pod.key, f"instance types unavailable: {error.message}"
                    )
                continue
            solve_started = self._clock()
            solved = solve(
                SchedulingInput(
                    pods=tuple(remaining),
                    nodepools=tuple(p.model for p in group),
                    instance_types=instance_types,
                    nodes=snapshot.nodes,
                    daemonsets=snapshot.daemonsets,
                    unavailable_offerings=unavailable,
                    namespaces=snapshot.namespaces,
                    min_values_policy=self._min_values_policy,
                ),
                catalogs=self._catalogs,
            )
            result.timings["solve"] = self._clock() - solve_started
            plans.extend(solved.new_claims)
            room = room_after(room, solved.new_claims)
            for placement in solved.existing_placements:
                if self._nominations is not None:
                    self._nominations.nominate(placement.node, placement.pods)
                if placement.node in in_flight:
                    for key in placement.pods:
                        placements[key] = placement.node
            left = with_root_volume_caps(solved.unschedulable, group[0].node_class, pods_by_key)
            unschedulable = {k: v for k, v in unschedulable.items() if k in left}
            unschedulable.update(left)
            remaining = [pods_by_key[k] for k in left if k in pods_by_key]
        return plans, placements, unschedulable

    async def _create_and_launch(
        self,
        plans: list[NodeClaimPlan],
        pools: dict[str, ValidPool],
        result: RoundResult,
    ) -> list[LaunchResult]:
        loop = asyncio.get_running_loop()

        def launch_sent() -> None:
            now = loop.time()
            result.first_launch_sent_at = result.first_launch_sent_at or now
            result.last_launch_sent_at = now

        async def create_and_launch(plan: NodeClaimPlan) -> LaunchResult | None:
            created = await self._creator.create(
                plan, pools[plan.nodepool].obj, before_launch=launch_sent
            )
            if created is None:
                return None
            result.claims_created.append(created.name)
            result.plans[created.name] = plan
            result.launches[created.name] = created.launch.outcome
            return created.launch

        outcomes = await asyncio.gather(*(create_and_launch(p) for p in plans))
        return [o for o in outcomes if o is not None]

    async def _catch_up(self, launched: list[LaunchResult], result: RoundResult) -> None:
        """Wait (bounded) until the mirror holds what this round wrote."""

        def caught_up() -> bool:
            for name, outcome in result.launches.items():
                current = self._mirror.nodeclaim(name)
                if outcome in (LaunchOutcome.EXHAUSTED, LaunchOutcome.FAILED):
                    if current is not None and not (current.get("metadata") or {}).get(
                        "deletionTimestamp"
                    ):
                        return False
                elif current is None:
                    return False
            for launch in launched:
                if launch.claim is None:
                    continue
                name = str(launch.claim["metadata"]["name"])
                current = self._mirror.nodeclaim(name)
                if current is None:
                    continue  # deleted since: nothing to count
                if not _at_least(resource_version_of(current), resource_version_of(launch.claim)):
                    return False
            return True

        try:
            async with asyncio.timeout(self._catch_up_timeout_seconds):
                while not caught_up():  # noqa: ASYNC110 - the mirror is fed by another task
                    await asyncio.sleep(0.005)
        except TimeoutError:
            log.warning("mirror_catch_up_timeout", claims=len(result.launches))


def _at_least(current: str | None, wanted: str | None) -> bool:
    """Whether the mirror's resourceVersion has reached `wanted` (numeric where both are, as
    etcd's and localcloud's are; otherwise only equality proves it)."""
    if wanted is None:
        return True
    if current is None:
        return False
    if current.isdigit() and wanted.isdigit():
        return int(current) >= int(wanted)
    return current == wanted
