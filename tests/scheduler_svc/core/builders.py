"""Small builders for solver tests: instance types, pods, pools in a line each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler_svc.core import (
    InstanceType,
    NodePool,
    Offering,
    Pod,
    Resources,
    SchedulingInput,
    SchedulingResult,
    solve,
)

GIB = 1024**3
MIB = 1024**2
ZONES = ("zone-a", "zone-b", "zone-c")


def instance_type(
    name: str,
    cpu: float,
    memory_gib: float,
    price: float,
    *,
    pods: int = 110,
    zones: Sequence[str] = ZONES,
    spot_price: float | None = None,
    labels: Mapping[str, str] | None = None,
    gpus: int = 0,
) -> InstanceType:
    """A type whose allocatable equals the given shape, offered on-demand (and spot) per zone."""
    extended = (("nvidia.com/gpu", gpus),) if gpus else ()
    resources = Resources(int(cpu * 1000), int(memory_gib * GIB), pods, 20 * GIB, extended)
    offerings = [Offering(z, "on-demand", price) for z in zones]
    if spot_price is not None:
        offerings += [Offering(z, "spot", spot_price) for z in zones]
    all_labels = {"kubernetes.io/arch": "amd64", **(labels or {})}
    return InstanceType(name, resources, resources, all_labels, tuple(offerings))


def priced_type(name: str, *offerings: tuple[str, str, float]) -> InstanceType:
    """A 4-cpu, 16 GiB type with the given (zone, capacity type, price) offerings."""
    shape = Resources(4000, 16 * GIB, 110, 20 * GIB)
    return InstanceType(
        name,
        shape,
        shape,
        {"kubernetes.io/arch": "amd64"},
        tuple(Offering(zone, capacity_type, price) for zone, capacity_type, price in offerings),
    )


def pod(name: str, cpu: float = 0.0, memory_gib: float = 0.0, **kwargs: object) -> Pod:
    """A pod with one container requesting ``cpu`` cores and ``memory_gib``."""
    request = Resources(cpu_millis=int(cpu * 1000), memory_bytes=int(memory_gib * GIB))
    return Pod(name, containers=(request,), **kwargs)  # type: ignore[arg-type]


def run(
    pods: Sequence[Pod],
    types: Sequence[InstanceType],
    pools: Sequence[NodePool] = (NodePool("default"),),
    **kwargs: object,
) -> SchedulingResult:
    """Solve and check the result accounts for every pod exactly once."""
    result = solve(
        SchedulingInput(tuple(pods), tuple(pools), tuple(types), **kwargs)  # type: ignore[arg-type]
    )
    seen = [p for c in result.new_claims for p in c.pods]
    seen += [p for e in result.existing_placements for p in e.pods]
    seen += [u.pod for u in result.unschedulable]
    assert sorted(seen) == sorted(p.key for p in pods)
    return result


def claim_of(result: SchedulingResult, pod_key: str) -> int:
    """Index of the new claim holding ``pod_key``."""
    for index, claim in enumerate(result.new_claims):
        if pod_key in claim.pods:
            return index
    raise AssertionError(f"{pod_key} is in no new claim")


def zone_of(result: SchedulingResult, pod_key: str) -> str:
    """The zone the chosen offering of ``pod_key``'s claim launches into."""
    return result.new_claims[claim_of(result, pod_key)].offerings[0].zone
