"""The disrupted taint on nodes the disruption controller takes away (decision 0022): an Empty
decision's nodes are tainted `daiku.dev/disrupted:NoSchedule` and their pods read again from
the API server before their NodeClaims are deleted, and a taint no decision acts on is removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import structlog

from scheduler_svc.errors import KubeApiError
from scheduler_svc.kube.convert_disruption import moves_with_its_node
from scheduler_svc.kube.resources import NODE_CLAIMS, NODES, object_key
from scheduler_svc.kube.writer import DISRUPTED_TAINT, DISRUPTED_TAINT_KEY, KubeWriter, name_of
from scheduler_svc.state.cluster import ClusterMirror

log = structlog.get_logger(__name__)


class DisruptedTaints:
    """See the module docstring."""

    def __init__(self, writer: KubeWriter, mirror: ClusterMirror) -> None:
        self._writer = writer
        self._mirror = mirror

    async def cordon_if_still_empty(self, nodes: Sequence[str]) -> str:
        """Taint ``nodes`` disrupted:NoSchedule, then read their pods from the API server: ""
        when they are still empty, else why not (the taints this call added are removed
        again).

        The pass read the mirror, and the default-scheduler may bind a pod to a node it saw
        empty (one nominated for other pods, or just Ready) before the watch delivers the
        bind: the drain would then evict it, and a bare pod is lost. Karpenter closes this by
        validating Empty decisions after a 15 s wait; here no pod is scheduled onto the node
        once tainted, and the read after the taint sees every bind made before it."""
        tainted: list[str] = []
        why = ""
        try:
            for node in nodes:
                if await self._writer.add_node_taint(node, DISRUPTED_TAINT):
                    tainted.append(node)
                pods = [p for p in await self._writer.pods_on_node(node) if moves_with_its_node(p)]
                if pods:
                    bound = ", ".join(sorted(object_key(p) for p in pods))
                    why = f"node {node} is no longer empty: {bound} bound to it since the decision"
                    break
        except KubeApiError as error:
            why = f"could not check that the nodes are still empty: {error}"
        if why:
            for node in tainted:
                await self.untaint(node)
        return why

    async def untaint(self, node: str) -> None:
        """Remove our disrupted taint; a failed write leaves it to `clear_stale`."""
        try:
            await self._writer.remove_node_taint(node, DISRUPTED_TAINT_KEY)
        except KubeApiError as error:
            log.warning("disruption_untaint_failed", node=node, error=str(error))

    async def clear_stale(self, disrupting: Iterable[str]) -> None:
        """Remove the disrupted taint from nodes no decision is acting on: their NodeClaim is
        not being deleted and they are not among ``disrupting`` (this process's decisions).
        A pass that stopped between its taint and its delete (a crash, an API error) leaves
        such a node, which would then take no pods and never be disrupted again (Karpenter
        clears its taint the same way). An interruption's cordon racing this is harmless: its
        delete follows at once and the termination taints the node again."""
        busy = set(disrupting)
        for claim in list(self._mirror.objects(NODE_CLAIMS).values()):
            node = (claim.get("status") or {}).get("nodeName")
            if (
                not isinstance(node, str)
                or node in busy
                or (claim.get("metadata") or {}).get("deletionTimestamp")
            ):
                continue
            taints = ((self._mirror.get(NODES, node) or {}).get("spec") or {}).get("taints") or []
            if any(isinstance(t, dict) and t.get("key") == DISRUPTED_TAINT_KEY for t in taints):
                log.info("disruption_stale_taint_removed", node=node, nodeclaim=name_of(claim))
                await self.untaint(node)
