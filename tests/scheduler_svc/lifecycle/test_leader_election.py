"""Leader election on a Lease in localcloud's API server over HTTP, with the candidates' clocks
injected so lease expiry is a matter of moving a number, not of waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from localcloud.kube.server import KubeApiServer
from scheduler_svc.kube.client import api_client_from_kubeconfig
from scheduler_svc.kube.leader_election import LeaderElector
from scheduler_svc.kube.objects import KubeObjects
from scheduler_svc.kube.resources import LEASES


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def objects(tmp_path: Path) -> AsyncIterator[KubeObjects]:
    async with KubeApiServer() as kube:
        path = kube.write_kubeconfig(tmp_path / "kubeconfig")
        async with await api_client_from_kubeconfig(path) as api:
            yield KubeObjects(api)


def elector(
    objects: KubeObjects, identity: str, clock: Clock, namespace: str = "default"
) -> LeaderElector:
    return LeaderElector(
        objects,
        namespace=namespace,
        name="daiku-scheduler",
        identity=identity,
        lease_duration_seconds=15,
        renew_deadline_seconds=10,
        retry_period_seconds=2,
        clock=clock,
    )


async def test_only_one_candidate_holds_the_lease(objects: KubeObjects) -> None:
    """The first candidate creates and holds the Lease; a second one is refused while the
    holder keeps renewing."""
    clock = Clock()
    first, second = elector(objects, "a", clock), elector(objects, "b", clock)
    assert await first.try_acquire_or_renew()
    assert not await second.try_acquire_or_renew()
    clock.now += 10
    assert await first.try_acquire_or_renew()  # renewed: the record changed
    clock.now += 10
    assert not await second.try_acquire_or_renew()
    lease = await objects.get(LEASES, "daiku-scheduler", "default")
    assert lease["spec"]["holderIdentity"] == "a"


async def test_a_silent_leaders_lease_is_taken_after_the_lease_duration(
    objects: KubeObjects,
) -> None:
    """A holder that stops renewing loses the Lease once the standby has seen the same record
    for the lease duration (measured on the standby's clock), and the transition is counted."""
    leader_clock, standby_clock = Clock(), Clock()
    leader, standby = elector(objects, "a", leader_clock), elector(objects, "b", standby_clock)
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()  # first sight of the record
    standby_clock.now += 14.9
    assert not await standby.try_acquire_or_renew()
    standby_clock.now += 0.2
    assert await standby.try_acquire_or_renew()
    lease = await objects.get(LEASES, "daiku-scheduler", "default")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not await leader.try_acquire_or_renew()  # the old leader now sees a fresh record


async def test_a_released_lease_is_taken_at_once(objects: KubeObjects) -> None:
    """After the leader releases the Lease (clean shutdown), a standby takes it on its next
    attempt without waiting for the lease duration."""
    clock = Clock()
    leader, standby = elector(objects, "a", clock), elector(objects, "b", clock)
    await leader.acquire()
    assert not await standby.try_acquire_or_renew()
    await leader.release()
    assert await standby.try_acquire_or_renew()


async def test_a_missing_namespace_means_no_leader(objects: KubeObjects) -> None:
    """A Lease namespace that does not exist cannot be led (the attempt fails, it is counted)."""
    candidate = elector(objects, "a", Clock(), namespace="absent")
    assert not await candidate.try_acquire_or_renew()
    assert candidate.attempts == 1
