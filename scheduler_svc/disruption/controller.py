"""The disruption controller (leader only): runs `plan_disruption` on the mirror every
`interval_seconds` and soon after changes, and acts on its decisions.

Per pass:
- NodeClaims without the `daiku.dev/nodepool-hash`/`daiku.dev/ec2nodeclass-hash` annotations get
  them (first sight: the provisioner stamps the NodePool hash at creation; the EC2NodeClass hash
  is stamped here, so a class changed before first sight is not seen as drift).
- Conditions `Empty`, `Expired`, `Drifted`, `Consolidatable` are set on claims as they become
  true (and cleared when they stop being).
- Blocked nodes get an Event on Node and NodeClaim (`DisruptionBlocked: pdb default/web`,
  `Unconsolidatable: would cost more`), once per distinct message.
- Each decision: consolidations wait `validation_wait_seconds` on the injected clock,
  re-snapshot and `validate`; Empty nodes are tainted disrupted and their pods read again from
  the API server (decision 0022); replacements are launched first and must be Initialized
  within `replacement_timeout_seconds` (else they are deleted and the decision abandoned); then
  the old NodeClaims are deleted (termination drains and terminates them). Every decision is
  an Event (`Disrupting: Empty ...`), a log line and a `daiku_scheduler_disruption_decisions`
  sample.
- A disrupted taint no decision acts on (a pass stopped between taint and delete) is removed.
`last_pod_event_at` per node comes from pod changes this process sees (bind, leave, finish);
a node first seen without one counts from that moment (a restart never makes a node look
quiet for longer than it was watched).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, NoReturn

import structlog

from scheduler_svc.core.catalog_index import CatalogCache
from scheduler_svc.core.disruption import (
    NODECLASS_HASH_ANNOTATION,
    NODEPOOL_HASH_ANNOTATION,
    ROOM_HELD_FOR_ANNOTATION,
    ROOM_HELD_UNTIL_ANNOTATION,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionReason,
    DisruptionSnapshot,
    drift_reason,
    expiry_reason,
    nodepool_hash,
    plan_disruption,
    validate,
)
from scheduler_svc.core.disruption.model import DO_NOT_DISRUPT_GRACE_ENDED_ANNOTATION
from scheduler_svc.core.model import InstanceType
from scheduler_svc.disruption.disrupted_taints import DisruptedTaints
from scheduler_svc.disruption.snapshot import build_snapshot, nodeclass_state
from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.convert import node_class_name_of
from scheduler_svc.kube.resources import (
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PODS,
    KubeObject,
)
from scheduler_svc.kube.writer import (
    KubeWriter,
    condition,
    conditions_of,
    is_condition_true,
    name_of,
    timestamp,
    utc_now,
    with_condition,
)
from scheduler_svc.metrics import SchedulerMetrics
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.state.cluster import Change, ClusterMirror, pod_node_name
from scheduler_svc.state.core_snapshot import CoreSnapshotter
from scheduler_svc.state.nominations import Nominations

log = structlog.get_logger(__name__)

_DIGITS = re.compile(r"[-\d.]+")
_TERMINAL = frozenset({"Succeeded", "Failed"})
_WATCHED = frozenset({PODS, NODES, NODE_CLAIMS, NODE_POOLS, EC2_NODE_CLASSES})
InstanceTypesSource = Callable[[], Awaitable[tuple[InstanceType, ...]]]


@dataclass(frozen=True, slots=True)
class DisruptionControllerSettings:
    """`interval_seconds`: a pass at least this often; `min_interval_seconds`: changes closer
    together are one pass; `poll_seconds`: how often waits look at the clock and the mirror;
    `nomination_window_seconds`: see `build_snapshot`."""

    interval_seconds: float = 10.0
    min_interval_seconds: float = 1.0
    poll_seconds: float = 0.5
    replacement_timeout_seconds: float = 600.0
    options: ConsolidationOptions = field(default_factory=ConsolidationOptions)
    # Karpenter's nomination window: 2 x the batch max duration, at least 10 s (the service
    # sets it from its batch settings).
    nomination_window_seconds: float = 20.0


async def _no_instance_types() -> tuple[InstanceType, ...]:
    return ()


def _phase(pod: KubeObject | None) -> str | None:
    status = (pod or {}).get("status")
    return status.get("phase") if isinstance(status, dict) else None


def disrupting_message(decision: DisruptionDecision, replacements: list[str]) -> str:
    """The `Disrupting` Event's text: the decision's message, which already starts with its
    reason ("Expired: 30m1s old ..."; prefixed here only if it does not), then the
    replacement NodeClaims launched for it."""
    message = decision.message
    if not message.startswith(f"{decision.reason}:"):
        message = f"{decision.reason}: {message}"
    if replacements:
        message += f"; replaced by {', '.join(replacements)}"
    return message


class DisruptionController:
    """See the module docstring. `clock` is wall time (UTC, aware), injectable."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        metrics: SchedulerMetrics,
        creator: NodeClaimCreator | None = None,
        instance_types: InstanceTypesSource = _no_instance_types,
        settings: DisruptionControllerSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        catalogs: CatalogCache | None = None,
        nominations: Nominations | None = None,
    ) -> None:
        self._mirror = mirror
        self.nominations = nominations
        # When each node was first seen initialized (this clock): its nomination window
        # starts no earlier, as its pods could not bind before.
        self.initialized_at: dict[str, datetime] = {}
        self._writer = writer
        self.taints = DisruptedTaints(writer, mirror)
        self._metrics = metrics
        self._creator = creator
        self._instance_types = instance_types
        self.settings = settings or DisruptionControllerSettings()
        self._clock = clock
        # Catalog indexes of the simulated solves, kept across passes; the provisioner's when
        # shared (both solve on the event loop's thread, as CatalogCache requires).
        self.catalogs = catalogs if catalogs is not None else CatalogCache(size=16)
        self._snapshotter = CoreSnapshotter(mirror)
        self._wake = asyncio.Event()
        self.last_pod_event_at: dict[str, datetime] = {}
        self._disrupting: set[str] = set()
        self._reported: dict[str, str] = {}  # node -> last blocked message sent as an Event
        self.passes = 0

    # -- inputs -----------------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        """Mirror listener: pod moves stamp `last_pod_event_at`; relevant changes wake a pass."""
        if change.resource is PODS:
            self._observe_pod(change.old, change.new)
        if change.resource in _WATCHED:
            self._wake.set()

    def _observe_pod(self, old: KubeObject | None, new: KubeObject | None) -> None:
        before = pod_node_name(old) if old is not None else None
        after = pod_node_name(new) if new is not None else None
        if before is not None and _phase(old) in _TERMINAL:
            before = None
        if after is not None and _phase(new) in _TERMINAL:
            after = None
        if before == after:
            return
        now = self._clock()
        for node in (before, after):
            if node is not None:
                self.last_pod_event_at[node] = now

    # -- loop -------------------------------------------------------------------------------

    async def run(self) -> NoReturn:
        """Pass after pass until cancelled; one failed pass is logged, never fatal."""
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
            # arrives as the wait ends (wakes are frequent here), and the leader's task group
            # would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.interval_seconds):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.disrupt_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("disruption_pass_failed")
            await asyncio.sleep(self.settings.min_interval_seconds)

    async def snapshot(self) -> DisruptionSnapshot:
        """The core's view of the mirror now (nodes first seen start their quiet time now)."""
        now = self._clock()
        for claim in self._mirror.objects(NODE_CLAIMS).values():
            node = (claim.get("status") or {}).get("nodeName")
            if isinstance(node, str) and node:
                self.last_pod_event_at.setdefault(node, now)
                if is_condition_true(claim, "Initialized"):
                    self.initialized_at.setdefault(node, now)
        live = set(self._mirror.objects(NODES))
        self._disrupting &= live
        for seen in (self.last_pod_event_at, self.initialized_at):
            for gone in [n for n in seen if n not in live]:
                del seen[gone]
        try:
            types = await self._instance_types()
        except Exception as error:  # no catalog: consolidation sees no replacements
            log.warning("disruption_catalog_unavailable", error=str(error))
            types = ()
        return build_snapshot(
            self._mirror,
            self._snapshotter,
            instance_types=types,
            last_pod_event_at=self.last_pod_event_at,
            disrupting=self._disrupting,
            nominations=self.nominations,
            nomination_window_seconds=self.settings.nomination_window_seconds,
            initialized_at=self.initialized_at,
        )

    async def disrupt_once(self) -> list[DisruptionDecision]:
        """One pass; returns the decisions acted on."""
        self.passes += 1
        await self.taints.clear_stale(self._disrupting)
        await self._stamp_hashes()
        snapshot = await self.snapshot()
        now = self._clock()
        plan = plan_disruption(snapshot, now, self.settings.options, catalogs=self.catalogs)
        log.debug(
            "disruption_pass",
            candidates=len(snapshot.candidates),
            disrupting=len(snapshot.disrupting),
            decisions=len(plan.decisions),
            blocked=len(plan.blocked),
            instance_types=len(snapshot.instance_types),
        )
        await self._set_conditions(snapshot, now, plan.decisions)
        for blocked in plan.blocked:
            await self._report_blocked(blocked.node, blocked.event_reason, blocked.message)
        # One at a time: each waits (validation, replacements) on what the last one changed.
        return [d for d in plan.decisions if await self._execute(d)]

    # -- hashes and conditions --------------------------------------------------------------

    async def _stamp_hashes(self) -> None:
        snapshot_pools = {name_of(p): p for p in self._mirror.objects(NODE_POOLS).values()}
        classes = {name_of(c): c for c in self._mirror.objects(EC2_NODE_CLASSES).values()}
        for claim in list(self._mirror.objects(NODE_CLAIMS).values()):
            metadata = claim.get("metadata") or {}
            annotations = metadata.get("annotations") or {}
            if metadata.get("deletionTimestamp"):
                continue
            patch: dict[str, str] = {}
            pool = snapshot_pools.get(
                str((metadata.get("labels") or {}).get("daiku.dev/nodepool", ""))
            )
            if NODEPOOL_HASH_ANNOTATION not in annotations and pool is not None:
                patch[NODEPOOL_HASH_ANNOTATION] = nodepool_hash(pool.get("spec") or {})
            node_class = classes.get(node_class_name_of(claim) or "")
            if NODECLASS_HASH_ANNOTATION not in annotations and node_class is not None:
                state = nodeclass_state(node_class)
                if state.nodeclass_hash is not None:
                    patch[NODECLASS_HASH_ANNOTATION] = state.nodeclass_hash
            if patch:
                try:
                    await self._writer.patch_nodeclaim(
                        name_of(claim), {"metadata": {"annotations": patch}}
                    )
                except KubeApiError as error:
                    log.warning(
                        "disruption_stamp_failed", nodeclaim=name_of(claim), error=str(error)
                    )

    async def _set_conditions(
        self,
        snapshot: DisruptionSnapshot,
        now: datetime,
        decisions: tuple[DisruptionDecision, ...],
    ) -> None:
        consolidatable = {
            n for d in decisions if d.reason is DisruptionReason.UNDERUTILIZED for n in d.nodes
        }
        for candidate in snapshot.candidates:
            claim = self._mirror.nodeclaim(candidate.nodeclaim)
            if (
                claim is None
                or candidate.name in snapshot.disrupting
                or not candidate.is_initialized
                or not isinstance(claim.get("status"), dict)
            ):
                continue
            expired = expiry_reason(candidate, snapshot, now)
            drifted = drift_reason(candidate, snapshot)
            empty = not candidate.reschedulable_pods()
            wanted: list[tuple[str, bool, str]] = [
                ("Empty", empty, "no pods to move" if empty else ""),
                ("Expired", expired is not None, expired or ""),
                ("Drifted", drifted is not None, drifted or ""),
                ("Consolidatable", candidate.name in consolidatable, ""),
            ]
            updates: list[tuple[str, Literal["True", "False", "Unknown"], str, str]] = []
            for kind, value, message in wanted:
                current = condition(claim, kind)
                if value and not is_condition_true(claim, kind):
                    updates.append((kind, "True", kind, message))
                elif not value and current is not None and current.get("status") == "True":
                    updates.append((kind, "False", kind, ""))
            if updates:
                await self._write_conditions(claim, updates)

    async def _write_conditions(
        self,
        claim: KubeObject,
        updates: list[tuple[str, Literal["True", "False", "Unknown"], str, str]],
    ) -> None:
        """Conditional on the claim's resourceVersion: the lifecycle controller writes the same
        list (a blind write from a stale mirror copy would drop its `Initialized`). A conflict
        is left to the next pass."""
        now = self._clock()
        conditions = conditions_of(claim)
        for kind, status, reason, message in updates:
            conditions = with_condition(
                conditions, kind, status, reason=reason, message=message, now=now
            )
        patch = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": (claim.get("metadata") or {}).get("resourceVersion"),
            },
            {"op": "add", "path": "/status/conditions", "value": conditions},
        ]
        try:
            await self._writer.objects.patch(
                NODE_CLAIMS, name_of(claim), patch, subresource="status", patch_type="json"
            )
        except KubeApiError as error:
            log.debug("disruption_conditions_deferred", nodeclaim=name_of(claim), error=str(error))

    # -- recording --------------------------------------------------------------------------

    async def _events(
        self,
        nodes: tuple[str, ...],
        claims: tuple[str, ...],
        reason: str,
        message: str,
        *,
        warning: bool = False,
    ) -> None:
        involved = [self._mirror.get(NODES, n) for n in nodes]
        involved += [self._mirror.nodeclaim(c) for c in claims]
        for obj in involved:
            if obj is None:
                continue
            try:
                await self._writer.event(obj, reason, message, warning=warning)
            except KubeApiError as error:
                log.warning("disruption_event_failed", object=name_of(obj), error=str(error))

    async def _report_blocked(self, node: str, event_reason: str, message: str) -> None:
        # Durations in messages move every pass ("pods changed 12s ago"): without them, one
        # Event per distinct reason, not one per pass.
        text = _DIGITS.sub("#", f"{event_reason}: {message}")
        if self._reported.get(node) == text:
            return
        self._reported[node] = text
        self._metrics.disruption_blocked.labels(reason=event_reason).inc()
        log.info("disruption_blocked", node=node, reason=event_reason, message=message)
        claim = next(
            (
                name_of(c)
                for c in self._mirror.objects(NODE_CLAIMS).values()
                if (c.get("status") or {}).get("nodeName") == node
            ),
            None,
        )
        await self._events((node,), (claim,) if claim else (), event_reason, message)

    def _record(self, decision: DisruptionDecision, outcome: str, why: str = "") -> None:
        self._metrics.disruption_decisions.labels(
            reason=str(decision.reason), outcome=outcome
        ).inc()
        if decision.reason is DisruptionReason.UNDERUTILIZED:
            consolidation_type = "multi" if len(decision.merged) > 1 else "single"
            self._metrics.consolidation_decisions.labels(
                consolidation_type=consolidation_type,
                decision="replace" if decision.replacements else "delete",
                outcome=outcome,
            ).inc()
            if decision.balanced_score is not None:
                self._metrics.consolidation_score.labels(
                    consolidation_type=consolidation_type, outcome=outcome
                ).observe(decision.balanced_score)
        log.info(
            "disruption_decision",
            reason=str(decision.reason),
            outcome=outcome,
            nodes=list(decision.nodes),
            nodeclaims=list(decision.nodeclaims),
            deferred=list(decision.deferred),
            replacements=len(decision.replacements),
            savings_per_hour=round(decision.savings_per_hour, 4),
            message=decision.message,
            why=why,
        )

    # -- acting -----------------------------------------------------------------------------

    async def _wait_until(self, moment: datetime) -> None:
        """Until the injected clock reaches `moment` (polled: a test moves the clock)."""
        while self._clock() < moment:  # noqa: ASYNC110 - the clock is injected, not an event
            await asyncio.sleep(self.settings.poll_seconds)

    async def _execute(self, decision: DisruptionDecision) -> bool:
        if decision.needs_validation:
            wait = timedelta(seconds=self.settings.options.validation_wait_seconds)
            await self._wait_until(decision.decided_at + wait)
            checked = validate(
                decision,
                await self.snapshot(),
                self._clock(),
                self.settings.options,
                catalogs=self.catalogs,
            )
            if not checked.is_valid:
                self._record(decision, "invalidated", checked.reason)
                return False
        if decision.reason is DisruptionReason.EMPTY:
            busy = await self.taints.cordon_if_still_empty(decision.nodes)
            if busy:
                self._record(decision, "invalidated", busy)
                return False
        self._disrupting.update(decision.nodes)
        replacements: list[str] = []
        if decision.replacements:
            replacements = await self._launch_replacements(decision)
            if not await self._wait_initialized(decision, replacements):
                self._disrupting.difference_update(decision.nodes)
                for name in replacements:
                    await self._writer.delete_nodeclaim(name)
                self._record(decision, "abandoned", "replacements not initialized in time")
                await self._events(
                    decision.nodes,
                    decision.nodeclaims,
                    "DisruptionAbandoned",
                    f"{decision.reason}: replacements {', '.join(replacements)} did not "
                    "initialize in time",
                    warning=True,
                )
                return False
        await self._events(
            decision.nodes,
            decision.nodeclaims,
            "Disrupting",
            disrupting_message(decision, replacements),
        )
        for claim in decision.nodeclaims:
            if decision.ends_do_not_disrupt:
                # The drain reads it: do-not-disrupt pods held this node their grace period.
                stamp = timestamp(self._clock())
                annotations = {DO_NOT_DISRUPT_GRACE_ENDED_ANNOTATION: stamp}
                await self._writer.patch_nodeclaim(
                    claim, {"metadata": {"annotations": annotations}}
                )
            await self._writer.delete_nodeclaim(claim)
        self._record(decision, "disrupted")
        return True

    async def _launch_replacements(self, decision: DisruptionDecision) -> list[str]:
        names: list[str] = []
        for plan in decision.replacements:
            pool = self._mirror.get(NODE_POOLS, plan.nodepool)
            if pool is None or self._creator is None:
                continue
            created = await self._creator.create(
                plan, pool, replaces=list(decision.nodeclaims), reason=decision.reason
            )
            if created is not None:
                names.append(created.name)
                if decision.deferred_nodeclaims:
                    await self._hold_room(created.name, decision)
        return names

    async def _hold_room(self, replacement: str, decision: DisruptionDecision) -> None:
        """Mark a replacement of a consolidation in waves as waiting for the deferred nodes
        (decision 0021), before any of the merge is drained: until they go, no pass takes it,
        even empty. A failed write only loses the hold (logged)."""
        until = decision.room_held_until or self._clock()
        annotations = {
            ROOM_HELD_FOR_ANNOTATION: ",".join(decision.deferred_nodeclaims),
            ROOM_HELD_UNTIL_ANNOTATION: timestamp(until),
        }
        try:
            await self._writer.patch_nodeclaim(
                replacement, {"metadata": {"annotations": annotations}}
            )
        except KubeApiError as error:
            log.warning("disruption_hold_room_failed", nodeclaim=replacement, error=str(error))

    async def _wait_initialized(self, decision: DisruptionDecision, names: list[str]) -> bool:
        if len(names) < len(decision.replacements):
            return False
        deadline = self._clock() + timedelta(seconds=self.settings.replacement_timeout_seconds)
        while self._clock() < deadline:
            claims = [self._mirror.nodeclaim(n) for n in names]
            if any(c is None or (c.get("metadata") or {}).get("deletionTimestamp") for c in claims):
                return False  # its launch failed and it was deleted
            if all(c is not None and is_condition_true(c, "Initialized") for c in claims):
                return True
            await asyncio.sleep(self.settings.poll_seconds)
        return False

    async def close(self) -> None:
        """Nothing outlives a pass (work runs inside `run`)."""
