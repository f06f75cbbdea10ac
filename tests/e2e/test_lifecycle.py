"""NodeClaim lifecycle end to end: steps whose writes are lost are done again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduler_svc.lifecycle.controller import LifecycleSettings
from tests.e2e.conftest import ON_DEMAND_SMALL, FrozenClock, Stack
from tests.polling import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def _sets_registered(body: Any) -> bool:
    """Whether a status write (a merge patch, or a JSON patch adding /status) sets
    Registered=True."""
    if isinstance(body, list):
        statuses = [op.get("value") or {} for op in body if op.get("path") == "/status"]
    else:
        statuses = [(body or {}).get("status") or {}]
    return any(
        c.get("type") == "Registered" and c.get("status") == "True"
        for status in statuses
        for c in status.get("conditions") or []
    )


async def test_a_registration_the_api_server_loses_is_done_again(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Registered write is answered as written but never stored (as when a stale
    writer undoes it before the watch sees it): the claim is not stranded — once
    `step_visible_within_seconds` has passed on the scheduler's clock it is registered again,
    becomes Initialized and its pod runs."""
    store = stack.store
    real_patch = store.patch
    lost: list[str] = []

    async def lose_first_registration(
        resource: Any, name: str, body: Any, *args: Any, **kwargs: Any
    ) -> Any:
        plural = getattr(resource, "plural", resource)
        status_write = plural == "nodeclaims" and kwargs.get("subresource") == "status"
        if status_write and not lost and _sets_registered(body):
            lost.append(name)
            with store.dry_run():  # validated and answered, not stored
                return await real_patch(resource, name, body, *args, **kwargs)
        return await real_patch(resource, name, body, *args, **kwargs)

    monkeypatch.setattr(store, "patch", lose_first_registration)
    clock = FrozenClock()
    await stack.apply_pool(requirements=ON_DEMAND_SMALL)
    scheduler = await stack.start_scheduler(
        lifecycle=LifecycleSettings(tick_seconds=0.2, step_visible_within_seconds=30.0),
        wall_clock=clock,
    )
    await stack.create_pods(1, cpu="500m", memory="512Mi")
    await until(lambda: bool(lost), timeout_seconds=30)
    claim_name = lost[0]

    async def claim_conditions() -> dict[str, str]:
        claim = await store.get("nodeclaims", claim_name)
        return {c["type"]: c["status"] for c in claim.get("status", {}).get("conditions", [])}

    # Before the grace runs out the scheduler trusts its own write: a pass redoes nothing.
    lifecycle = scheduler.service.lifecycle
    assert lifecycle is not None
    clock.set(clock.now + timedelta(seconds=29))
    await lifecycle.reconcile_all()
    await lifecycle.wait_idle()
    assert "Registered" not in await claim_conditions()
    clock.set(clock.now + timedelta(seconds=2))

    async def initialized() -> bool:
        conditions = await claim_conditions()
        return conditions.get("Registered") == "True" and conditions.get("Initialized") == "True"

    await until(initialized, timeout_seconds=30)

    async def pod_running() -> bool:
        listed = await stack.objects("pods", "default")
        return [p.get("status", {}).get("phase") for p in listed] == ["Running"]

    await until(pod_running, timeout_seconds=30)
    assert lost == [claim_name]
