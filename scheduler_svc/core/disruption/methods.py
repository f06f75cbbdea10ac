"""One disruption pass over a snapshot: which nodes go, why, and what replaces them.

Order within a pass (at most one decision that moves pods, so simulations never build on
each other; empty nodes move nothing and may all go at once, within budgets):
1. **Empty** — no reschedulable pods for ``consolidateAfter`` → delete (no validation wait:
   the node has already been quiet for ``consolidateAfter``).
2. **Expired** — older than ``expireAfter`` → delete, with replacements for the pods that do
   not fit elsewhere (``solve`` picks the cheapest fitting claims: right-sized).
3. **Drifted** — see ``drift`` → the same as expired.
4. **Underutilized** (``WhenEmptyOrUnderutilized``; ``Balanced`` only for moves whose score
   passes, see ``balanced``) — merge the k most promising nodes into fewer cheaper nodes
   (``multi_node``: binary search on k as Karpenter, then the sizes it skipped), else delete or
   replace one node; when none of these pays, a merge larger than the budgets in waves
   (decision 0021: all replacements now, as many nodes as the budgets allow, the rest
   deferred to later passes as single-node deletes); only for a saving above the threshold;
   the controller validates after a wait.

Every method is blocked by a do-not-disrupt pod, a PDB allowing no disruption and the
budgets (expiry obeys the budgets that name no reason, since ``Expired`` cannot be named).
Bare pods (no controller) block consolidation, not expiry or drift. Underutilization is
suspended while pods are pending or claims are in flight (never fight a fresh scale-up).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption.balanced import balanced_score
from scheduler_svc.core.disruption.drift import drift_reason
from scheduler_svc.core.disruption.grace import grace_has_ended, grace_note
from scheduler_svc.core.disruption.model import (
    BlockedNode,
    Candidate,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSnapshot,
)
from scheduler_svc.core.disruption.multi_node import Outcome as _Outcome
from scheduler_svc.core.disruption.multi_node import (
    admitted_types,
    capacity_price_floor,
    could_fit,
    free_room,
    several_message,
    shared_offerings,
    types_holding,
)
from scheduler_svc.core.disruption.multi_node import search as multi_node_search
from scheduler_svc.core.disruption.replacement import where_pods_go
from scheduler_svc.core.disruption.settings import (
    DisruptionReason,
    format_seconds,
)
from scheduler_svc.core.model import (
    InstanceType,
    NodeClaimPlan,
    OfferingOption,
    SchedulingInput,
    SchedulingResult,
)
from scheduler_svc.core.requirements import (
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    Operator,
    Requirement,
)
from scheduler_svc.core.solver import solve

DISRUPTION_BLOCKED = "DisruptionBlocked"
UNCONSOLIDATABLE = "Unconsolidatable"
_UNLIMITED = 1 << 30


@dataclass(frozen=True)
class Validation:
    """Whether a decision still holds; ``reason`` says why not (empty when it does)."""

    is_valid: bool
    reason: str = ""


class _Pass:
    """The state of one pass: nodes already taken, budgets left, nodes blocked. ``catalogs``
    keeps catalog indexes across simulations and passes (shared with the provisioner)."""

    def __init__(
        self,
        snapshot: DisruptionSnapshot,
        now: datetime,
        options: ConsolidationOptions,
        catalogs: CatalogCache | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.now = now
        self.options = options
        self.catalogs = catalogs
        self.taken: set[str] = set(snapshot.disrupting)
        self.chosen: dict[str, int] = {}
        self.blocked: dict[str, BlockedNode] = {}
        self.decisions: list[DisruptionDecision] = []
        self._free: dict[str, dict[str, int]] | None = None
        self._admitted: tuple[InstanceType, ...] | None = None
        self.nodeclaims = frozenset(c.nodeclaim for c in snapshot.candidates)
        # NodeClaims deferred by a consolidation in waves whose replacements still wait.
        self.awaited = frozenset(
            claim for c in snapshot.candidates for claim in c.holds_room(now, self.nodeclaims)
        )

    # -- budgets ---------------------------------------------------------------------------

    def budget_left(self, nodepool: str, reason: DisruptionReason) -> tuple[int, str]:
        """How many more nodes of ``nodepool`` may go for ``reason`` now, and the budget."""
        pool = self.snapshot.nodepool(nodepool)
        if pool is None:
            return 0, f"NodePool {nodepool} not found"
        in_pool = [c for c in self.snapshot.candidates if c.nodepool == nodepool]
        disrupting = sum(1 for c in in_pool if c.name in self.snapshot.disrupting)
        disrupting += self.chosen.get(nodepool, 0)
        best, which = _UNLIMITED, ""
        for budget in pool.disruption.budgets:
            applies = (
                not budget.reasons
                if reason is DisruptionReason.EXPIRED
                else budget.applies_to(reason)
            )
            if applies and budget.is_active(self.now) and budget.allowed(len(in_pool)) < best:
                best, which = budget.allowed(len(in_pool)), budget.describe()
        return best - disrupting, which

    def budget_blocks(self, nodes: Sequence[Candidate], reason: DisruptionReason) -> str | None:
        """Why taking ``nodes`` together would exceed a budget (None: it would not)."""
        wanted: dict[str, int] = {}
        for node in nodes:
            wanted[node.nodepool] = wanted.get(node.nodepool, 0) + 1
        for nodepool, count in sorted(wanted.items()):
            if self.snapshot.nodepool(nodepool) is None:
                return f"NodePool {nodepool} not found"
            left, which = self.budget_left(nodepool, reason)
            if count > left:
                return (
                    f"budget {which} of NodePool {nodepool} allows {max(left, 0)} more "
                    f"{reason} disruption(s) now"
                )
        return None

    def take(self, decision: DisruptionDecision) -> None:
        self.decisions.append(decision)
        for name in decision.nodes:
            self.taken.add(name)
            node = self.snapshot.candidate(name)
            if node is not None:
                self.chosen[node.nodepool] = self.chosen.get(node.nodepool, 0) + 1

    def block(self, node: str, event_reason: str, message: str) -> None:
        self.blocked.setdefault(node, BlockedNode(node, event_reason, message))

    # -- blockers --------------------------------------------------------------------------

    def pod_blocker(
        self, candidate: Candidate, *, bare_pods_block: bool, do_not_disrupt_holds: bool = True
    ) -> str | None:
        """Why a pod on ``candidate`` holds it in place (None: nothing does); with
        ``do_not_disrupt_holds`` False, do-not-disrupt pods do not (``grace``)."""
        for pod in candidate.pods:
            if do_not_disrupt_holds and pod.holds(self.now):
                if pod.do_not_disrupt_until is None:
                    return f"do-not-disrupt pod {pod.key}"
                return (
                    f"do-not-disrupt pod {pod.key} until "
                    f"{pod.do_not_disrupt_until.isoformat(timespec='seconds')}"
                )
        for pod in candidate.reschedulable_pods():
            for pdb in self.snapshot.pdbs:
                if pdb.disruptions_allowed <= 0 and pdb.covers(pod.pod):
                    return f"pdb {pdb.key} (pod {pod.key}; no disruption allowed now)"
            if bare_pods_block and pod.owner_kind is None:
                return f"pod {pod.key} has no controller and would not come back"
        return None

    # -- simulation ------------------------------------------------------------------------

    def room_elsewhere(self, moving: Sequence[Candidate]) -> bool:
        """Whether the nodes that would stay have, summed, room for ``moving``'s pods (if not,
        no delete simulation can succeed; checked first because most merges fail)."""
        pods = [p.pod for c in moving for p in c.reschedulable_pods()]
        return could_fit(pods, self.rooms_staying(moving))

    def admitted_types(self) -> tuple[InstanceType, ...]:
        """The catalog as the NodePools that take moved pods may launch it (computed once)."""
        if self._admitted is None:
            pools = [p.nodepool for p in self.snapshot.nodepools if not p.nodepool.is_static]
            self._admitted = admitted_types(self.snapshot.instance_types, pools)
        return self._admitted

    def rooms_staying(self, moving: Sequence[Candidate]) -> list[dict[str, int]]:
        """The free room of every node that would stay if ``moving`` went."""
        if self._free is None:
            nodes = [c.to_node() for c in self.snapshot.candidates]
            nodes += list(self.snapshot.other_nodes)
            self._free = {n.name: free_room(n) for n in nodes}
        leaving = self.taken | {c.name for c in moving}
        return [room for name, room in self._free.items() if name not in leaving]

    def simulate(
        self,
        moving: Sequence[Candidate],
        *,
        allow_new: bool,
        below_price: float | None = None,
        one_node: bool = False,
    ) -> SchedulingResult:
        """Reschedule ``moving``'s pods onto every node not taken (and, with ``allow_new``,
        onto new NodeClaims of any NodePool, from offerings that save enough against
        ``below_price`` when given; with ``one_node``, only from types that could hold every
        moving pod at once)."""
        leaving = self.taken | {c.name for c in moving}
        nodes = [c.to_node() for c in self.snapshot.candidates if c.name not in leaving]
        nodes += [n for n in self.snapshot.other_nodes if n.name not in leaving]
        pods = tuple(p.pod for c in moving for p in c.reschedulable_pods())
        pools = (
            tuple(p.nodepool for p in self.snapshot.nodepools if not p.nodepool.is_static)
            if allow_new
            else ()
        )
        # Without new claims the catalog is not needed; for a consolidation only offerings
        # cheap enough can win, and the solver indexes fewer types (an index not in
        # ``catalogs`` is built per call; the same subset in a later pass is found there).
        types = self.snapshot.instance_types if allow_new else ()
        if allow_new and below_price is not None:
            types = _cheaper_types(types, below_price, self.options)
        if one_node:
            types = types_holding(pods, types)
        return solve(
            SchedulingInput(
                pods=pods,
                nodepools=pools,
                instance_types=types,
                nodes=tuple(nodes),
                daemonsets=self.snapshot.daemonsets,
                unavailable_offerings=self.snapshot.unavailable_offerings,
                namespaces=self.snapshot.namespaces,
                min_values_policy=self.options.min_values_policy,
            ),
            catalogs=self.catalogs,
        )


def plan_disruption(
    snapshot: DisruptionSnapshot,
    now: datetime,
    options: ConsolidationOptions | None = None,
    *,
    catalogs: CatalogCache | None = None,
) -> DisruptionPlan:
    """One pass (see the module docstring): decisions to act on, blocked nodes with why.

    ``now`` is timezone-aware (budget schedules are UTC crons); ValueError otherwise.
    ``catalogs``: catalog indexes reused by the simulations (None: built per simulation)."""
    if now.tzinfo is None:
        raise ValueError("plan_disruption: now must be timezone-aware (UTC), got a naive datetime")
    state = _Pass(snapshot, now, options or ConsolidationOptions(), catalogs)
    eligible = [
        c for c in snapshot.candidates if c.name not in snapshot.disrupting and c.is_initialized
    ]
    for candidate in eligible:
        if snapshot.nodepool(candidate.nodepool) is None:
            state.block(
                candidate.name, DISRUPTION_BLOCKED, f"NodePool {candidate.nodepool} not found"
            )
        elif candidate.is_nominated(now):
            state.block(candidate.name, DISRUPTION_BLOCKED, nominated_message(candidate))
        elif held_for := candidate.holds_room(now, state.nodeclaims):
            state.block(candidate.name, DISRUPTION_BLOCKED, room_held_message(candidate, held_for))
    eligible = [c for c in eligible if c.name not in state.blocked]
    _empty(state, eligible)
    rest = [c for c in eligible if c.name not in state.taken]
    moved = _replace_one(state, rest, DisruptionReason.EXPIRED) or _replace_one(
        state, rest, DisruptionReason.DRIFTED
    )
    if not moved:
        _underutilized(state, rest)
    blocked = tuple(b for name, b in sorted(state.blocked.items()) if name not in state.taken)
    return DisruptionPlan(tuple(state.decisions), blocked)


def room_held_message(candidate: Candidate, held_for: Iterable[str]) -> str:
    """Why a replacement of a consolidation in waves stays (decision 0021)."""
    until = candidate.room_held_until
    when = "" if until is None else f" until {until.isoformat(timespec='seconds')}"
    return (
        f"holds room for {', '.join(sorted(held_for))}, deferred by a consolidation in waves{when}"
    )


def nominated_message(candidate: Candidate) -> str:
    """Why a nominated node stays (Karpenter: "state node is nominated for a pending pod")."""
    until = candidate.nominated_until
    when = "" if until is None else f" until {until.isoformat(timespec='seconds')}"
    return (
        f"nominated for {candidate.nominated_pods} pending pod(s) the provisioner planned "
        f"onto it{when}"
    )


# -- Empty ------------------------------------------------------------------------------------


def quiet_seconds(candidate: Candidate, now: datetime) -> float:
    """How long nothing was bound to or left the node, as shown to people: never negative (a
    creationTimestamp ahead of ``now``, when the API server's clock runs ahead of the
    scheduler's, reads "just now" rather than "pods changed -2h ago")."""
    return max(0.0, (now - candidate.quiet_since()).total_seconds())


def is_quiet_for(candidate: Candidate, now: datetime, wait_seconds: float) -> bool:
    """Whether the node has been quiet for ``wait_seconds``; a change stamped after ``now``
    (clock skew) is not quiet even with no wait, as ``validate`` would also refuse it."""
    return (now - candidate.quiet_since()).total_seconds() >= wait_seconds


def _empty(state: _Pass, candidates: Iterable[Candidate]) -> None:
    for candidate in sorted(candidates, key=lambda c: (c.quiet_since(), c.name)):
        if candidate.reschedulable_pods():
            continue
        settings = state.snapshot.nodepool(candidate.nodepool).disruption  # type: ignore[union-attr]
        wait = settings.consolidate_after_seconds
        if wait is None:
            continue
        if not is_quiet_for(candidate, state.now, wait):
            continue
        quiet = quiet_seconds(candidate, state.now)
        blocker = state.pod_blocker(candidate, bare_pods_block=False)
        if blocker is None:
            blocker = state.budget_blocks([candidate], DisruptionReason.EMPTY)
        if blocker is not None:
            state.block(candidate.name, DISRUPTION_BLOCKED, blocker)
            continue
        state.take(
            DisruptionDecision(
                reason=DisruptionReason.EMPTY,
                nodes=(candidate.name,),
                nodeclaims=(candidate.nodeclaim,),
                replacements=(),
                message=(
                    f"Empty: no pods for {format_seconds(quiet)} "
                    f"(consolidateAfter {format_seconds(wait)})"
                ),
                decided_at=state.now,
                old_price_per_hour=candidate.price_per_hour,
                new_price_per_hour=0.0,
            )
        )


# -- Expired and Drifted ----------------------------------------------------------------------


def expiry_reason(candidate: Candidate, snapshot: DisruptionSnapshot, now: datetime) -> str | None:
    """Why ``candidate`` has expired (None: it has not, or its NodePool says Never)."""
    pool = snapshot.nodepool(candidate.nodepool)
    if pool is None or pool.disruption.expire_after_seconds is None:
        return None
    age = (now - candidate.created_at).total_seconds()
    limit = pool.disruption.expire_after_seconds
    if age < limit:
        return None
    return f"Expired: {format_seconds(age)} old (expireAfter {format_seconds(limit)})"


def _replace_one(state: _Pass, candidates: Sequence[Candidate], reason: DisruptionReason) -> bool:
    """Decide the first (oldest) candidate that expired/drifted and may go; True if one did."""
    found: list[tuple[Candidate, str]] = []
    for candidate in sorted(candidates, key=lambda c: (c.created_at, c.name)):
        if reason is DisruptionReason.EXPIRED:
            why = expiry_reason(candidate, state.snapshot, state.now)
        else:
            drift = drift_reason(candidate, state.snapshot)
            why = None if drift is None else f"Drifted: {drift}"
        if why is not None:
            found.append((candidate, why))
    for candidate, why in found:
        ended = grace_has_ended(candidate, state.snapshot, reason, state.now)
        blocker = state.pod_blocker(
            candidate, bare_pods_block=False, do_not_disrupt_holds=not ended
        )
        note = grace_note(candidate, state.snapshot, reason)
        if blocker is not None and note and blocker.startswith("do-not-disrupt"):
            blocker += f"; {note}"
        if blocker is None:
            blocker = state.budget_blocks([candidate], reason)
        if blocker is not None:
            state.block(candidate.name, DISRUPTION_BLOCKED, f"{blocker} ({why})")
            continue
        result = state.simulate([candidate], allow_new=True)
        message = why
        held = [p.key for p in candidate.pods if p.holds(state.now)] if ended else []
        if held:
            message += (
                f"; do-not-disrupt pod(s) {', '.join(held)} no longer hold it "
                f"({note.replace(' ends ', ' ended ')})"
            )
        message += where_pods_go(candidate, result)
        state.take(
            DisruptionDecision(
                reason=reason,
                nodes=(candidate.name,),
                nodeclaims=(candidate.nodeclaim,),
                replacements=result.new_claims,
                message=message,
                decided_at=state.now,
                old_price_per_hour=candidate.price_per_hour,
                new_price_per_hour=result.total_price_per_hour,
                ends_do_not_disrupt=bool(held),
            )
        )
        return True
    return False


# -- Underutilized ----------------------------------------------------------------------------


def _consolidatable(state: _Pass, candidates: Sequence[Candidate]) -> list[Candidate]:
    """Candidates consolidation may look at, most promising first; the others are blocked."""
    out = []
    pending = len(state.snapshot.pending_pods)
    in_flight = sum(1 for n in state.snapshot.other_nodes if n.is_in_flight)
    in_flight += sum(1 for c in state.snapshot.candidates if not c.is_initialized)
    for candidate in candidates:
        settings = state.snapshot.nodepool(candidate.nodepool).disruption  # type: ignore[union-attr]
        if not settings.consolidation_policy.consolidates_underutilized:
            continue
        if not candidate.reschedulable_pods():
            continue  # empty: the Empty method's (after consolidateAfter)
        wait = settings.consolidate_after_seconds
        if wait is None:
            continue
        quiet = quiet_seconds(candidate, state.now)
        if not is_quiet_for(candidate, state.now, wait):
            state.block(
                candidate.name,
                UNCONSOLIDATABLE,
                f"pods changed {format_seconds(quiet)} ago "
                f"(consolidateAfter {format_seconds(wait)})",
            )
            continue
        if pending or in_flight:
            state.block(
                candidate.name,
                UNCONSOLIDATABLE,
                f"scale-up in progress ({pending} pod(s) pending, {in_flight} claim(s) in flight)",
            )
            continue
        blocker = state.pod_blocker(candidate, bare_pods_block=True)
        if blocker is not None:
            state.block(candidate.name, DISRUPTION_BLOCKED, blocker)
            continue
        out.append(candidate)
    # Nodes a consolidation in waves deferred come first: their replacements wait for them.
    out.sort(
        key=lambda c: (
            c.nodeclaim not in state.awaited,
            len(c.reschedulable_pods()),
            -c.price_per_hour,
            c.name,
        )
    )
    return out


def _underutilized(state: _Pass, candidates: Sequence[Candidate]) -> None:
    ordered = _consolidatable(state, candidates)
    # Budgets: a single node needs one disruption left in its NodePool; a multi-node merge
    # takes at most as many of each NodePool as it may lose now.
    singles: list[Candidate] = []
    usable: list[Candidate] = []
    per_pool: dict[str, int] = {}
    for candidate in ordered:
        left, which = state.budget_left(candidate.nodepool, DisruptionReason.UNDERUTILIZED)
        if left < 1:
            state.block(
                candidate.name,
                DISRUPTION_BLOCKED,
                f"budget {which} of NodePool {candidate.nodepool} allows no more "
                "Underutilized disruptions now",
            )
            continue
        singles.append(candidate)
        if per_pool.get(candidate.nodepool, 0) < left:
            per_pool[candidate.nodepool] = per_pool.get(candidate.nodepool, 0) + 1
            usable.append(candidate)
    # Multi-node: the largest k whose first k merge into at most one cheaper node.
    merged = multi_node_search(
        usable,
        lambda nodes: _consolidate(state, nodes),
        max_candidates=state.options.max_multi_node_candidates,
        max_scan=state.options.max_multi_node_scan,
    )
    if merged.decision is not None:
        state.take(merged.decision)
        return
    # Single node: a delete anywhere before a replacement anywhere (a delete evicts once and
    # launches nothing; a replacement often leads to a delete of its replacement later).
    attempts = singles[: state.options.max_single_node_attempts]
    if _single_node(state, attempts, allow_replace=False) is None:
        return
    refused = _single_node(state, attempts, allow_replace=True)
    if refused is None:
        return
    # Nothing within the budgets pays (Karpenter would stop here): a merge larger than the
    # budgets, in waves (decision 0021). Only when some NodePool has more candidates than it
    # may lose now; the lengths within the budgets were searched above.
    waves = None
    settled = [c for c in singles if _settled_for_waves(state, c)]
    if len(usable) < len(settled):
        waves = multi_node_search(
            settled,
            lambda nodes: _consolidate_in_waves(state, nodes),
            max_candidates=state.options.max_multi_node_candidates,
            max_scan=state.options.max_multi_node_scan,
        )
        if waves.decision is not None:
            state.take(waves.decision)
            return
    for candidate in attempts:
        also = (waves or merged).summary() if candidate in usable or waves else ""
        why_not = refused[candidate.name]
        state.block(candidate.name, UNCONSOLIDATABLE, f"{why_not}; {also}" if also else why_not)


def _settled_for_waves(state: _Pass, candidate: Candidate) -> bool:
    """Whether ``candidate`` has been quiet long enough to join a merge in waves
    (``ConsolidationOptions.waves_min_quiet_seconds``, or its ``consolidateAfter`` if longer)."""
    pool = state.snapshot.nodepool(candidate.nodepool)
    if pool is None:  # a candidate's NodePool is in the snapshot (``_consolidatable``)
        return False
    after = pool.disruption.consolidate_after_seconds or 0.0
    wait = max(after, state.options.waves_min_quiet_seconds)
    return is_quiet_for(candidate, state.now, wait)


def _consolidate_in_waves(
    state: _Pass, nodes: Sequence[Candidate], *, within_budgets: bool = False
) -> _Outcome:
    """Merge ``nodes`` although the budgets let fewer go now (decision 0021): all the
    replacements are launched now, the first nodes the budgets allow go now, and the others are
    deferred, each a single-node delete of a later pass once the replacements run. Refused
    unless it is a replacement, larger than the budgets, and each deferred node deleted alone
    would clear the saving thresholds (and its Balanced score): a straggler that cannot go
    would leave the cluster dearer than before. With ``within_budgets`` (validation: the
    budgets may have widened since the decision) a merge the budgets allow whole is the
    ordinary one; otherwise it is refused, as the ordinary search has tried it."""
    now_going, deferred = _first_wave(state, nodes)
    if not deferred:
        if within_budgets:
            return _consolidate(state, nodes)
        return _Outcome(None, "within the budgets (searched as an ordinary merge)")
    outcome = _consolidate(state, nodes)
    decision = outcome.decision
    if decision is None:
        return outcome
    if not decision.replacements:
        return _Outcome(None, "a delete larger than the budgets (a smaller one goes first)")
    straggler = _straggler(state, deferred)
    if straggler is not None:
        return _Outcome(None, straggler)
    pools = sorted({c.nodepool for c in now_going})
    budgets = "; ".join(
        f"{_limit(state, p)} lets {sum(1 for c in now_going if c.nodepool == p)} go now"
        for p in pools
    )
    cheapest = min(deferred, key=lambda c: c.price_per_hour)
    note = (
        f"in waves ({budgets}): {', '.join(c.name for c in now_going)} now, "
        f"{', '.join(c.name for c in deferred)} later, each a delete once the replacements "
        f"run (the cheapest, {cheapest.name}, saves ${cheapest.price_per_hour:.4f}/h alone)"
    )
    hold = state.options.validation_wait_seconds + len(deferred) * (
        state.options.room_hold_seconds_per_deferred_node
    )
    return _Outcome(
        dataclasses.replace(
            decision,
            nodes=tuple(c.name for c in now_going),
            nodeclaims=tuple(c.nodeclaim for c in now_going),
            deferred=tuple(c.name for c in deferred),
            deferred_nodeclaims=tuple(c.nodeclaim for c in deferred),
            room_held_until=state.now + timedelta(seconds=hold),
            message=f"{decision.message}; {note}",
        )
    )


def _limit(state: _Pass, nodepool: str) -> str:
    """What limits ``nodepool``'s Underutilized disruptions now, as a wave's note names it."""
    which = state.budget_left(nodepool, DisruptionReason.UNDERUTILIZED)[1]
    return f"budget {which} of NodePool {nodepool}" if which else f"NodePool {nodepool} (no budget)"


def _first_wave(
    state: _Pass, nodes: Sequence[Candidate]
) -> tuple[list[Candidate], list[Candidate]]:
    """``nodes`` split into the first the budgets let go now (in order) and the rest."""
    left: dict[str, int] = {}
    now_going: list[Candidate] = []
    deferred: list[Candidate] = []
    for node in nodes:
        if node.nodepool not in left:
            allowed, _ = state.budget_left(node.nodepool, DisruptionReason.UNDERUTILIZED)
            left[node.nodepool] = allowed
        if left[node.nodepool] > 0:
            left[node.nodepool] -= 1
            now_going.append(node)
        else:
            deferred.append(node)
    return now_going, deferred


def _straggler(state: _Pass, deferred: Sequence[Candidate]) -> str | None:
    """Why a deferred node, deleted alone once the replacements run, would not go (None: each
    would): its price must clear the saving thresholds, and a Balanced NodePool's score."""
    options = state.options
    for node in deferred:
        if not _saves_enough(node.price_per_hour, 0.0, options):
            return (
                f"in waves, deferred {node.name} alone would save only "
                f"${node.price_per_hour:.4f}/h (needs ${options.min_saving_per_hour:.4f}/h) "
                "and would stay"
            )
        scored = balanced_score(state.snapshot, [node], 0.0)
        if scored is not None and not scored.passes:
            return f"in waves, deferred {node.name} alone would stay: {scored.describe()}"
    return None


def _single_node(
    state: _Pass, attempts: Sequence[Candidate], *, allow_replace: bool
) -> dict[str, str] | None:
    """Take the first single-node move in candidate order; None when one was taken, else why
    each candidate did not move. Moves a Balanced NodePool scores are ranked instead: every
    attempt is simulated and the highest score wins (ties: candidate order), so a budget of
    one move per pass spends it on the move that saves most per disruption. An unscored move
    found after scored ones ends the scan, the best scored so far going first."""
    refused: dict[str, str] = {}
    scored: list[DisruptionDecision] = []
    for candidate in attempts:
        outcome = _consolidate(state, [candidate], allow_replace=allow_replace)
        decision = outcome.decision
        if decision is None:
            refused[candidate.name] = outcome.why_not
        elif decision.balanced_score is not None:
            scored.append(decision)
        elif scored:
            break
        else:
            state.take(decision)
            return None
    if not scored:
        return refused
    state.take(max(scored, key=lambda d: d.balanced_score or 0.0))
    return None


def consolidate_alone(
    snapshot: DisruptionSnapshot,
    candidate: Candidate,
    now: datetime,
    options: ConsolidationOptions | None = None,
) -> tuple[DisruptionDecision | None, str]:
    """What consolidating ``candidate`` alone would do now, ignoring the rest of the pass (for
    ``daiku explain node``): a delete, else a replacement (Balanced-scored), or why not."""
    state = _Pass(snapshot, now, options or ConsolidationOptions())
    outcome = _consolidate(state, [candidate], allow_replace=False)
    if outcome.decision is None:
        outcome = _consolidate(state, [candidate])
    return outcome.decision, outcome.why_not


def _consolidate(
    state: _Pass, nodes: Sequence[Candidate], *, allow_replace: bool = True
) -> _Outcome:
    """Delete ``nodes`` (their pods fit elsewhere) or, with ``allow_replace``, replace them by
    one cheaper node; in a Balanced NodePool only when the move's score passes (the decision's
    message then states the score, saving and disruption; the refusal says why)."""
    outcome = _consolidate_unscored(state, nodes, allow_replace=allow_replace)
    if outcome.decision is None:
        return outcome
    scored = balanced_score(state.snapshot, nodes, outcome.decision.new_price_per_hour)
    if scored is None:
        return outcome
    if not scored.passes:
        return _Outcome(None, scored.describe())
    message = f"{outcome.decision.message}; {scored.describe()}"
    return _Outcome(
        dataclasses.replace(outcome.decision, message=message, balanced_score=scored.score)
    )


def _consolidate_unscored(  # noqa: PLR0911 - one exit per way a consolidation fails
    state: _Pass, nodes: Sequence[Candidate], *, allow_replace: bool = True
) -> _Outcome:
    """``_consolidate`` before Balanced scoring."""
    old_price = sum(c.price_per_hour for c in nodes)
    names = tuple(c.name for c in nodes)
    claims = tuple(c.nodeclaim for c in nodes)
    options = state.options
    deleted = state.simulate(nodes, allow_new=False) if state.room_elsewhere(nodes) else None
    if deleted is not None and not deleted.unschedulable:
        if not _saves_enough(old_price, 0.0, options):
            return _Outcome(None, f"would save only ${old_price:.4f}/h")
        return _Outcome(
            DisruptionDecision(
                reason=DisruptionReason.UNDERUTILIZED,
                nodes=names,
                nodeclaims=claims,
                replacements=(),
                message=f"Underutilized: pods of {', '.join(names)} fit on other nodes; "
                f"saves ${old_price:.4f}/h",
                decided_at=state.now,
                old_price_per_hour=old_price,
                new_price_per_hour=0.0,
                needs_validation=True,
            )
        )
    if not allow_replace:
        return _Outcome(None, "pods do not fit on other nodes")
    why_not = _merge_cannot_pay(state, nodes, old_price) if len(nodes) > 1 else None
    if why_not is not None:
        return _Outcome(None, why_not)
    replaced = state.simulate(nodes, allow_new=True, below_price=old_price)
    several = None
    if len(replaced.new_claims) > 1:
        if len(nodes) > len(replaced.new_claims) and not replaced.unschedulable:
            several = replaced  # N -> M, M < N (see multi_node)
        # The solver may prefer several small claims; the question is whether ONE node holds
        # the pods for less (see multi_node).
        one = state.simulate(nodes, allow_new=True, below_price=old_price, one_node=True)
        if not one.unschedulable:
            replaced = one
    # One node wins unless several save the threshold on it too: otherwise a later pass could
    # not have moved one node's pods onto the several either (and fewer nodes evict less).
    if several is not None and (
        replaced is several
        or len(replaced.new_claims) != 1
        or _saves_enough(replaced.total_price_per_hour, several.total_price_per_hour, options)
    ):
        return _replace_by_several(state, nodes, several, replaced)
    if replaced.unschedulable:
        if not _cheaper_types(state.snapshot.instance_types, old_price, options):
            return _Outcome(None, _more_expensive(old_price, options))
        return _Outcome(
            None,
            "no cheaper node holds the pods "
            f"({_more_expensive(old_price, options)}): {replaced.unschedulable[0].reason}",
        )
    if len(replaced.new_claims) != 1:
        return _Outcome(
            None,
            f"would cost more: no single node saving {options.min_saving_fraction:.0%} on "
            f"${old_price:.4f}/h holds the pods (they would need {len(replaced.new_claims)})",
        )
    claim = replaced.new_claims[0]
    # Karpenter asks 15 cheaper spot types of single-node spot->spot only: merging many
    # nodes into one cannot race to the bottom one cheaper spot type at a time.
    all_spot = len(nodes) == 1 and nodes[0].capacity_type == CAPACITY_TYPE_SPOT
    kept = _cheaper_offerings(claim.offerings, old_price, all_spot, options)
    if not kept:
        cheapest = claim.offerings[0]
        spot_rule = (
            f"; spot->spot needs {options.spot_to_spot_min_types} cheaper spot types"
            if all_spot
            else ""
        )
        return _Outcome(
            None,
            f"would cost more: cheapest replacement {cheapest.instance_type} "
            f"({cheapest.capacity_type}) ${cheapest.price_per_hour:.4f}/h vs ${old_price:.4f}/h "
            f"(needs a saving of {options.min_saving_fraction:.0%} and "
            f"${options.min_saving_per_hour:.2f}/h{spot_rule})",
        )
    narrowed = _narrow(claim, kept)
    return _Outcome(
        DisruptionDecision(
            reason=DisruptionReason.UNDERUTILIZED,
            nodes=names,
            nodeclaims=claims,
            replacements=(narrowed,),
            message=(
                f"Underutilized: replace {', '.join(names)} (${old_price:.4f}/h) by "
                f"{narrowed.instance_type} ({kept[0].capacity_type}, "
                f"${kept[0].price_per_hour:.4f}/h); saves "
                f"${old_price - kept[0].price_per_hour:.4f}/h"
            ),
            decided_at=state.now,
            old_price_per_hour=old_price,
            new_price_per_hour=kept[0].price_per_hour,
            needs_validation=True,
        )
    )


def _merge_cannot_pay(state: _Pass, nodes: Sequence[Candidate], old_price: float) -> str | None:
    """Why no replacement of ``nodes`` can save enough, found without a simulation (most merges
    fail here on a settled cluster, and a pass then costs no catalog-wide solve); None when a
    simulation is worth it: one cheaper type has room for every pod, or fewer nodes than
    ``nodes`` might hold them for less."""
    if _one_cheaper_node_has_room(state, nodes, old_price):
        return None
    options = state.options
    floor = _several_nodes_floor(state, nodes, old_price)
    if _saves_enough(old_price, floor, options):
        return None
    fewer = (
        f"nor do {len(nodes) - 1}"
        if floor == float("inf")
        else f"fewer would cost at least ${floor:.4f}/h"
    )
    return (
        f"would cost more: no node saving {options.min_saving_fraction:.0%} on "
        f"${old_price:.4f}/h has room for the pods of {len(nodes)} nodes ({fewer})"
    )


def _several_nodes_floor(state: _Pass, nodes: Sequence[Candidate], old_price: float) -> float:
    """The least fewer new nodes than ``nodes``, each saving enough on ``old_price``, could
    cost for their pods (``multi_node.capacity_price_floor``, less the room of the nodes that
    stay)."""
    pods = [p.pod for c in nodes for p in c.reschedulable_pods()]
    cheaper = _cheaper_types(state.admitted_types(), old_price, state.options)
    return capacity_price_floor(pods, cheaper, state.rooms_staying(nodes), len(nodes) - 1)


def _replace_by_several(
    state: _Pass, nodes: Sequence[Candidate], several: SchedulingResult, one: SchedulingResult
) -> _Outcome:
    """Replace ``nodes`` by ``several``'s claims (fewer than ``nodes``) when they save enough;
    each claim keeps only offerings that keep the saving (``multi_node.shared_offerings``).
    ``one`` is the one-node answer, named in the message when there is one."""
    options = state.options
    old_price = sum(c.price_per_hour for c in nodes)
    new_price = several.total_price_per_hour
    if not _saves_enough(old_price, new_price, options):
        return _Outcome(
            None,
            f"would cost more: the cheapest {len(several.new_claims)} nodes for the pods cost "
            f"${new_price:.4f}/h vs ${old_price:.4f}/h (needs a saving of "
            f"{options.min_saving_fraction:.0%} and ${options.min_saving_per_hour:.2f}/h)",
        )
    most = min(
        old_price * (1 - options.min_saving_fraction), old_price - options.min_saving_per_hour
    )
    claims = tuple(
        _narrow(claim, kept)
        for claim, kept in zip(
            several.new_claims, shared_offerings(several.new_claims, most), strict=True
        )
    )
    one_node = ""
    if len(one.new_claims) == 1 and not one.unschedulable:
        one_node = (
            f"one node would be {one.new_claims[0].instance_type} at "
            f"${one.total_price_per_hour:.4f}/h"
        )
    return _Outcome(
        DisruptionDecision(
            reason=DisruptionReason.UNDERUTILIZED,
            nodes=tuple(c.name for c in nodes),
            nodeclaims=tuple(c.nodeclaim for c in nodes),
            replacements=claims,
            message=several_message([c.name for c in nodes], old_price, claims, one_node),
            decided_at=state.now,
            old_price_per_hour=old_price,
            new_price_per_hour=new_price,
            needs_validation=True,
        )
    )


def _one_cheaper_node_has_room(state: _Pass, nodes: Sequence[Candidate], old_price: float) -> bool:
    """Whether any instance type a NodePool may launch, saving enough on ``old_price``, has
    room for all of ``nodes``' pods at once (necessary for a one-node replacement; the price
    floor of fewer nodes, over the same types, is then never above that type's price)."""
    pods = [p.pod for c in nodes for p in c.reschedulable_pods()]
    cheaper = _cheaper_types(state.admitted_types(), old_price, state.options)
    return bool(types_holding(pods, cheaper))


def _saves_enough(old_price: float, new_price: float, options: ConsolidationOptions) -> bool:
    saving = old_price - new_price
    return (
        saving > 0
        and saving >= options.min_saving_fraction * old_price
        and saving >= options.min_saving_per_hour
    )


def _cheaper_types(
    types: Sequence[InstanceType], old_price: float, options: ConsolidationOptions
) -> tuple[InstanceType, ...]:
    """The instance types with their offerings that would save enough against ``old_price``."""
    out = []
    for instance_type in types:
        offerings = tuple(
            o
            for o in instance_type.offerings
            if _saves_enough(old_price, o.price_per_hour, options)
        )
        if len(offerings) == len(instance_type.offerings):
            out.append(instance_type)
        elif offerings:
            out.append(dataclasses.replace(instance_type, offerings=offerings))
    return tuple(out)


def _more_expensive(old_price: float, options: ConsolidationOptions) -> str:
    return (
        f"would cost more: no replacement saves {options.min_saving_fraction:.0%} and "
        f"${options.min_saving_per_hour:.2f}/h on ${old_price:.4f}/h"
    )


def _cheaper_offerings(
    offerings: Sequence[OfferingOption],
    old_price: float,
    all_spot: bool,
    options: ConsolidationOptions,
) -> tuple[OfferingOption, ...]:
    """The offerings cheap enough to be worth it, cheapest first; spot ones for spot
    candidates only when there are enough cheaper spot types to choose from."""
    cheap = [o for o in offerings if _saves_enough(old_price, o.price_per_hour, options)]
    if all_spot:
        spot_types = {o.instance_type for o in cheap if o.capacity_type == CAPACITY_TYPE_SPOT}
        if len(spot_types) < options.spot_to_spot_min_types:
            cheap = [o for o in cheap if o.capacity_type != CAPACITY_TYPE_SPOT]
    return tuple(cheap)


def _narrow(claim: NodeClaimPlan, kept: Sequence[OfferingOption]) -> NodeClaimPlan:
    """The claim launching only ``kept`` (requirements narrowed to match)."""
    narrowed_keys = {LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE}
    requirements = tuple(r for r in claim.requirements if r.key not in narrowed_keys)
    requirements += (
        Requirement(
            LABEL_INSTANCE_TYPE, Operator.IN, tuple(sorted({o.instance_type for o in kept}))
        ),
        Requirement(LABEL_ZONE, Operator.IN, tuple(sorted({o.zone for o in kept}))),
        Requirement(
            LABEL_CAPACITY_TYPE, Operator.IN, tuple(sorted({o.capacity_type for o in kept}))
        ),
    )
    return dataclasses.replace(claim, requirements=requirements, offerings=tuple(kept))


# -- validation -------------------------------------------------------------------------------


def validate(  # noqa: PLR0911 - one exit per way a decision stops holding
    decision: DisruptionDecision,
    snapshot: DisruptionSnapshot,
    now: datetime,
    options: ConsolidationOptions | None = None,
    *,
    catalogs: CatalogCache | None = None,
) -> Validation:
    """Whether ``decision`` still holds on a newer ``snapshot`` (taken after the wait).

    Expired/drifted/empty decisions need no validation and are re-checked here only for
    blockers. A consolidation holds when its nodes are still there and quiet since the
    decision, nothing blocks them, no scale-up started, and the same nodes still consolidate
    as well (a delete is still a delete; a replacement costs no more than decided)."""
    state = _Pass(snapshot, now, options or ConsolidationOptions(), catalogs)
    nodes: list[Candidate] = []
    # A consolidation in waves holds only if the whole merge still does (decision 0021).
    for name in decision.merged:
        candidate = snapshot.candidate(name)
        if candidate is None:
            return Validation(False, f"node {name} is gone")
        stopped = _stopped_holding(state, decision, candidate)
        if stopped is not None:
            return Validation(False, stopped)
        nodes.append(candidate)
    going_now = [c for c in nodes if c.name in decision.nodes]
    budget = state.budget_blocks(going_now, decision.reason)
    if budget is not None:
        return Validation(False, f"{DISRUPTION_BLOCKED}: {budget}")
    if decision.reason is DisruptionReason.EMPTY:
        busy = next((c.name for c in nodes if c.reschedulable_pods()), None)
        return Validation(busy is None, f"node {busy} is no longer empty" if busy else "")
    if decision.reason is not DisruptionReason.UNDERUTILIZED:
        return Validation(True)
    if (
        snapshot.pending_pods
        or any(n.is_in_flight for n in snapshot.other_nodes)
        or not all(c.is_initialized for c in snapshot.candidates)
    ):
        return Validation(False, "scale-up in progress")
    outcome = (
        _consolidate_in_waves(state, nodes, within_budgets=True)
        if decision.deferred
        else _consolidate(state, nodes)
    )
    if outcome.decision is None:
        return Validation(False, outcome.why_not)
    if outcome.decision.new_price_per_hour > decision.new_price_per_hour + 1e-9:
        return Validation(
            False,
            f"the replacement now costs ${outcome.decision.new_price_per_hour:.4f}/h, "
            f"more than the ${decision.new_price_per_hour:.4f}/h decided",
        )
    return Validation(True)


def _stopped_holding(
    state: _Pass, decision: DisruptionDecision, candidate: Candidate
) -> str | None:
    """Why ``decision`` no longer holds for one of its nodes (None: it still does)."""
    name, now = candidate.name, state.now
    if name in state.snapshot.disrupting:
        return f"node {name} is already being disrupted"
    if candidate.is_nominated(now):
        return f"{DISRUPTION_BLOCKED}: {nominated_message(candidate)}"
    if held_for := candidate.holds_room(now, state.nodeclaims):
        return f"{DISRUPTION_BLOCKED}: {room_held_message(candidate, held_for)}"
    if (
        candidate.last_pod_event_at is not None
        and candidate.last_pod_event_at > decision.decided_at
    ):
        return f"pods changed on node {name} since the decision"
    blocker = state.pod_blocker(
        candidate, bare_pods_block=decision.reason is DisruptionReason.UNDERUTILIZED
    )
    return None if blocker is None else f"{DISRUPTION_BLOCKED}: {blocker}"
