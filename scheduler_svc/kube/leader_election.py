"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Candidates try every `retry_period_seconds` to acquire or renew the Lease. A Lease held by
someone else can be taken once its record (holder, renewTime) has not changed for
`lease_duration_seconds`, measured on this process's own clock from when it first saw that
record (clocks of different machines are never compared). The leader renews; if it cannot
renew for `renew_deadline_seconds` it stops leading. Writes are conditional (resourceVersion),
so two candidates never both win. On a clean stop the leader releases the Lease (empty holder)
so a standby takes over at once instead of after the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler_svc.errors import KubeApiError, KubeConflictError, KubeNotFoundError
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import LEASES, KubeObject

log = structlog.get_logger(__name__)


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease `namespace/name` as `identity`."""

    def __init__(
        self,
        objects: KubeObjects,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_seconds: float = 15.0,
        renew_deadline_seconds: float = 10.0,
        retry_period_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._objects = objects
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._duration = lease_duration_seconds
        self._renew_deadline = renew_deadline_seconds
        self._retry = retry_period_seconds
        self._clock = clock
        self._observed: tuple[Any, Any] | None = None
        self._observed_at = 0.0
        self.is_leader = False
        self.transitions = 0
        self.attempts = 0
        self._warned_namespace = False

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        try:
            return await self._attempt()
        finally:
            self.attempts += 1  # counted once the answer is known (readiness waits for it)

    async def _attempt(self) -> bool:
        now = datetime.now(UTC)
        try:
            lease = await self._objects.get(LEASES, self.name, self.namespace)
        except KubeNotFoundError:
            return await self._create(now)
        except (KubeApiError, OSError) as error:
            log.debug("lease_get_failed", error=str(error))
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"))
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        if (
            holder
            and holder != self.identity
            and self._clock() - self._observed_at < self._duration
        ):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        body = self._lease_body(
            now,
            transitions=transitions,
            acquire_time=spec.get("acquireTime") if holder == self.identity else None,
        )
        body["metadata"]["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        try:
            await self._objects.replace(LEASES, body)
        except (KubeApiError, OSError) as error:
            log.debug("lease_update_failed", error=str(error))
            return False
        return True

    async def _create(self, now: datetime) -> bool:
        try:
            await self._objects.create(LEASES, self._lease_body(now, transitions=0))
        except KubeNotFoundError as error:
            # The namespace is missing: nobody can ever lead. Say so loudly, once.
            if not self._warned_namespace:
                self._warned_namespace = True
                log.warning("lease_namespace_missing", namespace=self.namespace, error=str(error))
            return False
        except KubeApiError as error:
            log.debug("lease_create_failed", error=str(error))
            return False
        return True

    def _lease_body(
        self, now: datetime, *, transitions: int, acquire_time: str | None = None
    ) -> KubeObject:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self._duration)),
                "acquireTime": acquire_time or _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": transitions,
            },
        }

    async def acquire(self) -> None:
        """Return once this candidate leads."""
        while not await self.try_acquire_or_renew():  # noqa: ASYNC110 - polls the API server
            await asyncio.sleep(self._retry)
        self.is_leader = True
        self.transitions += 1
        log.info("leader_elected", lease=f"{self.namespace}/{self.name}", identity=self.identity)

    async def keep(self) -> None:
        """Renew every retry period; return when renewal failed for the renew deadline."""
        last_renewed = self._clock()
        while True:
            await asyncio.sleep(self._retry)
            if await self.try_acquire_or_renew():
                last_renewed = self._clock()
            elif self._clock() - last_renewed >= self._renew_deadline:
                self.is_leader = False
                log.warning("leader_lost", lease=f"{self.namespace}/{self.name}")
                return

    async def lead(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, then run `work` until it ends or leadership is lost (work is cancelled);
        the Lease is released when this returns or is cancelled while leading."""
        await self.acquire()
        work_task: asyncio.Task[None] = asyncio.create_task(work(), name="leader-work")
        keep_task = asyncio.create_task(self.keep(), name="leader-renew")
        try:
            await asyncio.wait({work_task, keep_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work_task, keep_task):
                task.cancel()
            await asyncio.gather(work_task, keep_task, return_exceptions=True)
            if self.is_leader:
                await asyncio.shield(self.release())

    async def release(self) -> None:
        """Give the Lease up (empty holder) so another candidate takes it at once."""
        self.is_leader = False
        with contextlib.suppress(KubeApiError, OSError):
            lease = await self._objects.get(LEASES, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1}
            with contextlib.suppress(KubeConflictError):
                await self._objects.replace(LEASES, lease)
                log.info("leader_released", lease=f"{self.namespace}/{self.name}")
