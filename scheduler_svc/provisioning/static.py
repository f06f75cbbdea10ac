"""Static NodePools (leader only): each NodePool with `spec.replicas` keeps exactly that many
NodeClaims, whatever the pods (`scheduler_svc.core.static` decides, this adapter acts).

Runs when a NodePool or NodeClaim changes and every `interval_seconds`. Missing claims are
created through `NodeClaimCreator` (the one way a claim comes to be) from the cheapest offering
the pool allows, at most up to `limits.nodes`; surplus claims are deleted, and the lifecycle
controller drains their nodes honouring PodDisruptionBudgets (disruption budgets do not apply
to scaling, as in Karpenter). After writing claims a pass waits (bounded) until the mirror
shows them, so the next pass counts them and does not create them twice. The pool's
EC2NodeClass must exist and be ready; otherwise nothing is created (the provisioner reports the
pool's conditions). Drift and expiry replace static nodes through the disruption controller:
the claim it deletes no longer counts, and the next reconcile creates its successor.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import NoReturn

import structlog

from scheduler_svc.core.model import NodePool
from scheduler_svc.core.requirements import LABEL_NODEPOOL
from scheduler_svc.core.static import StaticClaim, reconcile_static, static_claim_plan
from scheduler_svc.errors import ActuatorError, InvalidObjectError, KubeApiError
from scheduler_svc.kube.convert import node_class_name_of, nodepool_from_k8s
from scheduler_svc.kube.resources import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, KubeObject
from scheduler_svc.kube.writer import KubeWriter, conditions_of, is_condition_true, name_of
from scheduler_svc.nodeclass.readiness import first_unresolved
from scheduler_svc.provisioning.catalog import InstanceTypeCatalog
from scheduler_svc.provisioning.creator import NodeClaimCreator
from scheduler_svc.provisioning.unavailable import UnavailableOfferingsCache
from scheduler_svc.state.cluster import Change, ClusterMirror

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StaticCapacitySettings:
    interval_seconds: float = 10.0
    # How long to wait for the mirror to show the claims a pass wrote before the next pass.
    catch_up_seconds: float = 5.0


class StaticCapacityController:
    """Keeps every static NodePool at its replicas (see the module docstring)."""

    def __init__(
        self,
        *,
        mirror: ClusterMirror,
        writer: KubeWriter,
        catalog: InstanceTypeCatalog,
        creator: NodeClaimCreator,
        unavailable: UnavailableOfferingsCache,
        settings: StaticCapacitySettings | None = None,
    ) -> None:
        self._mirror = mirror
        self._writer = writer
        self._catalog = catalog
        self._creator = creator
        self._unavailable = unavailable
        self.settings = settings or StaticCapacitySettings()
        self._wake = asyncio.Event()
        self._reported: set[tuple[str, str]] = set()
        self.reconciles = 0

    def on_change(self, change: Change) -> None:
        """Mirror listener: a NodePool or NodeClaim changed."""
        if change.resource in (NODE_POOLS, NODE_CLAIMS):
            self._wake.set()

    async def run(self) -> NoReturn:
        """Reconcile now, then on every change and each interval."""
        while True:
            self._wake.clear()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("static_capacity_reconcile_failed")
            try:
                async with asyncio.timeout(self.settings.interval_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def reconcile(self) -> None:
        """One pass over every static NodePool."""
        self.reconciles += 1
        for obj in list(self._mirror.objects(NODE_POOLS).values()):
            if (obj.get("spec") or {}).get("replicas") is None:
                continue
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            try:
                pool = nodepool_from_k8s(obj)
            except InvalidObjectError as error:
                self._report(name_of(obj), str(error))
                continue
            await self._reconcile_pool(pool, obj)

    async def _reconcile_pool(self, pool: NodePool, obj: KubeObject) -> None:
        active, deleting = self._claims(pool.name)
        decision = reconcile_static(pool, active, deleting)
        if decision.limited:
            self._report(pool.name, decision.limited)
        for name in decision.delete:
            log.info("static_nodepool_scale_down", nodepool=pool.name, nodeclaim=name)
            try:
                await self._writer.delete_nodeclaim(name)
            except KubeApiError as error:
                log.warning("static_nodeclaim_delete_failed", nodeclaim=name, error=str(error))
        if decision.create:
            await self._create(pool, obj, decision.create)

    async def _create(self, pool: NodePool, obj: KubeObject, count: int) -> None:
        node_class = self._node_class(pool.name, obj)
        if node_class is None:
            return
        try:
            types = await self._catalog.instance_types(node_class)
        except (ActuatorError, InvalidObjectError) as error:
            self._report(pool.name, f"instance types unavailable: {error}")
            return
        plan = static_claim_plan(pool, types, self._unavailable.active())
        if plan is None:
            self._report(pool.name, "no instance type offering meets its requirements")
            return
        names: list[str] = []
        for _ in range(count):
            created = await self._creator.create(plan, obj, static_replicas=pool.replicas)
            if created is None:
                break
            names.append(created.name)
        await self._catch_up(names)

    async def _catch_up(self, names: list[str]) -> None:
        """Wait (bounded) until the mirror has seen every claim in `names` (or its deletion)."""

        def seen() -> bool:
            return all(self._mirror.nodeclaim(n) is not None for n in names)

        try:
            async with asyncio.timeout(self.settings.catch_up_seconds):
                while not seen():  # noqa: ASYNC110 - the mirror is fed by another task
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.warning("static_nodepool_catch_up_timeout", nodeclaims=names)

    def _node_class(self, pool: str, obj: KubeObject) -> KubeObject | None:
        name = node_class_name_of(obj)
        node_class = self._mirror.get(EC2_NODE_CLASSES, name) if name else None
        if node_class is None:
            self._report(pool, f"EC2NodeClass {name!r} not found")
            return None
        unresolved = first_unresolved(conditions_of(node_class))
        if unresolved is not None:
            self._report(pool, f"EC2NodeClass {name} is not ready")
            return None
        return node_class

    def _claims(self, pool: str) -> tuple[list[StaticClaim], int]:
        """The pool's claims not being deleted, and how many are being deleted."""
        active: list[StaticClaim] = []
        deleting = 0
        for name, claim in self._mirror.objects(NODE_CLAIMS).items():
            metadata = claim.get("metadata") or {}
            if (metadata.get("labels") or {}).get(LABEL_NODEPOOL) != pool:
                continue
            if metadata.get("deletionTimestamp"):
                deleting += 1
                continue
            node = str((claim.get("status") or {}).get("nodeName") or "")
            active.append(
                StaticClaim(
                    name,
                    pods=sum(1 for _ in self._mirror.pods_on_node(node)) if node else 0,
                    initialized=is_condition_true(claim, "Initialized"),
                    created=str(metadata.get("creationTimestamp") or ""),
                )
            )
        return active, deleting

    def _report(self, pool: str, message: str) -> None:
        if (pool, message) not in self._reported:
            self._reported.add((pool, message))
            log.warning("static_nodepool_blocked", nodepool=pool, reason=message)
