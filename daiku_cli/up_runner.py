"""Run a scenario against a running stack: apply the objects, play the steps, watch progress.

An observer polls the API server every `poll_seconds` (pods, nodes, NodeClaims, Deployments,
Events), feeds each snapshot to the run's recorder and prints what changed. Steps run in order;
`waitUntilSettled` waits for a snapshot taken after the step began in which nothing is in
motion (see `daiku_cli.scenario.observe`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import structlog
import yaml

from daiku_cli.scenario import (
    ApplyStep,
    ClusterSnapshot,
    DeleteStep,
    PriceBook,
    RunRecorder,
    ScaleStep,
    Scenario,
    SleepStep,
    Step,
    WaitUntilSettledStep,
    object_identity,
    snapshot_from_objects,
)
from daiku_cli.scenario.progress import event_line, status_line
from daiku_cli.up_kube import KubeCallError, KubeClient

log = structlog.get_logger("daiku_cli.up")

CRD_KINDS = (
    ("daiku.dev/v1", "NodePool"),
    ("daiku.dev/v1", "EC2NodeClass"),
    ("daiku.dev/v1", "NodeClaim"),
)


class ScenarioFailedError(RuntimeError):
    """A step failed or the cluster did not settle in time; the message says why."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Observer:
    """Polls the cluster, records each snapshot and prints what changed."""

    kube: KubeClient
    recorder: RunRecorder
    out: TextIO
    started_monotonic: float
    prices: PriceBook = field(default_factory=dict)
    poll_seconds: float = 0.25
    clock: Callable[[], datetime] = utc_now
    latest: ClusterSnapshot | None = None
    latest_taken_at: float = 0.0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _last_status: str = ""
    failures: int = 0

    def say(self, line: str) -> None:
        elapsed = time.monotonic() - self.started_monotonic
        self.out.write(f"[{elapsed:6.1f}s] {line}\n")
        self.out.flush()

    async def poll_once(self) -> ClusterSnapshot:
        taken_at = time.monotonic()
        pods, nodes, claims, deployments, events = await asyncio.gather(
            self.kube.list("v1", "Pod"),
            self.kube.list("v1", "Node"),
            self.kube.list("daiku.dev/v1", "NodeClaim"),
            self.kube.list("apps/v1", "Deployment"),
            self.kube.list("v1", "Event"),
        )
        snapshot = snapshot_from_objects(
            pods=pods, nodes=nodes, claims=claims, deployments=deployments, prices=self.prices
        )
        for event in self.recorder.observe(snapshot, self.clock()):
            self.say(event_line(event))
        for event in self.recorder.observe_kube_events(_interesting(events)):
            self.say(event_line(event))
        status = status_line(snapshot)
        if status != self._last_status:
            self._last_status = status
            self.say(status)
        async with self._changed:
            self.latest = snapshot
            self.latest_taken_at = taken_at
            self._changed.notify_all()
        return snapshot

    async def run(self) -> None:
        while True:
            began = time.monotonic()
            try:
                await self.poll_once()
                self.failures = 0
            except (KubeCallError, OSError, TimeoutError) as error:
                # The API server may be busy or restarting; the next poll tries again.
                self.failures += 1
                log.warning("observe_failed", error=str(error), failures=self.failures)
            # With thousands of pods a poll takes a while: never spend more than half of the
            # API server's time on watching it.
            await asyncio.sleep(max(self.poll_seconds, time.monotonic() - began))

    async def wait_until_settled(self, since_monotonic: float, timeout_seconds: float) -> None:
        """Return once a snapshot taken after `since_monotonic` is settled; ScenarioFailedError
        with the reasons otherwise."""

        def settled() -> bool:
            return (
                self.latest is not None
                and self.latest_taken_at >= since_monotonic
                and self.latest.is_settled
            )

        try:
            async with asyncio.timeout(timeout_seconds), self._changed:
                await self._changed.wait_for(settled)
        except TimeoutError:
            reasons = self.latest.unsettled_reasons() if self.latest else ["no snapshot yet"]
            raise ScenarioFailedError(
                f"not settled after {timeout_seconds:g} s: " + "; ".join(reasons)
            ) from None


def _interesting(events: list[dict[str, object]]) -> list[dict[str, object]]:
    """Events about NodeClaims, NodePools and Nodes, and pods daiku could not provision (the
    per-pod scheduling chatter of a thousand pods would drown the view)."""
    kept = []
    for event in events:
        involved = event.get("involvedObject")
        kind = involved.get("kind") if isinstance(involved, dict) else None
        if kind in ("NodeClaim", "NodePool", "EC2NodeClass") or (
            kind == "Pod" and event.get("reason") == "FailedProvisioning"
        ):
            kept.append(event)
    return kept


async def install_crds(kube: KubeClient, crd_dir: Path) -> None:
    """Apply daiku's CRDs and wait until the API server serves their kinds."""
    for document in await asyncio.to_thread(_read_crds, crd_dir):
        await kube.apply(document)
    for api_version, kind in CRD_KINDS:
        await kube.wait_until_served(api_version, kind)


def _read_crds(crd_dir: Path) -> list[dict[str, object]]:
    documents: list[dict[str, object]] = []
    paths = sorted(crd_dir.glob("*.yaml"))
    if not paths:
        raise OSError(f"no CRDs (*.yaml) in {crd_dir}")
    for path in paths:
        documents.extend(
            d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)
        )
    return documents


async def apply_objects(kube: KubeClient, scenario: Scenario, say: Callable[[str], None]) -> None:
    for obj in scenario.objects:
        try:
            outcome = await kube.apply(obj)
        except KubeCallError as error:
            raise ScenarioFailedError(f"applying {object_identity(obj)}: {error}") from error
        say(f"{object_identity(obj)} {outcome}")


async def run_step(step: Step, kube: KubeClient, observer: Observer) -> None:
    """One step; ScenarioFailedError naming the step when it fails."""
    started = time.monotonic()
    try:
        if isinstance(step, ScaleStep):
            namespace = step.deployment.namespace or "default"
            await kube.scale_deployment(namespace, step.deployment.name, step.replicas)
        elif isinstance(step, ApplyStep):
            await kube.apply(step.obj)
        elif isinstance(step, DeleteStep):
            existed = await kube.delete(step.kind, step.name, step.namespace, step.api_version)
            if not existed:
                observer.say(f"  {step.kind} {step.name} did not exist")
        elif isinstance(step, SleepStep):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, WaitUntilSettledStep):
            await observer.wait_until_settled(started, step.timeout_seconds)
    except KubeCallError as error:
        raise ScenarioFailedError(str(error)) from error


async def run_steps(scenario: Scenario, kube: KubeClient, observer: Observer) -> None:
    """Every step in order; the recorder notes when each started and finished."""
    total = len(scenario.steps)
    for index, step in enumerate(scenario.steps, start=1):
        observer.recorder.step_started(index, step.describe(), observer.clock())
        observer.say(f"step {index}/{total}: {step.describe()}")
        try:
            await run_step(step, kube, observer)
        except ScenarioFailedError as error:
            observer.recorder.step_finished(index, observer.clock(), outcome=f"failed: {error}")
            raise ScenarioFailedError(f"step {index} ({step.describe()}): {error}") from error
        observer.recorder.step_finished(index, observer.clock())
