"""Benchmark: many concurrent LaunchNodeClaim calls for one claim (a retrying scheduler).

Starts the EC2 emulator (in this process) and `python -m actuator_svc` (a separate process) on
loopback, then sends N identical LaunchNodeClaim calls at once for one claim and prints when
the first and the last answered, how many distinct instances they named and how many
CreateFleet calls EC2 saw. Identical concurrent calls share one in-flight launch.

    uv run python -m bench.coalescing [--calls 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

import grpc
import structlog

from bench.ice_retry import NODE_CLASS
from bench.request_flood import TOKEN, start_actuator
from daiku.actuator.v1 import actuator_pb2 as pb
from daiku.actuator.v1 import actuator_pb2_grpc
from localcloud.ec2 import Ec2Emulator


async def main(calls: int) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    request = pb.LaunchNodeClaimRequest(
        nodeclaim_name="coalesce-1",
        nodepool_name="default",
        offerings=[pb.Offering(instance_type="m5.large", zone="us-east-1a", capacity_type="spot")],
        node_class=NODE_CLASS,
    )
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    async with Ec2Emulator(port=0, region="us-east-1", cluster_name="daiku") as emulator:
        process, address = start_actuator(emulator.endpoint_url)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                stub = actuator_pb2_grpc.ActuatorStub(channel)
                await stub.ListInstanceTypes(pb.ListInstanceTypesRequest(), metadata=metadata)
                started = time.monotonic()
                answered: list[float] = []

                async def one() -> str:
                    response = await stub.LaunchNodeClaim(request, metadata=metadata, timeout=300)
                    answered.append(time.monotonic() - started)
                    return response.instance_id

                instances = set(await asyncio.gather(*(one() for _ in range(calls))))
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"{calls} concurrent LaunchNodeClaim for one claim (emulator + actuator process)")
    print(f"first answer {min(answered):.2f} s, last answer {max(answered):.2f} s")
    print(
        f"distinct instances {len(instances)}, CreateFleet calls {len(emulator.create_fleet_calls)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    asyncio.run(main(parser.parse_args().calls))
