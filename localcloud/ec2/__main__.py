"""`python -m localcloud.ec2 --port N`: run the EC2 emulator until interrupted.

Prints one line `localcloud.ec2 ready endpoint_url=... interruption_queue_url=...` once it
serves, so a parent process can wait for it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from localcloud.ec2.emulator import Ec2Emulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud.ec2", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: a free port)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--cluster-name", default="daiku")
    parser.add_argument(
        "--emit-state-changes",
        action="store_true",
        help="send instance state-change notifications to the interruption queue on termination",
    )
    parser.add_argument(
        "--moto-describe-instances",
        action="store_true",
        help="let moto answer DescribeInstances itself (slow with many instances; to compare)",
    )
    args = parser.parse_args(argv)

    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    emulator = Ec2Emulator(
        host=args.host,
        port=args.port,
        region=args.region,
        cluster_name=args.cluster_name,
        emit_state_changes=args.emit_state_changes,
        fast_describe_instances=not args.moto_describe_instances,
    )
    emulator.start()
    sys.stdout.write(
        f"localcloud.ec2 ready endpoint_url={emulator.endpoint_url} "
        f"interruption_queue_url={emulator.interruption_queue_url}\n"
    )
    sys.stdout.flush()
    try:
        stopping.wait()
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
