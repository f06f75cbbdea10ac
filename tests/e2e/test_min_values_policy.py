"""minValues under --min-values-policy BestEffort on the stack: a pod only one instance family
can hold, under a NodePool asking for two, runs on a claim opened with minValues relaxed to
one; the claim says so (annotation, requirement) and an Event names what was relaxed."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_svc.provisioning.nodeclaim_template import MIN_VALUES_RELAXED_ANNOTATION
from tests.e2e.conftest import Stack, pods_running
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

FAMILY = "karpenter.k8s.aws/instance-family"


async def test_best_effort_launches_with_min_values_relaxed_and_says_so(stack: Stack) -> None:
    await stack.apply_pool(
        requirements=[
            {"key": FAMILY, "operator": "In", "values": ["c6g", "m6g"], "minValues": 2},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ]
    )
    await stack.start_scheduler(min_values_policy="BestEffort")
    # 200Gi: only m6g has a type that holds it, so the pool's two families cannot be kept.
    (name,) = await stack.create_pods(1, cpu="2", memory="200Gi", prefix="analytics")

    async def running() -> bool:
        return any(map(pods_running([name]), await stack.objects("pods", "default")))

    async def relaxed_claim() -> dict[str, Any] | None:
        claims = await stack.objects("nodeclaims")
        return next(
            (
                c
                for c in claims
                if (c["metadata"].get("annotations") or {}).get(MIN_VALUES_RELAXED_ANNOTATION)
                == "true"
            ),
            None,
        )

    claim = await until(relaxed_claim)
    family = next(r for r in claim["spec"]["requirements"] if r["key"] == FAMILY)
    assert family["minValues"] == 1

    async def relaxed_events() -> list[dict[str, Any]] | None:
        found = [
            e
            for e in await stack.objects("events", "default")
            if e.get("reason") == "MinValuesRelaxed"
        ]
        # One on the claim and one on its NodePool, written one after the other.
        return found if len(found) >= 2 else None

    events = await until(relaxed_events)
    assert sorted(e["involvedObject"]["kind"] for e in events) == ["NodeClaim", "NodePool"]
    assert f"minValues for {FAMILY} relaxed from 2 to 1" in events[0]["message"]
    await until(running)
