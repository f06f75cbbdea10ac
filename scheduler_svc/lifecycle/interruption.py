"""Interruption handling: the actuator's cloud events (from the SQS interruption queue) take
interrupted nodes away before the cloud does.

`run()` (leader only) holds one `WatchCloudEvents` stream, reconnecting with jittered
exponential backoff when it breaks (`FAILED_PRECONDITION`, no queue configured, is retried
slowly). Each event is acknowledged once acted on (what it changed is in the API server); the
actuator keeps it on the queue until then, so an interruption that arrives while no scheduler
runs, or while one is killed mid-way, is handled by the next leader (decision 0011). Handling
is idempotent: an event may come twice. For an event about an instance one of our NodeClaims
owns:

- spot interruption warning, scheduled change, instance stopping/stopped/shutting-down/
  terminated -> the Node is cordoned (`daiku.dev/disrupted:NoSchedule`), an Event
  (`Interrupted`) names why, and the NodeClaim is deleted: termination drains it, the drained
  pods go pending and the provisioner launches their replacement, well within the two-minute
  warning on a responsive cluster. A spot warning's offering also goes into the provisioner's
  unavailable-offerings cache (the actuator marks it on its side too), so the replacement is
  not solved onto the pool being reclaimed;
- rebalance recommendation -> logged, an Event, and the claim annotated
  `daiku.dev/rebalance-recommended-at` (first time only): a NodePool with
  `disruption.rebalanceRecommendationPolicy: Replace` has the node replaced first by the
  replacement controller (decision 0015); Karpenter v1 does not act on them;
- anything else (other states, instances we do not own) -> counted and ignored.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import structlog

from scheduler_svc.actuator_client import CloudEvent, CloudEventKind
from scheduler_svc.core.disruption import REBALANCE_RECOMMENDED_ANNOTATION
from scheduler_svc.core.model import UnavailableOffering
from scheduler_svc.errors import ActuatorError, FailedPreconditionError, KubeApiError
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import KubeWriter, name_of, timestamp, utc_now
from scheduler_svc.lifecycle.termination import Terminator
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)

DISRUPTIVE_INSTANCE_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


@dataclass(frozen=True, slots=True)
class InterruptionSettings:
    reconnect_base_seconds: float = 0.5
    reconnect_max_seconds: float = 30.0
    # No interruption queue on the actuator: asking again often would only fill the logs.
    unconfigured_retry_seconds: float = 60.0


class InterruptionController:
    """Consumes cloud events and disrupts interrupted nodes (module docstring)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        actuator: Any,
        terminator: Terminator,
        unavailable: UnavailableOfferingsCache,
        metrics: SchedulerMetrics,
        settings: InterruptionSettings | None = None,
        rng: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._actuator = actuator
        self._terminator = terminator
        self._unavailable = unavailable
        self._metrics = metrics
        self.settings = settings or InterruptionSettings()
        self._rng = rng
        self._sleep = sleep
        self.connected = asyncio.Event()  # set while a stream is being opened or is open

    async def run(self) -> NoReturn:
        """Watch cloud events for ever, reconnecting when the stream breaks."""
        failures = 0
        while True:
            try:
                async for event in self._watch():
                    failures = 0
                    try:
                        await self.handle(event)
                    except Exception:  # not acknowledged: the actuator hands it out again
                        log.exception("cloud_event_failed", event_id=event.id)
                        continue
                    await self._acknowledge(event)
                delay = self._reconnect_delay(failures := failures + 1)
                log.info("cloud_events_stream_ended", retry_in_seconds=round(delay, 2))
            except FailedPreconditionError as error:
                delay = self.settings.unconfigured_retry_seconds
                log.warning("cloud_events_unavailable", error=str(error), retry_in_seconds=delay)
            except ActuatorError as error:
                delay = self._reconnect_delay(failures := failures + 1)
                log.warning(
                    "cloud_events_stream_broken", error=str(error), retry_in_seconds=round(delay, 2)
                )
            except Exception:  # never lose leadership over one broken stream
                delay = self._reconnect_delay(failures := failures + 1)
                log.exception("cloud_events_stream_failed", retry_in_seconds=round(delay, 2))
            finally:
                self.connected.clear()
            await self._sleep(delay)

    async def _watch(self) -> Any:
        stream = self._actuator.watch_cloud_events()
        self.connected.set()
        log.info("cloud_events_connecting")
        async for event in stream:
            yield event

    async def _acknowledge(self, event: CloudEvent) -> None:
        """Tell the actuator the event was acted on (the claim's deletion is in the API server),
        so its queue message goes; until then it survives our restart."""
        try:
            await self._actuator.acknowledge_cloud_events([event])
        except ActuatorError as error:  # it comes again; acting on it twice is harmless
            log.warning("cloud_event_acknowledge_failed", event_id=event.id, error=str(error))

    def _reconnect_delay(self, failures: int) -> float:
        settings = self.settings
        ceiling = min(
            settings.reconnect_max_seconds,
            settings.reconnect_base_seconds * float(2 ** min(failures - 1, 30)),
        )
        return ceiling * (0.5 + self._rng() / 2)

    def _claim_of(self, event: CloudEvent) -> KubeObject | None:
        if event.nodeclaim_name:
            claim = self._mirror.nodeclaim(event.nodeclaim_name)
            if claim is not None:
                return claim
        if event.provider_id:
            return self._mirror.nodeclaim_by_provider_id(event.provider_id)
        return None

    async def handle(self, event: CloudEvent) -> None:
        """Act on one cloud event (module docstring)."""
        bound = log.bind(
            kind=str(event.kind), instance_id=event.instance_id, nodeclaim=event.nodeclaim_name
        )
        claim = self._claim_of(event)
        if claim is None:
            self._count(event, "ignored")
            bound.info("cloud_event_ignored", reason="no NodeClaim of ours")
            return
        node = self._terminator.node_of(claim)
        if event.kind is CloudEventKind.REBALANCE_RECOMMENDATION:
            self._count(event, "noted")
            bound.info("cloud_event_rebalance_recommendation")
            await self._terminator.record(
                claim, node, "RebalanceRecommendation", "EC2 recommends rebalancing this instance"
            )
            await self._note_rebalance(claim, event)
            return
        why = self._disruption_reason(event)
        if why is None:
            self._count(event, "ignored")
            bound.info("cloud_event_ignored", instance_state=event.instance_state)
            return
        if event.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING and event.offering is not None:
            self._unavailable.mark([UnavailableOffering(*event.offering)])
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            self._count(event, "ignored")
            bound.info("cloud_event_ignored", reason="NodeClaim already terminating")
            return
        if node is not None:
            await self._terminator.cordon(node)
        await self._terminator.record(claim, node, "Interrupted", why, warning=True)
        try:
            await self._writer.delete_nodeclaim(name_of(claim))
        except KubeApiError as error:
            bound.warning("interrupted_nodeclaim_delete_failed", error=str(error))
            raise
        self._count(event, "disrupted")
        bound.info("nodeclaim_interrupted", reason=why)

    async def _note_rebalance(self, claim: KubeObject, event: CloudEvent) -> None:
        """Stamp the first recommendation on the claim (durable: the event is acknowledged)."""
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        if REBALANCE_RECOMMENDED_ANNOTATION in annotations:
            return
        moment = timestamp(event.time or utc_now())
        await self._writer.patch_nodeclaim(
            name_of(claim),
            {"metadata": {"annotations": {REBALANCE_RECOMMENDED_ANNOTATION: moment}}},
        )

    @staticmethod
    def _disruption_reason(event: CloudEvent) -> str | None:
        if event.kind is CloudEventKind.SPOT_INTERRUPTION_WARNING:
            when = f" at {event.deadline.isoformat()}" if event.deadline else ""
            return f"spot interruption warning: the instance is reclaimed{when}"
        if event.kind is CloudEventKind.SCHEDULED_CHANGE:
            return "scheduled change (maintenance) for the instance"
        if (
            event.kind is CloudEventKind.INSTANCE_STATE_CHANGE
            and event.instance_state in DISRUPTIVE_INSTANCE_STATES
        ):
            return f"the instance is {event.instance_state}"
        return None

    def _count(self, event: CloudEvent, action: str) -> None:
        self._metrics.cloud_events.labels(kind=str(event.kind), action=action).inc()
