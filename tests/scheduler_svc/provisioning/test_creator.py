"""The one NodeClaim creator: naming, the write, the launch and the in-flight set."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

from scheduler_svc.core.model import RelaxedMinValues
from scheduler_svc.errors import KubeAlreadyExistsError, KubeApiError
from scheduler_svc.kube.resources import KubeObject
from scheduler_svc.kube.writer import KubeWriter
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.launch import ClaimLauncher, LaunchOutcome, LaunchResult
from tests.scheduler_svc.provisioning.test_nodeclaim_template import NODEPOOL, PLAN


class Writer:
    """Records NodeClaim writes; answers AlreadyExists for the first `taken` of them, or
    `error` for every one."""

    def __init__(self, *, taken: int = 0, error: KubeApiError | None = None) -> None:
        self.written: list[str] = []
        self.taken = taken
        self.error = error

    async def create_nodeclaim(self, claim: KubeObject) -> KubeObject:
        name = claim["metadata"]["name"]
        if self.error is not None:
            raise self.error
        if self.taken:
            self.taken -= 1
            raise KubeAlreadyExistsError("exists", status=409, reason="AlreadyExists")
        self.written.append(name)
        return claim


class Launcher:
    """Holds each launch until `release` is set; records which claims it launched and what
    the creator said about them while it held them."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.launched: list[str] = []

    async def launch(self, claim: KubeObject) -> LaunchResult:
        self.launched.append(claim["metadata"]["name"])
        self.started.set()
        await self.release.wait()
        return LaunchResult(LaunchOutcome.LAUNCHED, claim)


def creator(writer: Writer, launcher: Launcher) -> NodeClaimCreator:
    return NodeClaimCreator(
        writer=cast(KubeWriter, writer),
        launcher=cast(ClaimLauncher, launcher),
        metrics=SchedulerMetrics(),
    )


async def test_a_claim_is_in_flight_from_its_write_until_its_launch_returns() -> None:
    """While its launch runs the claim is in flight (the lifecycle controller leaves it alone,
    and a relaunch does nothing); afterwards it is not, and the result names it."""
    writer, launcher = Writer(), Launcher()
    claims = creator(writer, launcher)
    task = asyncio.create_task(claims.create(PLAN, NODEPOOL))
    await asyncio.wait_for(launcher.started.wait(), timeout=5)
    (name,) = writer.written
    assert name.startswith("default-")
    assert claims.in_flight(name)
    assert await claims.relaunch({"metadata": {"name": name}}) is None
    launcher.release.set()
    created = await asyncio.wait_for(task, timeout=5)
    assert created is not None
    assert (created.name, created.launch.outcome) == (name, LaunchOutcome.LAUNCHED)
    assert launcher.launched == [name]
    assert not claims.in_flight(name)


async def test_a_taken_name_is_drawn_again_and_a_failed_write_leaves_nothing() -> None:
    """AlreadyExists draws a new name (one claim written and launched); any other API error
    returns None with nothing launched and nothing in flight."""
    launcher = Launcher()
    launcher.release.set()
    writer = Writer(taken=2)
    created = await creator(writer, launcher).create(PLAN, NODEPOOL)
    assert created is not None
    assert launcher.launched == writer.written == [created.name]

    failing = Writer(error=KubeApiError("boom", status=500))
    claims = creator(failing, Launcher())
    assert await claims.create(PLAN, NODEPOOL) is None
    assert failing.written == []


async def test_relaunch_marks_the_claim_in_flight_while_it_runs() -> None:
    """A relaunch holds the claim in flight, so a second relaunch meanwhile does nothing."""
    launcher = Launcher()
    claims = creator(Writer(), launcher)
    claim: dict[str, Any] = {"metadata": {"name": "default-abcde"}}
    first = asyncio.create_task(claims.relaunch(claim))
    await asyncio.wait_for(launcher.started.wait(), timeout=5)
    assert claims.in_flight("default-abcde")
    assert await claims.relaunch(claim) is None
    launcher.release.set()
    result = await asyncio.wait_for(first, timeout=5)
    assert result is not None
    assert launcher.launched == ["default-abcde"]
    assert not claims.in_flight("default-abcde")


class EventWriter(Writer):
    """A Writer that also records Events (involved kind and name, reason, message)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str, str]] = []

    async def event(self, involved: KubeObject, reason: str, message: str, **_: Any) -> None:
        name = involved["metadata"]["name"]
        self.events.append((name, reason, message))


async def test_a_claim_opened_with_min_values_relaxed_gets_an_event_on_it_and_its_pool() -> None:
    """Under --min-values-policy BestEffort a relaxed claim says what was relaxed, on the claim
    and on its NodePool; a claim that kept its minValues gets no such Event."""
    launcher = Launcher()
    launcher.release.set()
    writer = EventWriter()
    relaxed = dataclasses.replace(
        PLAN,
        min_values_relaxed=(RelaxedMinValues("karpenter.k8s.aws/instance-family", 3, 1),),
    )
    metrics = SchedulerMetrics()
    claims = NodeClaimCreator(
        writer=cast(KubeWriter, writer), launcher=cast(ClaimLauncher, launcher), metrics=metrics
    )
    created = await claims.create(relaxed, NODEPOOL)
    assert created is not None
    assert (
        metrics.registry.get_sample_value(
            "daiku_scheduler_nodeclaims_min_values_relaxed_total", {"nodepool": "default"}
        )
        == 1
    )
    assert [(n, r) for n, r, _ in writer.events] == [
        (created.name, "MinValuesRelaxed"),
        ("default", "MinValuesRelaxed"),
    ]
    assert (
        "minValues for karpenter.k8s.aws/instance-family relaxed from 3 to 1"
        in (writer.events[0][2])
    )
    writer.events.clear()
    await creator(writer, launcher).create(PLAN, NODEPOOL)
    assert writer.events == []
