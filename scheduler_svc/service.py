"""The scheduler service assembled: watches -> mirror -> (leader only) provisioner and NodeClaim
lifecycle, plus leader election, health and metrics endpoints.

    service = SchedulerService(settings)
    await service.run(stop_event, on_ready=print)   # returns after stop_event is set

Every replica watches (a standby's mirror is warm, so fail-over is one lease duration, not a
relist); only the Lease holder provisions and reconciles. `on_ready` gets one line containing
`ready` once the mirror is synced and the first election attempt is done (leading or standing
by). Shutdown (stop_event): leader work is cancelled, the Lease released, connections closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from scheduler_svc.actuator_client import ActuatorClient, TlsFiles
from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.model import MinValuesPolicy
from scheduler_svc.disruption import DisruptionController, DisruptionControllerSettings
from scheduler_svc.disruption.replacement import ReplacementController, ReplacementSettings
from scheduler_svc.disruption.snapshot import catalog_instance_types
from scheduler_svc.health import (
    ActuatorProbe,
    CrashWatch,
    HttpEndpoint,
    health_app,
    metrics_app,
)
from scheduler_svc.kube.client import KubeApiClient, new_api_client
from scheduler_svc.kube.leader_election import LeaderElector
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.watch import WatchSettings, run_watches
from scheduler_svc.kube.writer import KubeWriter, utc_now
from scheduler_svc.lifecycle.capacity_blocks import CapacityBlockController, CapacityBlockSettings
from scheduler_svc.lifecycle.controller import LifecycleController, LifecycleSettings
from scheduler_svc.lifecycle.interruption import InterruptionController, InterruptionSettings
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.nodeclass import NodeClassStatusController, NodeClassStatusSettings
from scheduler_svc.provisioning.batcher import Batcher
from scheduler_svc.provisioning.capacity_status import (
    CapacityStatusController,
    CapacityStatusSettings,
)
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.launch import ClaimLauncher
from scheduler_svc.provisioning.provisioner import Provisioner
from scheduler_svc.provisioning.static import StaticCapacityController, StaticCapacitySettings
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.settings import SchedulerSettings
from scheduler_svc.state.cluster import Change, ClusterMirror, is_provisionable_pod
from scheduler_svc.state.core_snapshot import CoreSnapshotter
from scheduler_svc.state.nominations import Nominations

log = structlog.get_logger("scheduler_svc")


class ControllerCrashedError(RuntimeError):
    """A controller's loop ended with an exception; the process exits non-zero so Kubernetes
    restarts it (decision 0008: a restart resumes from the API server's state)."""


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """Knobs tests turn (production uses the defaults)."""

    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    wall_clock: Callable[[], datetime] = utc_now  # the lifecycle's timeouts read it
    # Its consolidation thresholds come from SchedulerSettings (flags/env), not from here.
    disruption: DisruptionControllerSettings = field(default_factory=DisruptionControllerSettings)
    disruption_clock: Callable[[], datetime] = utc_now  # consolidateAfter, expireAfter, waits
    interruption: InterruptionSettings = field(default_factory=InterruptionSettings)
    # Node repair and rebalance recommendations; node_repair and the drain bound come from
    # SchedulerSettings. It reads disruption_clock.
    replacement: ReplacementSettings = field(default_factory=ReplacementSettings)
    capacity_blocks: CapacityBlockSettings = field(default_factory=CapacityBlockSettings)
    nodeclass: NodeClassStatusSettings = field(default_factory=NodeClassStatusSettings)
    capacity_status: CapacityStatusSettings = field(default_factory=CapacityStatusSettings)
    static_capacity: StaticCapacitySettings = field(default_factory=StaticCapacitySettings)
    watch: WatchSettings | None = None
    # How long a new leader waits for the actuator's health to say SERVING before its first
    # round (an actuator prefetches its catalog, ~10 s through the emulator, before it
    # listens); past it the rounds start anyway and report the actuator as unavailable.
    actuator_start_wait_seconds: float = 30.0
    # Where /healthz, /readyz and /metrics listen; None: every interface in a pod (probes and
    # Prometheus come from outside), loopback when run locally with a kubeconfig.
    host: str | None = None


class SchedulerService:
    """One scheduler replica; see the module docstring."""

    def __init__(
        self,
        settings: SchedulerSettings,
        *,
        options: ServiceOptions | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.options = options or ServiceOptions()
        self.metrics = metrics or SchedulerMetrics()
        self.mirror = ClusterMirror()
        self.provisioner: Provisioner | None = None
        self.lifecycle: LifecycleController | None = None
        self.interruption: InterruptionController | None = None
        self.capacity_blocks: CapacityBlockController | None = None
        self.disruption: DisruptionController | None = None
        self.replacement: ReplacementController | None = None
        self.nodeclass_status: NodeClassStatusController | None = None
        self.capacity_status: CapacityStatusController | None = None
        self.static_capacity: StaticCapacityController | None = None
        self.elector: LeaderElector | None = None
        self.health_port = 0
        self.metrics_port = 0
        self._leading = False
        self._api: KubeApiClient | None = None
        self._actuator: ActuatorClient | None = None
        self._actuator_probe: ActuatorProbe | None = None
        self.crashes = CrashWatch()

    def _host(self) -> str:
        if self.options.host is not None:
            return self.options.host
        return "0.0.0.0" if self.settings.in_cluster else "127.0.0.1"  # noqa: S104 - see above

    @property
    def is_leading(self) -> bool:
        return self._leading

    def _readiness(self) -> str | None:
        if not self.mirror.is_synced():
            return "cluster mirror not synced yet"
        return None if self._actuator_probe is None else self._actuator_probe.reason

    def _has_provisionable_pods(self) -> bool:
        # CapacityBuffers count as pods that always wait: their room is checked every recheck.
        if self.provisioner is not None and self.provisioner.has_headroom():
            return True
        return any(is_provisionable_pod(pod) for pod in self.mirror.pending_pods())

    def _on_change(self, change: Change) -> None:
        if not self._leading:
            return
        if self.provisioner is not None:
            self.provisioner.on_change(change)
        if self.lifecycle is not None:
            self.lifecycle.on_change(change)
        if self.disruption is not None:
            self.disruption.on_change(change)
        if self.replacement is not None:
            self.replacement.on_change(change)
        if self.nodeclass_status is not None:
            self.nodeclass_status.on_change(change)
        if self.capacity_status is not None:
            self.capacity_status.on_change(change)
        if self.static_capacity is not None:
            self.static_capacity.on_change(change)

    async def run(
        self, stop: asyncio.Event, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        """Serve until `stop` is set; see the module docstring."""
        settings = self.settings
        endpoints: list[HttpEndpoint] = []
        tasks: list[asyncio.Task[object]] = []
        try:
            self._api = await new_api_client(
                kubeconfig=settings.kubeconfig,
                in_cluster=settings.in_cluster,
                context=settings.kube_context,
            )
            tls = (
                TlsFiles(
                    ca_file=settings.actuator_tls_ca_file,
                    cert_file=settings.actuator_tls_cert_file,
                    key_file=settings.actuator_tls_key_file,
                    server_name=settings.actuator_tls_server_name,
                )
                if settings.actuator_tls_enabled
                else None
            )
            self._actuator = ActuatorClient.connect(
                settings.actuator_address, token=settings.resolved_actuator_token(), tls=tls
            )
            self._actuator_probe = ActuatorProbe(
                self._actuator.is_serving, address=settings.actuator_address
            )
            tasks.append(asyncio.create_task(self._actuator_probe.run(), name="actuator-probe"))
            # Port 0 turns an endpoint off (settings' contract).
            if settings.health_port:
                health = HttpEndpoint(
                    health_app(self._readiness, lambda: self.crashes.reason),
                    host=self._host(),
                    port=settings.health_port,
                )
                await health.start()
                endpoints.append(health)
                self.health_port = health.port
            if settings.metrics_port:
                metrics_endpoint = HttpEndpoint(
                    metrics_app(self.metrics.registry),
                    host=self._host(),
                    port=settings.metrics_port,
                )
                await metrics_endpoint.start()
                endpoints.append(metrics_endpoint)
                self.metrics_port = metrics_endpoint.port
            self._build(self._api, self._actuator)
            self.mirror.add_listener(self._on_change)
            watches = self.mirror.watches(self._api, settings=self.options.watch)
            tasks.append(asyncio.create_task(run_watches(watches), name="watches"))
            self.crashes.watch(tasks[-1])
            stopping = asyncio.create_task(stop.wait())
            crashed = asyncio.create_task(self.crashes.crashed.wait())
            synced = asyncio.create_task(self.mirror.wait_synced())
            await asyncio.wait({stopping, crashed, synced}, return_when=asyncio.FIRST_COMPLETED)
            synced.cancel()
            if not stop.is_set() and not self.crashes.crashed.is_set():
                log.info("scheduler_synced")
                tasks.append(asyncio.create_task(self._campaign(), name="campaign"))
                self.crashes.watch(tasks[-1])
                await self._announce(on_ready, stop)
                await asyncio.wait({stopping, crashed}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            crashed.cancel()
            if self.crashes.error is not None:
                raise ControllerCrashedError(self.crashes.reason) from self.crashes.error
        finally:
            await self._shutdown(tasks, endpoints)

    def _build(self, api: KubeApiClient, actuator: ActuatorClient) -> None:
        settings = self.settings
        writer = KubeWriter(KubeObjects(api))
        overlays = CoreSnapshotter(self.mirror)
        # NodeOverlays from the mirror, applied to every catalog read (invalid ones are left
        # out; the provisioner reports them).
        catalog = InstanceTypeCatalog(actuator, overlays=lambda: overlays.overlays()[0])
        # One set of catalog indexes for the provisioner's solves and disruption's simulations
        # (both run on the event loop's thread); more entries for consolidation's subsets.
        catalog_indexes = CatalogCache(size=16)
        unavailable = UnavailableOfferingsCache()
        launcher = ClaimLauncher(
            actuator=actuator,
            writer=writer,
            mirror=self.mirror,
            catalog=catalog,
            unavailable=unavailable,
            metrics=self.metrics,
        )
        # The one NodeClaim creator: provisioning, disruption and lifecycle share it.
        creator = NodeClaimCreator(writer=writer, launcher=launcher, metrics=self.metrics)
        # Pods the provisioner plans onto nodes, on the disruption clock: a node whose pods the
        # default-scheduler has not bound yet is not disrupted (the nomination window).
        nominations = Nominations(self.options.disruption_clock)
        mirror = self.mirror
        # CapacityBuffer and NodeOverlay statuses; the provisioner reports each round's room.
        self.capacity_status = CapacityStatusController(
            mirror=mirror,
            writer=writer,
            instance_types=lambda: catalog_instance_types(mirror, catalog),
            settings=self.options.capacity_status,
        )
        self.provisioner = Provisioner(
            mirror=self.mirror,
            writer=writer,
            catalog=catalog,
            creator=creator,
            unavailable=unavailable,
            metrics=self.metrics,
            batcher=Batcher(
                idle_seconds=settings.batch_idle_seconds,
                max_seconds=settings.batch_max_seconds,
                recheck_seconds=settings.pending_pods_recheck_seconds,
                has_pending=self._has_provisionable_pods,
            ),
            catalogs=catalog_indexes,
            nominations=nominations,
            wall_clock=self.options.wall_clock,
            min_values_policy=MinValuesPolicy(settings.min_values_policy),
            on_headroom=self.capacity_status.report,
        )
        self.lifecycle = LifecycleController(
            mirror=self.mirror,
            writer=writer,
            actuator=actuator,
            creator=creator,
            metrics=self.metrics,
            settings=self.options.lifecycle,
            clock=self.options.wall_clock,
        )
        self.interruption = InterruptionController(
            mirror=self.mirror,
            writer=writer,
            actuator=actuator,
            terminator=self.lifecycle.terminator,
            unavailable=unavailable,
            metrics=self.metrics,
            settings=self.options.interruption,
        )
        self.capacity_blocks = CapacityBlockController(
            mirror=mirror,
            writer=writer,
            terminator=self.lifecycle.terminator,
            clock=self.options.wall_clock,
            settings=self.options.capacity_blocks,
        )
        self.disruption = DisruptionController(
            mirror=mirror,
            writer=writer,
            metrics=self.metrics,
            creator=creator,
            instance_types=lambda: catalog_instance_types(mirror, catalog),
            settings=dataclasses.replace(
                self.options.disruption,
                options=settings.consolidation_options(),
                nomination_window_seconds=max(10.0, 2 * settings.batch_max_seconds),
            ),
            clock=self.options.disruption_clock,
            catalogs=catalog_indexes,
            nominations=nominations,
        )
        self.static_capacity = StaticCapacityController(
            mirror=mirror,
            writer=writer,
            catalog=catalog,
            creator=creator,
            unavailable=unavailable,
            settings=self.options.static_capacity,
        )
        self.replacement = ReplacementController(
            mirror=mirror,
            writer=writer,
            metrics=self.metrics,
            cordon=self.lifecycle.terminator.cordon,
            creator=creator,
            instance_types=lambda: catalog_instance_types(mirror, catalog),
            settings=dataclasses.replace(
                self.options.replacement,
                node_repair=settings.node_repair,
                repair_drain_seconds=settings.node_repair_drain_seconds,
            ),
            clock=self.options.disruption_clock,
            catalogs=catalog_indexes,
        )
        self.nodeclass_status = NodeClassStatusController(
            mirror=mirror, writer=writer, actuator=actuator, settings=self.options.nodeclass
        )
        if settings.leader_elect:
            self.elector = LeaderElector(
                KubeObjects(api),
                namespace=settings.leader_election_namespace,
                name=settings.leader_election_lease_name,
                identity=settings.leader_election_identity,
                lease_duration_seconds=settings.lease_duration_seconds,
                renew_deadline_seconds=settings.lease_renew_deadline_seconds,
                retry_period_seconds=settings.lease_retry_period_seconds,
            )

    async def _announce(self, on_ready: Callable[[str], None] | None, stop: asyncio.Event) -> None:
        elector = self.elector
        if elector is not None:
            while elector.attempts == 0 and not stop.is_set():  # noqa: ASYNC110 - polls a counter
                await asyncio.sleep(0.01)
        role = "leader" if elector is None or elector.is_leader else "standby"
        line = f"ready role={role} health_port={self.health_port} metrics_port={self.metrics_port}"
        log.info("scheduler_ready", role=role)
        if on_ready is not None:
            on_ready(line)

    async def _campaign(self) -> None:
        if self.elector is None:
            await self._lead()
            return
        while True:
            await self.elector.lead(self._lead)
            self.metrics.is_leader.set(0)

    async def _await_actuator(self) -> None:
        """Wait (bounded) for the actuator to serve before the first round: started together
        (`daiku up`, a rollout), its first calls would fail on a connection refused moments
        before it listens, and pods would be reported FailedProvisioning for nothing."""
        assert self._actuator is not None
        address = self.settings.actuator_address
        waited = self.options.actuator_start_wait_seconds
        if await self._actuator.wait_until_serving(waited):
            log.info("actuator_serving", address=address)
            if self._actuator_probe is not None:
                await self._actuator_probe.check()
        else:
            log.warning("actuator_not_serving_yet", address=address, waited_seconds=waited)

    async def _lead(self) -> None:
        assert self.provisioner is not None
        assert self.lifecycle is not None
        await self._await_actuator()
        self._leading = True
        self.metrics.is_leader.set(1)
        log.info("scheduler_leading")
        try:
            # A crash is noticed per controller here: the leader elector swallows what its work
            # raises (it only re-campaigns), which would leave a live process doing nothing.
            async with asyncio.TaskGroup() as group:
                for name, loop in self._controller_loops():
                    self.crashes.watch(group.create_task(loop, name=name))
        finally:
            self._leading = False
            await self.provisioner.close()
            await self.lifecycle.close()

    def _controller_loops(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        controllers = {
            "provisioner": self.provisioner,
            "lifecycle": self.lifecycle,
            "interruption": self.interruption,
            "capacity_blocks": self.capacity_blocks,
            "disruption": self.disruption,
            "replacement": self.replacement,
            "nodeclass_status": self.nodeclass_status,
            "capacity_status": self.capacity_status,
            "static_capacity": self.static_capacity,
        }
        return [(name, each.run()) for name, each in controllers.items() if each is not None]

    async def _shutdown(
        self, tasks: list[asyncio.Task[object]], endpoints: list[HttpEndpoint]
    ) -> None:
        for task in reversed(tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for endpoint in endpoints:
            await endpoint.close()
        if self._actuator is not None:
            await self._actuator.close()
        if self._api is not None:
            await self._api.close()
        log.info("scheduler_stopped")
