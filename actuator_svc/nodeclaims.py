"""NodeClaims as instances: look up, list and terminate by the daiku.dev/nodeclaim tag."""

from __future__ import annotations

from dataclasses import dataclass

from actuator_svc.cloud.provider import CloudProvider, Instance
from actuator_svc.core.tags import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG
from actuator_svc.errors import NodeClaimNotFoundError

_GONE_STATES = frozenset({"shutting-down", "terminated"})


@dataclass(frozen=True)
class Termination:
    """The instance of a terminated claim and its state after the call."""

    instance_id: str
    state: str


class NodeClaims:
    """The cluster's instances, read from EC2 by tag on every call (the actuator is stateless)."""

    def __init__(self, cloud: CloudProvider, *, cluster_name: str) -> None:
        self._cloud = cloud
        self._cluster_name = cluster_name

    async def get(self, nodeclaim_name: str) -> Instance:
        """The claim's live instance, else its latest terminated one; NodeClaimNotFoundError
        when no instance ever carried the claim's tag (as far as EC2 still remembers)."""
        found = await self._cloud.find_instances(
            {CLUSTER_TAG: self._cluster_name, NODECLAIM_TAG: nodeclaim_name},
            include_terminated=True,
        )
        if not found:
            raise NodeClaimNotFoundError(nodeclaim_name)
        found.sort(key=lambda i: (i.state not in _GONE_STATES, i.launch_time is not None, i.id))
        return found[-1]

    async def list(self, nodepool_name: str = "") -> list[Instance]:
        """Every live instance of the cluster (of one NodePool when given)."""
        tags = {CLUSTER_TAG: self._cluster_name}
        if nodepool_name:
            tags[NODEPOOL_TAG] = nodepool_name
        return sorted(await self._cloud.find_instances(tags), key=lambda i: i.id)

    async def terminate(self, nodeclaim_name: str) -> Termination:
        """Terminate the claim's instance. Idempotent: an instance already shutting down or
        terminated is reported as such. NodeClaimNotFoundError when the claim has none."""
        found = await self._cloud.find_instances(
            {CLUSTER_TAG: self._cluster_name, NODECLAIM_TAG: nodeclaim_name},
            include_terminated=True,
        )
        if not found:
            raise NodeClaimNotFoundError(nodeclaim_name)
        alive = [i.id for i in found if i.state not in _GONE_STATES]
        if not alive:
            return Termination(found[0].id, found[0].state)
        states = await self._cloud.terminate_instances(alive)
        return Termination(alive[0], states.get(alive[0], "shutting-down"))
