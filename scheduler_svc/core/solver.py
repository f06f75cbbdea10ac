"""The provisioning solver: pending pods -> placements on existing capacity and new NodeClaims.

How it works (and why it is fast):
* Pods with identical scheduling constraints and requests form one equivalence class; the solver
  places ``m`` copies of a class at once, so its work grows with classes x nodes touched, not
  with pods.
* Bins are filled one at a time (again for spread classes while that places pods): existing
  nodes and in-flight NodeClaims first, then new NodeClaims from NodePools by weight (higher
  first). A new NodeClaim is anchored on the first class still waiting and targets the
  instance type with the lowest price per unit of the remaining demand (FACTS §5's "cheapest
  that holds it", generalised); it takes a proportional slice of every compatible class first
  (so cpu-heavy and memory-heavy pods share nodes), then fills what is left largest-first. Its
  final instance type is the cheapest that holds what it got; every other compatible offering
  follows, cheapest first, as the actuator's fallbacks.
  When the anchoring class spreads across zones (or capacity types), one claim per domain is
  opened and the claims are filled together, round-robin, so the skew lets each take its share.
* Instance types are bitsets (``CatalogIndex``); topology counts are kept per group and domain
  and updated as pods are placed, never recounted.
* Preferences (preferred pod and node affinity, ScheduleAnyway spreads, NodePools'
  PreferNoSchedule taints) start as requirements and are relaxed one at a time, in Karpenter's
  order, for the pods that could not be placed (``SolverSetup._softs``).
Every pod left over gets the reason that ruled it out, per NodePool.

The steps live by concept in a chain of classes over one state, each building on the one
before: ``solver_state`` (classes, bins, pools, groups), ``solver_setup`` (building them),
``instance_fit`` (which types hold a class), ``topology`` (domains, spread, pod
(anti-)affinity), ``pricing`` (limits, target type, offerings), ``packing`` (filling bins,
opening claims), ``repacking`` (the integer program's cheaper packing of claims whose pods only
need room, ``integer_packing``); this module relaxes preferences, runs the rounds and writes the
result.
"""

from __future__ import annotations

from scheduler_svc.core.catalog_index import CatalogCache, iter_bits
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import (
    ExistingPlacement,
    NodeClaimPlan,
    RelaxedMinValues,
    RelaxedPod,
    SchedulingInput,
    SchedulingResult,
    UnschedulablePod,
)
from scheduler_svc.core.solver_state import Bin, PodClass, format_amount, format_limit
from scheduler_svc.core.zone_ids import with_zone_ids_as_zones
from scheduler_svc.core.zone_repacking import ZoneRepacking


