"""EC2 emulator latency at cluster scale: does it stay fast with 1,000-1,500 instances?

    uv run python -m bench.ec2_emulator [--sizes 100 500 1000 1500] [--repeat 3]
    uv run python -m bench.ec2_emulator --moto-describe-instances   # moto answers DescribeInstances

Starts `python -m localcloud.ec2` in its own process (as `daiku up` runs it, so this
script's CPU is not the emulator's), launches instances with instant CreateFleet through boto3,
tagged as the actuator tags them, and at each size prints the median latency (ms) of:

- CreateFleet (one instance);
- DescribeInstances: everything (paginated, MaxResults 1000; and one such page over plain HTTP
  without boto3's XML parsing, i.e. the emulator's own time), the cluster's live instances by
  tag (the actuator's ListNodeClaims), one claim by its tag (LaunchNodeClaim's existence check,
  GetNodeClaim), by instance ids (1 and 200 ids);
- DescribeInstanceStatus (all, paginated), CreateTags on one instance, TerminateInstances of one
  instance.

The read timeout callers use is 30 s (actuator) and 10 s (the scheduler's GetNodeClaim deadline):
every figure here should stay far below those.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

CLUSTER = "daiku"
INSTANCE_TYPE = "m5.xlarge"
CONFIG = Config(retries={"total_max_attempts": 1}, read_timeout=120, max_pool_connections=4)


def start_emulator(log_path: Path, *, moto_describe: bool) -> tuple[subprocess.Popen[bytes], str]:
    """The emulator in its own process; its logs (a line per CreateFleet) go to `log_path`."""
    log_file = log_path.open("wb")
    command = [sys.executable, "-m", "localcloud.ec2", "--port", "0", "--cluster-name", CLUSTER]
    if moto_describe:
        command.append("--moto-describe-instances")
    process = subprocess.Popen(
        command,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        for line in log_path.read_text().splitlines():
            if line.startswith("localcloud.ec2 ready"):
                return process, line.split("endpoint_url=", 1)[1].split()[0]
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the emulator did not start; its output is in {log_path}")


def claim_tags(index: int) -> list[dict[str, str]]:
    tags = {
        "daiku.dev/cluster": CLUSTER,
        "daiku.dev/nodepool": "default",
        "daiku.dev/nodeclaim": f"default-{index:05d}",
        "daiku.dev/nodeclass": "default",
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "Name": f"default-{index:05d}",
    }
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class Bench:
    def __init__(self, ec2: Any, endpoint: str) -> None:
        self.ec2 = ec2
        self.endpoint = endpoint
        self.instance_ids: list[str] = []
        subnets = ec2.describe_subnets(
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [CLUSTER]}]
        )["Subnets"]
        offered = {
            o["Location"]
            for o in ec2.describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [INSTANCE_TYPE]}],
            )["InstanceTypeOfferings"]
        }
        self.subnets = [
            (s["SubnetId"], s["AvailabilityZone"])
            for s in subnets
            if s["AvailabilityZone"] in offered
        ]
        image = ec2.describe_images(
            Owners=["602401143452"],
            Filters=[{"Name": "name", "Values": ["amazon-eks-node-al2023-x86_64-*"]}],
        )["Images"][0]["ImageId"]
        group = ec2.describe_security_groups(
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [CLUSTER]}]
        )["SecurityGroups"][0]["GroupId"]
        ec2.create_launch_template(
            LaunchTemplateName="bench",
            LaunchTemplateData={
                "ImageId": image,
                "SecurityGroupIds": [group],
                "UserData": "IyEvYmluL2Jhc2gKZWNobyBub2Rl",
            },
        )

    def create_fleet(self) -> None:
        index = len(self.instance_ids)
        subnet, zone = self.subnets[index % len(self.subnets)]
        answer = self.ec2.create_fleet(
            Type="instant",
            ClientToken=f"bench-{index}",
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "on-demand",
            },
            OnDemandOptions={"AllocationStrategy": "lowest-price"},
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": "bench",
                        "Version": "$Latest",
                    },
                    "Overrides": [
                        {
                            "InstanceType": INSTANCE_TYPE,
                            "SubnetId": subnet,
                            "AvailabilityZone": zone,
                        }
                    ],
                }
            ],
            TagSpecifications=[
                {"ResourceType": kind, "Tags": claim_tags(index)} for kind in ("instance", "volume")
            ],
        )
        self.instance_ids.append(answer["Instances"][0]["InstanceIds"][0])

    def describe_all(self) -> int:
        return self._count(self.ec2.get_paginator("describe_instances").paginate(MaxResults=1000))

    def describe_all_raw(self) -> int:
        """The emulator's own time: one MaxResults=1000 page over HTTP, no client parsing."""
        query = {"Action": "DescribeInstances", "Version": "2016-11-15", "MaxResults": "1000"}
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode(query).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                # moto routes by the credential scope (service, region); no signature is checked
                "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/ec2/"
                "aws4_request, SignedHeaders=host, Signature=0",
            },
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.read().count(b"<instanceId>"))

    def describe_cluster(self) -> int:
        filters = [
            {"Name": "tag:daiku.dev/cluster", "Values": [CLUSTER]},
            {
                "Name": "instance-state-name",
                "Values": ["pending", "running", "stopping", "stopped", "shutting-down"],
            },
        ]
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=filters, MaxResults=1000
        )
        return self._count(pages)

    def describe_claim(self) -> int:
        claim = f"default-{len(self.instance_ids) // 2:05d}"
        filters = [
            {"Name": "tag:daiku.dev/cluster", "Values": [CLUSTER]},
            {"Name": "tag:daiku.dev/nodeclaim", "Values": [claim]},
        ]
        return self._count([self.ec2.describe_instances(Filters=filters)])

    def describe_ids(self, count: int) -> int:
        ids = self.instance_ids[-count:]
        pages = self.ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
        return self._count(pages)

    def describe_status(self) -> int:
        pages = self.ec2.get_paginator("describe_instance_status").paginate(
            IncludeAllInstances=True, MaxResults=1000
        )
        return sum(len(page["InstanceStatuses"]) for page in pages)

    def create_tags(self) -> int:
        instance_id = self.instance_ids[len(self.instance_ids) // 3]
        self.ec2.create_tags(Resources=[instance_id], Tags=[{"Key": "bench", "Value": "yes"}])
        return 1

    def terminate_one(self) -> int:
        self.create_fleet()
        instance_id = self.instance_ids.pop()
        answer = self.ec2.terminate_instances(InstanceIds=[instance_id])
        return len(answer["TerminatingInstances"])

    @staticmethod
    def _count(pages: Any) -> int:
        return sum(len(r["Instances"]) for page in pages for r in page["Reservations"])


def median_ms(action: Callable[[], int], repeat: int) -> tuple[float, int]:
    times: list[float] = []
    seen = 0
    for _ in range(repeat):
        started = time.perf_counter()
        seen = action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000, 1500])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--moto-describe-instances",
        action="store_true",
        help="let moto answer DescribeInstances (the emulator's behaviour before its fast path)",
    )
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="bench-ec2-"))
    process, endpoint = start_emulator(
        work_dir / "emulator.log", moto_describe=args.moto_describe_instances
    )
    try:
        ec2 = boto3.client(
            "ec2",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            config=CONFIG,
        )
        bench = Bench(ec2, endpoint)
        columns = {
            "DescribeInstances all": bench.describe_all,
            "DescribeInstances all, server only": bench.describe_all_raw,
            "DescribeInstances cluster tag": bench.describe_cluster,
            "DescribeInstances one claim tag": bench.describe_claim,
            "DescribeInstances 1 id": lambda: bench.describe_ids(1),
            "DescribeInstances 200 ids": lambda: bench.describe_ids(200),
            "DescribeInstanceStatus all": bench.describe_status,
            "CreateTags one": bench.create_tags,
            "TerminateInstances one": bench.terminate_one,
        }
        print(f"emulator {endpoint}; median of {args.repeat} calls, milliseconds")
        for size in sorted(args.sizes):
            fleet_times: list[float] = []
            while len(bench.instance_ids) < size:
                started = time.perf_counter()
                bench.create_fleet()
                fleet_times.append((time.perf_counter() - started) * 1000)
            print(
                f"\n{size} instances (CreateFleet median {statistics.median(fleet_times):.1f} ms)"
            )
            for name, action in columns.items():
                ms, seen = median_ms(action, args.repeat)
                print(f"  {name:<34} {ms:9.1f} ms  ({seen} instances)")
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
