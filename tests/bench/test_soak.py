"""The soak bench's own parts: what it counts as a duplicate, orphan or lost event, its exit
code, and the replicas' proxy moving a client to the live replica."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.soak import (
    CLAIM_TAG,
    Final,
    Options,
    RoundRobinProxy,
    Service,
    Tally,
    report,
)
from daiku_cli.up_stack import free_port


def instance(instance_id: str, claim: str) -> dict[str, Any]:
    return {"InstanceId": instance_id, "Tags": {CLAIM_TAG: claim}}


OPTIONS = Options(
    seed=1,
    pods=2,
    kill_seconds=1,
    kill_every=1,
    ice_every=1,
    interrupt_every=1,
    settle_seconds=1,
)


def final(**overrides: Any) -> Final:
    values: dict[str, Any] = {
        "running_pods": 2,
        "orphans": [],
        "lost": [],
        "claims": 1,
        "live_instances": 1,
    }
    values.update(overrides)
    return Final(**values)


async def _never(_: int) -> Any:
    raise AssertionError("not started in these tests")


def test_two_live_instances_of_one_claim_count_once_even_when_seen_again() -> None:
    tally = Tally()
    tally.observe([instance("i-1", "a"), instance("i-2", "a"), instance("i-3", "b")])
    tally.observe([instance("i-1", "a"), instance("i-2", "a")])
    tally.observe([instance("i-1", "a")])  # the extra went; it was still a duplicate
    assert tally.duplicates == 1
    assert tally.most_instances_per_claim == 2


def test_the_exit_code_is_1_for_any_failure_and_2_when_unsettled() -> None:
    services = [Service("scheduler", _never)]
    clean = Tally()
    assert report(OPTIONS, services, clean, final(), settled=1.0) == 0
    assert report(OPTIONS, services, clean, final(running_pods=1), settled=None) == 2
    assert report(OPTIONS, services, clean, final(orphans=["i-9"]), settled=None) == 1
    assert report(OPTIONS, services, clean, final(lost=["i-8"]), settled=1.0) == 1
    duplicated = Tally()
    duplicated.observe([instance("i-1", "a"), instance("i-2", "a")])
    assert report(OPTIONS, services, duplicated, final(), settled=1.0) == 1


async def test_the_proxy_hands_a_new_connection_to_a_replica_that_is_up() -> None:
    async def answer(name: bytes) -> asyncio.Server:
        async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(name)
            await writer.drain()
            writer.close()

        return await asyncio.start_server(serve, "127.0.0.1", 0)

    replica = await answer(b"b")
    down = free_port()  # nothing listens: a killed replica
    proxy = RoundRobinProxy([down, replica.sockets[0].getsockname()[1]])
    await proxy.start()
    try:
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await asyncio.wait_for(reader.read(), 5) == b"b"
            writer.close()
    finally:
        await proxy.close()
        replica.close()