class _Solver(ZoneRepacking):
    """One solve: rounds of filling and provisioning, relaxing preferences in between."""

    # -- relaxing and reasons --------------------------------------------------------------------

    def _relax(self, cls: PodClass) -> PodClass | None:
        if not cls.softs:
            return None
        dropped = cls.softs[0]
        relaxed = PodClass(len(self.classes) + len(self._extra), cls.pods[cls.next :], cls.request)
        relaxed.softs = cls.softs[1:]
        relaxed.reasons = dict(cls.reasons)
        relaxed.relaxed = [*cls.relaxed, dropped.describe()]
        self._compile(relaxed)
        self._match_groups(relaxed)
        cls.next = len(cls.pods)
        cls.remaining = 0
        relaxed.family = -1 - relaxed.id
        self._extra.append(relaxed)
        return relaxed

    def _reason(self, cls: PodClass) -> str:
        if not cls.reasons:
            return "no NodePool can launch a node for it"
        taints = [r.removeprefix("taint:") for r in cls.reasons.values() if r.startswith("taint:")]
        if len(taints) == len(cls.reasons):
            return f"tolerates no NodePool's taint {', '.join(sorted(set(taints)))}"
        parts = []
        for name in (p.nodepool.name for p in self.pools):
            reason = cls.reasons.get(name)
            if reason is None:
                continue
            if reason.startswith("taint:"):
                reason = (
                    f"does not tolerate NodePool {name}'s taint {reason.removeprefix('taint:')}"
                )
            parts.append(reason)
        return "; ".join(parts)

    # -- the whole solve -------------------------------------------------------------------------

    def solve(self) -> SchedulingResult:
        self._extra = []
        self._demand = [0] * len(self.dimensions)
        self._epoch = 0
        pending = list(self.classes)
        while pending:
            waiting_before = sum(c.remaining for c in pending)
            self._fill_bins(pending)
            self._provision(pending)
            waiting = [c for c in pending if c.remaining]
            if waiting and sum(c.remaining for c in waiting) < waiting_before:
                # Pods were placed this round: those left may need them (a required pod
                # affinity to a pod of a later class). Karpenter's queue retries a pod that
                # failed once others were placed, before relaxing it; so do we.
                pending = waiting
                continue
            relaxed = []
            for cls in waiting:
                next_class = self._relax(cls)
                if next_class is not None:
                    relaxed.append(next_class)
            pending = relaxed
        for cls in (*self.classes, *self._extra):
            if cls.remaining:
                reason = self._reason(cls)
                self.unschedulable.extend(
                    UnschedulablePod(p.key, reason) for p in cls.pods[cls.next :]
                )
        self._improve_claims()
        return self._result()

    def _fill_bins(self, pending: list[PodClass]) -> None:
        """Fill the bins there are (existing nodes, in-flight and earlier rounds' claims) one at
        a time. A spread class gets on each bin only what its skew allows at that moment, so a
        domain's first bins take fewer than fit: pass over the bins again for such classes while
        a pass places any. kube-scheduler, binding pod by pod, fills them (zone a, b, a, b), and
        a claim launched for those pods would stay empty."""
        # No class asks for less than this in any resource: bins with less room in one of
        # them are skipped without looking at a class (large clusters are mostly full).
        self._smallest = [min(c.request[d] for c in pending) for d in range(len(self.dimensions))]
        classes = list(pending)
        while classes and self._fill_bins_once(classes):
            classes = [c for c in classes if c.remaining and c.spreads]

    def _fill_bins_once(self, classes: list[PodClass]) -> int:
        """One pass of ``_fill_bins``; returns the pods placed."""
        smallest = self._smallest
        active = list(classes)
        placed = 0
        for index, b in enumerate(self.bins):
            free, used = b.allocatable, b.used
            if any(f - u < m for f, u, m in zip(free, used, smallest, strict=True)):
                continue
            if index % 64 == 0:
                active = [c for c in active if c.remaining]  # drop exhausted classes
            placed += self._fill(b, active)
        return placed

    def _result(self) -> SchedulingResult:
        claims = []
        for b in self.claims:
            if not b.pods:
                continue
            offerings = self._offerings(b)
            if b.limit_capacity is not None:
                capacity = {
                    self.catalog.names[p]: self.catalog.capacity[p] for p in iter_bits(b.bits)
                }
                offerings = tuple(
                    o
                    for o in offerings
                    if all(
                        capacity[o.instance_type][d] <= b.limit_capacity[d]
                        for d in range(len(self.dimensions))
                        if b.limit_capacity[d]
                    )
                )
            claims.append(
                NodeClaimPlan(
                    nodepool=b.pool.nodepool.name if b.pool else "",
                    requirements=self._claim_requirements(b, offerings),
                    pods=tuple(b.pods),
                    requests=self._resources(b.used),
                    offerings=offerings,
                    min_values_relaxed=self._relaxed_min_values(b),
                )
            )
        placements = tuple(
            ExistingPlacement(b.name, tuple(b.pods))
            for b in self.bins
            if b.node is not None and b.pods
        )
        unschedulable = tuple(sorted(self.unschedulable, key=lambda u: u.pod))
        return SchedulingResult(tuple(claims), placements, unschedulable, self._relaxed_pods())

    @staticmethod
    def _relaxed_min_values(b: Bin) -> tuple[RelaxedMinValues, ...]:
        if b.pool is None or b.min_values == b.pool.min_values:
            return ()
        return tuple(
            RelaxedMinValues(key, written, relaxed)
            for (key, written), (_, relaxed) in zip(b.pool.min_values, b.min_values, strict=True)
            if relaxed < written
        )

    def _relaxed_pods(self) -> tuple[RelaxedPod, ...]:
        """Placed pods of relaxed classes. A pod's last class is the one it was placed from
        (a relaxed class takes only the pods its parent left), so later classes win."""
        dropped: dict[str, tuple[str, ...]] = {}
        for cls in self._extra:
            for pod in cls.pods[: cls.next]:
                dropped[pod.key] = tuple(cls.relaxed)
        for refused in self.unschedulable:
            dropped.pop(refused.pod, None)
        return tuple(RelaxedPod(k, v) for k, v in sorted(dropped.items()))


def solve(
    problem: SchedulingInput,
    *,
    catalogs: CatalogCache | None = None,
    packing: PackingSettings | None = None,
) -> SchedulingResult:
    """Place every pending pod of ``problem``: on existing nodes and in-flight claims first, then
    on new NodeClaims (NodePools by weight). Pure and deterministic: the integer programs
    stop on a counted work budget, not a clock (``PackingSettings``). See the module docstring.

    ``catalogs`` reuses the catalog index across solves (built once per distinct catalog instead
    of on every call; the plan is the same either way). ``packing`` says which batches the
    integer program improves, with what budget (``PackingSettings``; default: batches up to
    1,000 pods, 200 branch-and-bound nodes, 500 whole-node columns)."""
    return _Solver(with_zone_ids_as_zones(problem), catalogs, packing).solve()


__all__ = ["format_amount", "format_limit", "solve"]
