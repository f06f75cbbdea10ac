"""A controller crash in a real scheduler process (not a driven `_campaign`): the process exits 1
after releasing its Lease, and a standby replica takes over and provisions (decision 0008:
exit, and let Kubernetes restart it, instead of restarting the controller in process)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from tests.e2e.conftest import ON_DEMAND_SMALL, ROOT, Stack, free_port
from tests.e2e.faulty_scheduler import INJECTED
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

LEASE: dict[str, Any] = {
    "leader_election_namespace": "default",
    "lease_duration_seconds": 3.0,
    "lease_renew_deadline_seconds": 2.0,
    "lease_retry_period_seconds": 0.2,
}


def flags(stack: Stack, identity: str) -> list[str]:
    return [
        "--kubeconfig", str(stack.cloud.kubeconfig_path),
        "--actuator-address", stack.actuator.address,
        "--cluster-name", stack.cloud.cluster_name,
        "--health-port", str(free_port()),
        "--metrics-port", "0",
        "--leader-election-identity", identity,
        "--leader-election-namespace", "default",
        "--lease-duration-seconds", "3",
        "--lease-renew-deadline-seconds", "2",
        "--lease-retry-period-seconds", "0.2",
        "--batch-idle-seconds", "0.1",
        "--log-format", "json",
    ]  # fmt: skip


def log_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def test_a_crashed_controller_exits_the_process_1_and_a_standby_takes_over(
    stack: Stack,
) -> None:
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.e2e.faulty_scheduler", *flags(stack, "faulty"),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:

        async def leads() -> bool:
            leases = await stack.objects("leases", "default")
            return bool(leases) and leases[0]["spec"].get("holderIdentity") == "faulty"

        await until(leads, timeout_seconds=60)
        standby = await stack.start_scheduler(
            leader_elect=True, leader_election_identity="standby", **LEASE
        )
        assert "role=standby" in standby.ready_lines[0]

        # A pending pod opens a batch; the faulty leader's provisioner crashes on it.
        await stack.create_pods(1, cpu="500m", memory="512Mi")
        code = await asyncio.wait_for(process.wait(), timeout=60)
        _, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    events = log_events(stderr.decode())
    assert code == 1, stderr.decode()[-2000:]
    crashed = [e for e in events if e["event"] == "controller_crashed"]
    assert [e["controller"] for e in crashed] == ["provisioner"]
    assert INJECTED in crashed[0]["exception"]
    # It gave the Lease up on the way out, so the standby leads at once (not after 3 s of
    # lease expiry) and provisions the pod the crashed leader left pending.
    assert "leader_released" in [e["event"] for e in events]
    await until(lambda: standby.service.is_leading, timeout_seconds=10)

    async def running() -> bool:
        pods = await stack.objects("pods", "default")
        return any(p.get("status", {}).get("phase") == "Running" for p in pods)

    await until(running, timeout_seconds=30)
