"""Garbage collection of launch templates: EC2 allows a few thousand per region, and a new one
appears with every AMI, label or node-class change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from actuator_svc.cloud.provider import CloudProvider
from actuator_svc.core.tags import CLUSTER_TAG
from actuator_svc.errors import CloudError

log = structlog.get_logger("actuator_svc.launch_templates")
DEFAULT_IDLE_SECONDS = 3600.0
DEFAULT_INTERVAL_SECONDS = 600.0


class LaunchTemplateCollector:
    """Deletes the cluster's launch templates that were created more than `idle_seconds` ago
    and that no launch of this process used within `idle_seconds`. Deleting one another
    replica still uses is safe: its next CreateFleet re-creates it (Ec2Cloud), and a running
    instance never needs its template again."""

    def __init__(
        self,
        cloud: CloudProvider,
        *,
        cluster_name: str,
        clock: Callable[[], float] = time.time,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
    ) -> None:
        self._cloud = cloud
        self._cluster_name = cluster_name
        self._clock = clock
        self._idle_seconds = idle_seconds
        self._interval_seconds = interval_seconds
        self._last_used: dict[str, float] = {}

    def used(self, name: str) -> None:
        """A launch is about to use the template `name`."""
        self._last_used[name] = self._clock()

    async def collect(self) -> list[str]:
        """Delete the idle templates now; their names."""
        now = self._clock()
        horizon = now - self._idle_seconds
        templates = await self._cloud.find_launch_templates({CLUSTER_TAG: self._cluster_name})
        idle = [
            t.name
            for t in templates
            if t.created_seconds < horizon
            and self._last_used.get(t.name, t.created_seconds) < horizon
        ]
        for name in idle:
            await self._cloud.delete_launch_template(name)
            self._last_used.pop(name, None)
        if idle:
            log.info("launch_templates_collected", count=len(idle), kept=len(templates) - len(idle))
        return idle

    async def run(self) -> None:
        """Collect every `interval_seconds` until cancelled; a cloud error waits for the next."""
        while True:
            await asyncio.sleep(self._interval_seconds)
            try:
                await self.collect()
            except CloudError as exc:
                log.warning("launch_template_collection_failed", error=str(exc))
