"""Multi-node consolidation: which N candidates to merge into fewer, cheaper nodes.

Karpenter sorts the candidates by disruption cost and binary-searches the largest prefix
(at most 100 nodes) that consolidates: a delete (every pod fits on the nodes that stay) or a
replacement by ONE node cheaper than the N. daiku does the same first, then — where the search
found nothing — tries the prefix sizes it skipped, largest first, within a small budget of
simulations (``ConsolidationOptions.max_multi_node_scan``). The saving is not monotonic in the
prefix length, because replacements come in discrete sizes: three 1-CPU pods on 3 x c4.large
($0.30/h) fit one c4.xlarge ($0.199/h), while the first two alone ($0.20/h) would need the same
c4.xlarge and save nothing — the binary search tries two, fails and never looks at three.

Karpenter replaces N nodes by at most ONE. daiku also accepts M nodes, 1 < M < N, when they
save the threshold (decision 0019's addendum): rounds of provisioning each pack their own batch
well, and their sum (say 2 x c6g.2xlarge, 4 x c6gd.medium, 2 x m6g.large for 40 pods) can cost
10 % more than packing all the pods at once, where no single node holds the pods that would
move. The solver minimises the cost of the claims it opens (with the integer program's second
opinion), so its answer for the moving pods is the M to compare. When it opens several claims,
the simulation is repeated with only the instance types that could hold every moving pod at
once (``types_holding``), the one-node question Karpenter asks; the cheaper answer wins, one
node on a tie.

Pure: the caller passes the simulation (``attempt``) in; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler_svc.core.disruption.model import Candidate, DisruptionDecision
from scheduler_svc.core.model import (
    InstanceType,
    Node,
    NodeClaimPlan,
    NodePool,
    Offering,
    OfferingOption,
    Pod,
    Resources,
)
from scheduler_svc.core.requirements import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE


@dataclass(frozen=True)
class Outcome:
    """One consolidation simulation: the decision, or why there is none."""

    decision: DisruptionDecision | None
    why_not: str = ""


@dataclass(frozen=True)
class MultiNodeSearch:
    """What the search found (``decision``), and every prefix it simulated: (length, why not)
    for those that did not consolidate, so explain text can say what was compared."""

    decision: DisruptionDecision | None
    refused: tuple[tuple[int, str], ...] = field(default_factory=tuple)

    def summary(self) -> str:
        """One line on the prefixes tried, for a node's Unconsolidatable message ("" when
        nothing was tried)."""
        if not self.refused:
            return ""
        sizes = ", ".join(str(k) for k, _ in sorted(self.refused, reverse=True))
        largest, why = max(self.refused)
        return f"multi-node: merging the first {sizes} candidates does not pay ({largest}: {why})"


def search(
    candidates: Sequence[Candidate],
    attempt: Callable[[Sequence[Candidate]], Outcome],
    *,
    max_candidates: int,
    max_scan: int,
) -> MultiNodeSearch:
    """The largest prefix of ``candidates`` (ordered best first) that consolidates.

    Binary search over prefix lengths 2..min(len, ``max_candidates``) as Karpenter does, then,
    if that found nothing, the lengths it skipped, largest first, at most ``max_scan`` more
    simulations."""
    high = min(len(candidates), max_candidates)
    refused: dict[int, str] = {}
    best: DisruptionDecision | None = None
    low, top = 2, high
    while low <= top:
        middle = (low + top) // 2
        outcome = attempt(candidates[:middle])
        if outcome.decision is not None:
            best, low = outcome.decision, middle + 1
        else:
            refused[middle] = outcome.why_not
            top = middle - 1
    if best is not None:
        return MultiNodeSearch(best, tuple(sorted(refused.items())))
    skipped = [k for k in range(high, 1, -1) if k not in refused][:max_scan]
    for length in skipped:
        outcome = attempt(candidates[:length])
        if outcome.decision is not None:
            return MultiNodeSearch(outcome.decision, tuple(sorted(refused.items())))
        refused[length] = outcome.why_not
    return MultiNodeSearch(None, tuple(sorted(refused.items())))


def total_requests(pods: Sequence[Pod]) -> Resources:
    """What ``pods`` request together (each pod's effective requests, one pod slot each)."""
    total: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod.requests().as_mapping().items():
            total[name] = total.get(name, 0) + amount
    return Resources.from_mapping(total)


def free_room(node: Node) -> dict[str, int]:
    """What ``node``'s allocatable leaves beside its bound pods, per resource (never < 0)."""
    used = total_requests(node.pods).as_mapping()
    return {k: max(0, v - used.get(k, 0)) for k, v in node.allocatable.as_mapping().items()}


def could_fit(pods: Sequence[Pod], rooms: Iterable[Mapping[str, int]]) -> bool:
    """Whether the summed free room could take ``pods`` (necessary only: it ignores how the
    room is split between nodes, and every scheduling constraint)."""
    wanted = total_requests(pods).as_mapping()
    free: dict[str, int] = {}
    for room in rooms:
        for name, amount in room.items():
            free[name] = free.get(name, 0) + amount
    return all(amount <= free.get(name, 0) for name, amount in wanted.items())


def types_holding(pods: Sequence[Pod], types: Sequence[InstanceType]) -> tuple[InstanceType, ...]:
    """The instance types whose allocatable could hold every one of ``pods`` at once (a
    necessary condition only: the solver still checks DaemonSets, requirements and offerings)."""
    wanted = total_requests(pods).as_mapping()
    out = []
    for instance_type in types:
        room = instance_type.allocatable.as_mapping()
        if all(amount <= room.get(name, 0) for name, amount in wanted.items()):
            out.append(instance_type)
    return tuple(out)


def capacity_price_floor(
    pods: Sequence[Pod],
    types: Sequence[InstanceType],
    rooms: Iterable[Mapping[str, int]],
    most_nodes: int,
) -> float:
    """A lower bound on what at most ``most_nodes`` new nodes of ``types`` cost (USD/h) to hold
    what of ``pods`` the summed free ``rooms`` cannot: per resource (cpu, memory), the
    shortfall at the lowest price per unit of allocatable any type offers; infinite when
    ``most_nodes`` of the largest type lack the room. Pods all of one shape (a Deployment's)
    are counted in whole pods per node too (``_whole_pods_floor``). No such set of nodes costs
    less, so a merge whose floor saves too little needs no simulation."""
    rooms = list(rooms)
    wanted = total_requests(pods).as_mapping()
    free: dict[str, int] = {}
    for room in rooms:
        for name, amount in room.items():
            free[name] = free.get(name, 0) + amount
    floor = _whole_pods_floor(pods, types, rooms, most_nodes)
    for name in ("cpu", "memory"):
        short = wanted.get(name, 0) - free.get(name, 0)
        if short <= 0:
            continue
        sizes = [
            (t.allocatable.as_mapping()[name], min(o.price_per_hour for o in t.offerings))
            for t in types
            if t.offerings and t.allocatable.as_mapping().get(name, 0) > 0
        ]
        if not sizes or short > most_nodes * max(size for size, _ in sizes):
            return float("inf")
        floor = max(floor, short * min(price / size for size, price in sizes))
    return floor


def _whole_pods_floor(
    pods: Sequence[Pod],
    types: Sequence[InstanceType],
    rooms: Sequence[Mapping[str, int]],
    most_nodes: int,
) -> float:
    """For pods of one shape: those the staying rooms cannot take, each at the lowest price per
    pod any type offers (its price over how many whole pods its allocatable holds), infinite
    when ``most_nodes`` of the type holding the most cannot take them; 0 for mixed shapes
    (pods of different shapes share nodes in ways a per-pod price does not bound). On full
    nodes this is the floor that counts: their free room is less than one pod, which a
    per-resource floor prices as if another pod's fraction could use it."""
    requests = {tuple(sorted(p.requests().as_mapping().items())) for p in pods}
    if len(requests) != 1:
        return 0.0
    request = dict(next(iter(requests)))
    left = len(pods) - sum(_whole_fits(request, room) for room in rooms)
    if left <= 0:
        return 0.0
    per_node = [
        (
            _whole_fits(request, t.allocatable.as_mapping()),
            min(o.price_per_hour for o in t.offerings),
        )
        for t in types
        if t.offerings
    ]
    usable = [(count, price) for count, price in per_node if count > 0]
    if not usable or left > most_nodes * max(count for count, _ in usable):
        return float("inf")
    return left * min(price / count for count, price in usable)


def _whole_fits(request: Mapping[str, int], room: Mapping[str, int]) -> int:
    """How many pods asking ``request`` fit in ``room``."""
    return min(
        (room.get(name, 0) // amount for name, amount in request.items() if amount > 0), default=0
    )


def admitted_types(
    types: Sequence[InstanceType], pools: Sequence[NodePool]
) -> tuple[InstanceType, ...]:
    """``types`` with only the offerings some of ``pools`` may launch (types with none left
    out), judged on the requirement keys a type's labels or an offering's zone and capacity
    type define (the others are left to the solver: the floor only needs a superset)."""
    out = []
    for instance_type in types:
        offerings = tuple(
            o
            for o in instance_type.offerings
            if any(_admits(pool, instance_type, o) for pool in pools)
        )
        if len(offerings) == len(instance_type.offerings):
            out.append(instance_type)
        elif offerings:
            out.append(dataclasses.replace(instance_type, offerings=offerings))
    return tuple(out)


def _admits(pool: NodePool, instance_type: InstanceType, offering: Offering) -> bool:
    for requirement in pool.requirements:
        if requirement.key == LABEL_ZONE:
            value: str | None = offering.zone
        elif requirement.key == LABEL_CAPACITY_TYPE:
            value = offering.capacity_type
        elif requirement.key == LABEL_INSTANCE_TYPE:
            value = instance_type.name
        elif requirement.key in instance_type.labels:
            value = instance_type.labels[requirement.key]
        else:
            continue
        if not requirement.value_set().allows(value):
            return False
    return True


def shared_offerings(
    claims: Sequence[NodeClaimPlan], most_per_hour: float
) -> list[tuple[OfferingOption, ...]]:
    """Per claim, the offerings it may launch so that the claims together never cost more than
    ``most_per_hour``: each claim gets the same share of the slack, in proportion to its
    cheapest offering (so any fallback the actuator takes keeps the merge's saving)."""
    cheapest = sum(c.price_per_hour for c in claims)
    scale = most_per_hour / cheapest if cheapest > 0 else 1.0
    return [
        tuple(o for o in c.offerings if o.price_per_hour <= c.price_per_hour * scale + 1e-12)
        for c in claims
    ]


def several_message(
    names: Sequence[str], old_price: float, claims: Sequence[NodeClaimPlan], one_node: str
) -> str:
    """The Event text of an N -> M replacement: what goes, what comes, what one node would be
    (``one_node``: the one-node answer, "" when there is none)."""
    new_price = sum(c.price_per_hour for c in claims)
    each = ", ".join(
        f"{c.instance_type} ({c.offerings[0].capacity_type}, ${c.price_per_hour:.4f}/h)"
        for c in claims
    )
    message = (
        f"Underutilized: replace {', '.join(names)} (${old_price:.4f}/h) by {len(claims)} nodes "
        f"(${new_price:.4f}/h): {each}; saves ${old_price - new_price:.4f}/h"
    )
    return f"{message}; {one_node}" if one_node else message


__all__ = [
    "MultiNodeSearch",
    "Outcome",
    "admitted_types",
    "capacity_price_floor",
    "could_fit",
    "free_room",
    "search",
    "several_message",
    "shared_offerings",
    "total_requests",
    "types_holding",
]
