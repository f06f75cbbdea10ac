"""Which pending pods the provisioner planned onto which node or NodeClaim (Karpenter's
cluster-state nominations), so disruption does not take a node whose pods the
default-scheduler has not bound yet.

The provisioner calls `nominate` after each round: for every new claim and every existing node
or in-flight claim its solve placed pods on. The disruption controller asks `pending_on` for a
candidate: the nominated pods still pending (in the mirror, unbound, not terminating or
finished) and when the last nomination was made. Memory only: after a restart the
provisioner's first round (pods pending from before trigger one at once) nominates again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from scheduler_svc.core.headroom import is_headroom
from scheduler_svc.kube.resources import PODS
from scheduler_svc.state.cluster import ClusterMirror, is_pending_pod

# Targets remembered at most (the oldest nomination is forgotten first).
_MEMORY = 10_000


@dataclass(frozen=True, slots=True)
class Nomination:
    """Pod keys (``namespace/name``) planned onto one target, last nominated ``at``."""

    pods: frozenset[str]
    at: datetime


class Nominations:
    """See the module docstring. ``clock`` is the disruption controller's (its windows and
    these stamps must be on one clock)."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._by_target: OrderedDict[str, Nomination] = OrderedDict()

    def nominate(self, target: str, pods: Iterable[str]) -> None:
        """``pods`` are planned onto ``target`` (a node or NodeClaim name) as of now."""
        keys = frozenset(pods)
        if not keys:
            return
        self._by_target.pop(target, None)
        self._by_target[target] = Nomination(keys, self._clock())
        while len(self._by_target) > _MEMORY:
            self._by_target.popitem(last=False)

    def pending_on(self, targets: Iterable[str], mirror: ClusterMirror) -> Nomination | None:
        """The pods nominated to any of ``targets`` (a node's name and its claim's) that are
        still pending, with the latest nomination time (None: none pending)."""
        found = [self._by_target[t] for t in targets if t in self._by_target]
        if not found:
            return None
        # A CapacityBuffer's virtual pods never bind: while nominated they keep the room.
        waiting = frozenset(
            key
            for n in found
            for key in n.pods
            if is_headroom(key) or _still_pending(mirror.get(PODS, key))
        )
        if not waiting:
            return None
        return Nomination(waiting, max(n.at for n in found))


def _still_pending(pod: object) -> bool:
    if not isinstance(pod, dict):
        return False
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and metadata.get("deletionTimestamp"):
        return False
    return is_pending_pod(pod)
