"""Local EC2: moto's server plus the realism daiku depends on (see `Ec2Emulator`).

One port serves EC2 (query protocol), SQS and the Pricing API, as AWS SDK clients call them
with `endpoint_url=emulator.endpoint_url`. Added to moto:

- instant CreateFleet with capacity pools per (instance type, zone, capacity type): launches
  from the first pool with capacity in allocation-strategy order, reports the others in
  `Errors[]`; idempotent per ClientToken;
- DescribeSpotPriceHistory from `spot_prices.spot_price` and Pricing GetProducts from the
  shared on-demand price list;
- DescribeInstances with EC2's paging (MaxResults 5-1000, NextToken, every match without
  MaxResults), selected by moto and rendered by moto's serializer once per unchanged
  reservation (`describe_instances`), and moto's tag look-ups made O(1) (`moto_fast_paths`):
  listing 1,000 instances takes about 10 ms of server time instead of seconds;
- injected faults (e.g. RequestLimitExceeded as HTTP 503 in EC2's XML error shape);
- EventBridge-shaped spot interruption / rebalance / state-change events sent to SQS;
- seeding for the cluster: discovery-tagged subnets and security group, EKS AL2023 AMIs,
  the `<cluster>-interruption` queue.

In-process: ``with Ec2Emulator() as emulator:`` (or ``async with``, or start()/stop()).
Another process: ``python -m localcloud.ec2 --port N [--region R] [--cluster-name C]`` prints
``localcloud.ec2 ready endpoint_url=... interruption_queue_url=...`` and is driven over HTTP:

- ``GET  /_localcloud/health``
- ``POST /_localcloud/capacity`` ``{"instance_type", "zone", "capacity_type", "available",
  "error_code"?}``; ``GET`` lists unavailable pools; ``DELETE`` makes all available
- ``POST /_localcloud/faults`` ``{"action", "error_code", "count"?, "http_status"?,
  "message"?}``; ``GET`` lists pending faults; ``DELETE`` clears them
- ``POST /_localcloud/interrupt`` ``{"instance_id", "kind"?: "spot-interruption" |
  "rebalance-recommendation" | "state-change", "state"?, "queue_url"?, "terminate"?}``
  → ``{"message_id"}``
- ``POST /_localcloud/impair`` ``{"instance_id", "impaired"?: true}``: fail (or pass again) the
  instance's status checks (DescribeInstanceStatus `impaired`; localcloud's kubelet on it
  stops posting node status)
- ``GET /_localcloud/create-fleet-calls`` (``CreateFleetCall.to_json()`` each); ``DELETE``
  clears them
"""

# The names below are re-exported lazily: `daiku plan` and `daiku catalog` read the bundled
# catalog from `localcloud.ec2.instance_types` and must not import moto to do so.
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localcloud.ec2.admin import ADMIN_PREFIX
    from localcloud.ec2.app import CreateFleetCall
    from localcloud.ec2.capacity import PoolKey
    from localcloud.ec2.emulator import Ec2Emulator, eks_ami_name

_MODULE_OF: dict[str, str] = {
    "ADMIN_PREFIX": "admin",
    "CreateFleetCall": "app",
    "PoolKey": "capacity",
    "Ec2Emulator": "emulator",
    "eks_ami_name": "emulator",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["ADMIN_PREFIX", "CreateFleetCall", "Ec2Emulator", "PoolKey", "eks_ami_name"]
