"""Benchmark: the actuator's memory under a flood of large requests.

Starts the EC2 emulator (in this process) and `python -m actuator_svc` with a bearer token (a
separate process, as in production) on loopback, then sends waves of concurrent LaunchNodeClaim
calls with large bodies: the 3 MB requests of the issue-13 probe, and bodies at the method's
limit (256 KiB, every byte an offering: the most objects per byte to parse), each with and
without the token. The actuator's resident memory is sampled every 5 ms during each wave.
Prints per wave: status codes, peak RSS of the actuator process, and the verdict against the
Deployment's memory limit (512 MiB).

    uv run python -m bench.request_flood [--concurrency 60] [--waves 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import structlog

from bench import ice_retry
from daiku.actuator.v1 import actuator_pb2 as pb
from localcloud.ec2 import Ec2Emulator

TOKEN = "bench-token"
LIMIT_MIB = 512  # deploy/: the actuator container's memory limit
METHOD = "/daiku.actuator.v1.Actuator/LaunchNodeClaim"


def start_actuator(endpoint_url: str) -> tuple[subprocess.Popen[str], str]:
    """`python -m actuator_svc` with a token (ICE cache at its default) on loopback."""
    return ice_retry.start_actuator(
        endpoint_url,
        {
            "ACTUATOR_AUTH_TOKEN": TOKEN,
            "ACTUATOR_LOG_LEVEL": "ERROR",
            "ACTUATOR_UNAVAILABLE_OFFERING_TTL_SECONDS": "180",
        },
    )


def rss_mib(pid: int) -> float:
    """The process's resident set size now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakSampler:
    """Samples a process's RSS every 5 ms on a thread; `peak` is the largest seen."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self.peak = rss_mib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_mib(self._pid))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def body_of(size_bytes: int) -> bytes:
    """A LaunchNodeClaimRequest of about `size_bytes`, all offerings (objects to parse)."""
    one = pb.Offering(instance_type="m5.large", zone="us-east-1a", capacity_type="spot")
    count = size_bytes // (len(one.SerializeToString()) + 2)
    request = pb.LaunchNodeClaimRequest(
        nodeclaim_name="flood", nodepool_name="default", offerings=[one] * count
    )
    return request.SerializeToString()


async def wave(address: str, body: bytes, concurrency: int, with_token: bool) -> Counter[str]:
    """`concurrency` calls at once, each on its own connection; the status codes."""
    metadata = (("authorization", f"Bearer {TOKEN}"),) if with_token else ()

    async def one() -> str:
        async with grpc.aio.insecure_channel(
            address, options=[("grpc.max_send_message_length", 8 * 1024 * 1024)]
        ) as channel:
            call = channel.unary_unary(
                METHOD, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw
            )
            try:
                await call(body, metadata=metadata, timeout=120)
            except grpc.aio.AioRpcError as error:
                return error.code().name
            return "OK"

    return Counter(await asyncio.gather(*(one() for _ in range(concurrency))))


async def main(concurrency: int, waves: int) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    cases = [
        ("3 MB, no token", 3_000_000, False),
        ("3 MB, token", 3_000_000, True),
        ("256 KiB (the limit), no token", 256 * 1024 - 16, False),
        ("256 KiB (the limit), token", 256 * 1024 - 16, True),
    ]
    async with Ec2Emulator(port=0, region="us-east-1", cluster_name="daiku") as emulator:
        process, address = start_actuator(emulator.endpoint_url)
        try:
            idle = rss_mib(process.pid)
            print(f"request flood: {concurrency} concurrent LaunchNodeClaim x {waves} waves")
            print(f"actuator RSS idle: {idle:.0f} MiB; container limit {LIMIT_MIB} MiB")
            worst = idle
            for name, size, with_token in cases:
                body = body_of(size)
                started = time.monotonic()
                codes: Counter[str] = Counter()
                with PeakSampler(process.pid) as sampler:
                    for _ in range(waves):
                        codes += await wave(address, body, concurrency, with_token)
                worst = max(worst, sampler.peak)
                print(
                    f"{name:<30} body {len(body) / 2**20:5.2f} MiB  peak RSS "
                    f"{sampler.peak:6.0f} MiB  {time.monotonic() - started:5.1f} s  "
                    f"{dict(codes)}"
                )
        finally:
            process.terminate()
            process.wait(timeout=30)
    verdict = "under" if worst < LIMIT_MIB else "OVER"
    print(f"worst peak {worst:.0f} MiB: {verdict} the {LIMIT_MIB} MiB limit")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=60)
    parser.add_argument("--waves", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.concurrency, arguments.waves))
