"""The Events a provisioning round leaves on pods: `Nominated` (which NodeClaim takes the pod)
and `FailedProvisioning` (the core's reason), each once per pod and claim/reason, written in
the background by a few writers; and how long a nominated pod took to bind (a metric)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Protocol

import structlog

from scheduler_svc.core.model import NodeClaimPlan, UnschedulablePod
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.resources import PODS, KubeObject
from scheduler_svc.kube.writer import KubeWriter, parse_timestamp, utc_now
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.launch import LaunchOutcome
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)

_EVENT_MEMORY = 20_000
_EVENT_CONCURRENCY = 16


class RoundOutcome(Protocol):
    """What the events are about (the provisioner's RoundResult)."""

    plans: dict[str, NodeClaimPlan]
    launches: dict[str, LaunchOutcome]
    unschedulable: tuple[UnschedulablePod, ...]


class _Remembered:
    """A bounded set of keys (oldest forgotten first): events already sent."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._keys: OrderedDict[tuple[str, ...], None] = OrderedDict()

    def add(self, key: tuple[str, ...]) -> bool:
        """True when `key` is new (and remembers it)."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return True


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


class PodEvents:
    """Sends a round's pod Events and observes nominated pods binding."""

    def __init__(
        self, *, mirror: ClusterMirror, writer: KubeWriter, metrics: SchedulerMetrics
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._metrics = metrics
        self._sent = _Remembered(_EVENT_MEMORY)
        self._nominated: OrderedDict[str, None] = OrderedDict()
        self._event_tasks: set[asyncio.Task[None]] = set()
        self._event_slots = asyncio.Semaphore(_EVENT_CONCURRENCY)

    def observe_binding(self, old: KubeObject, new: KubeObject) -> None:
        uid = _uid(new)
        if uid not in self._nominated:
            return
        if (old.get("spec") or {}).get("nodeName") or not (new.get("spec") or {}).get("nodeName"):
            return
        del self._nominated[uid]
        created = (new.get("metadata") or {}).get("creationTimestamp")
        moment = parse_timestamp(created)
        if moment is not None:
            self._metrics.pod_bound_seconds.observe(max(0.0, (utc_now() - moment).total_seconds()))

    async def close(self) -> None:
        """Wait briefly for the events being sent, then cancel what is left."""
        for task in list(self._event_tasks):
            task.cancel()
        await asyncio.gather(*self._event_tasks, return_exceptions=True)

    def send(self, result: RoundOutcome, placements: dict[str, str]) -> None:
        work: list[tuple[KubeObject, str, str, bool]] = []
        claim_for_pod: dict[str, str] = dict(placements)
        for name, plan in result.plans.items():
            if result.launches.get(name) is LaunchOutcome.LAUNCHED:
                for key in plan.pods:
                    claim_for_pod[key] = name
        for key, claim_name in claim_for_pod.items():
            pod = self._mirror.get(PODS, key)
            if pod is None or not self._sent.add(("nominated", _uid(pod), claim_name)):
                continue
            self._nominated[_uid(pod)] = None
            if len(self._nominated) > _EVENT_MEMORY:
                self._nominated.popitem(last=False)
            work.append(
                (pod, "Nominated", f"Pod should schedule on: nodeclaim/{claim_name}", False)
            )
        for failure in result.unschedulable:
            pod = self._mirror.get(PODS, failure.pod)
            if pod is None or not self._sent.add(("failed", _uid(pod), failure.reason)):
                continue
            work.append((pod, "FailedProvisioning", failure.reason, True))
        if not work:
            return
        task = asyncio.create_task(self._write_events(work))
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    async def _write_events(self, work: list[tuple[KubeObject, str, str, bool]]) -> None:
        # A few writers take the items in turn: one task per Event held a task for each pod of
        # a burst while it waited for a slot (7,600 at once in `bench.reaction --rss`).
        items = iter(work)

        async def writer() -> None:
            for obj, reason, message, warning in items:
                async with self._event_slots:
                    try:
                        await self._writer.event(obj, reason, message, warning=warning)
                    except (KubeApiError, OSError) as error:
                        log.debug("event_write_failed", reason=reason, error=str(error))

        await asyncio.gather(*(writer() for _ in range(min(_EVENT_CONCURRENCY, len(work)))))
