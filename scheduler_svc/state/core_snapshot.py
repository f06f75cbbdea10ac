"""The mirror's content as the solver's core models, converted once per object version.

`CoreSnapshotter.snapshot()` turns the mirror into what `scheduler_svc.core` solves: pending
pods, nodes with the pods bound to them, NodeClaims still in flight (as `Node(is_in_flight)`),
NodePools and DaemonSet pods. Objects are converted at most once per version: the mirror
replaces an object on every change, so a cache keyed by object identity is exact. A snapshot
of an unchanged 10,000-pod cluster therefore costs tuple building, not conversion. The cache is
the mirror's (`ClusterMirror.derived`, emptied of an object when it changes): every snapshotter
of one mirror shares it, so the models exist once however many controllers solve.

A node still starting (its NodeClaim not Initialized; for a Node without a NodeClaim, as
`daiku plan` may be given: labelled with a NodePool and not `karpenter.sh/initialized=true`)
counts without the taints that only mean "starting": not-ready, unreachable, uninitialized,
unregistered and its startup taints (the claim's, else its NodePool's), as Karpenter's
`StateNode.Taints()` does; its pods are coming, so no second claim is launched for them while
it boots. Likewise it counts with the extended resources its claim promised (the instance
type's, NodeOverlays' included) that its kubelet does not report yet.

Objects that cannot be converted are left out and listed in `invalid` (each error names kind,
object and field) so the caller can report them (events, NodePool status) and carry on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from scheduler_svc.core.headroom import CapacityBuffer
from scheduler_svc.core.model import Node, NodePool, Pod, Resources
from scheduler_svc.core.overlay import NodeOverlay
from scheduler_svc.core.requirements import LABEL_KARPENTER_NODEPOOL, LABEL_NODEPOOL
from scheduler_svc.errors import InvalidObjectError
from scheduler_svc.kube.convert import (
    capacity_buffer_from_k8s,
    daemonset_pod_from_k8s,
    namespace_labels_from_k8s,
    node_from_k8s,
    node_from_nodeclaim,
    node_overlay_from_k8s,
    nodepool_from_k8s,
    pod_from_k8s,
    volume_zones_of,
)
from scheduler_svc.kube.resources import (
    CAPACITY_BUFFERS,
    DAEMON_SETS,
    NAMESPACES,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    KubeObject,
)
from scheduler_svc.kube.writer import UNREGISTERED_TAINT_KEY, is_condition_true
from scheduler_svc.state.cluster import ClusterMirror, is_pending_pod

_Model = TypeVar("_Model")
_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
LABEL_INITIALIZED = "karpenter.sh/initialized"
# Taints a node carries only while it starts (Karpenter's known ephemeral taints).
EPHEMERAL_TAINT_KEYS = frozenset(
    {
        UNREGISTERED_TAINT_KEY,
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)


@dataclass(frozen=True, slots=True)
class CoreSnapshot:
    """The solver's input from one instant of the mirror (instance types come from the
    actuator, not from here).

    `nodes` holds registered nodes, then NodeClaims whose node has not registered yet
    (`is_in_flight=True`, named after the claim). Each node carries its running pods.
    `pending_pods` are those the pod filter accepted (default: unbound and not finished).
    `namespaces` holds each namespace's labels by name (empty when the mirror holds none).
    """

    generation: int
    pending_pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]
    nodepools: tuple[NodePool, ...]
    daemonsets: tuple[Pod, ...]
    invalid: tuple[InvalidObjectError, ...]
    namespaces: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    overlays: tuple[NodeOverlay, ...] = ()
    buffers: tuple[CapacityBuffer, ...] = ()


def _is_deleting(obj: KubeObject) -> bool:
    metadata = obj.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("deletionTimestamp"))


def _occupies_node(pod: KubeObject) -> bool:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase not in _TERMINAL_POD_PHASES


def _uses_volumes(pod: KubeObject) -> bool:
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    return isinstance(volumes, list) and any(
        isinstance(v, dict) and "persistentVolumeClaim" in v for v in volumes
    )


class CoreSnapshotter:
    """Builds CoreSnapshots of `mirror` (which must hold pods and nodes), caching each
    object's conversion. One snapshot at a time (not re-entrant); cheap to call per batch."""

    def __init__(self, mirror: ClusterMirror) -> None:
        self._mirror = mirror
        self.conversions = 0  # how many objects were converted (not served from the cache)

    def _convert(
        self, obj: KubeObject, convert: Callable[[KubeObject], _Model]
    ) -> _Model | InvalidObjectError:
        cache = self._mirror.derived
        entry = cache.get(id(obj))
        if entry is not None and entry[0] is obj:
            cached: _Model | InvalidObjectError = entry[1]
            return cached
        self.conversions += 1
        try:
            result: _Model | InvalidObjectError = convert(obj)
        except InvalidObjectError as error:
            result = error
        # Keep the object referenced with its result: its id() stays unique while cached.
        cache[id(obj)] = (obj, result)
        return result

    def _starting_taint_keys(
        self, nodepools: list[NodePool], starting_claims: dict[str, KubeObject] | None = None
    ) -> dict[str, frozenset[str]]:
        """Node name -> taint keys that do not count while the node starts (module docstring);
        `starting_claims` gets node name -> its NodeClaim, for nodes whose claim is not
        Initialized."""
        mirror = self._mirror
        starting: dict[str, frozenset[str]] = {}
        claimed: set[str] = set()
        if NODE_CLAIMS in mirror.resources:
            for claim in mirror.objects(NODE_CLAIMS).values():
                status = claim.get("status") or {}
                node_name = status.get("nodeName")
                provider_id = status.get("providerID")
                if not node_name and provider_id:
                    node = mirror.node_by_provider_id(provider_id)
                    node_name = ((node or {}).get("metadata") or {}).get("name")
                if not node_name:
                    continue
                claimed.add(str(node_name))
                if not is_condition_true(claim, "Initialized"):
                    startup = _taint_keys((claim.get("spec") or {}).get("startupTaints"))
                    starting[str(node_name)] = frozenset(startup) | EPHEMERAL_TAINT_KEYS
                    if starting_claims is not None:
                        starting_claims[str(node_name)] = claim
        pools: Mapping[str, NodePool] = {p.name: p for p in nodepools}
        for name, node_obj in mirror.objects(NODES).items():
            labels = (node_obj.get("metadata") or {}).get("labels") or {}
            pool_name = labels.get(LABEL_NODEPOOL) or labels.get(LABEL_KARPENTER_NODEPOOL)
            if name in claimed or not pool_name or labels.get(LABEL_INITIALIZED) == "true":
                continue
            pool = pools.get(pool_name)
            startup = {t.key for t in pool.startup_taints} if pool is not None else set()
            starting[name] = frozenset(startup) | EPHEMERAL_TAINT_KEYS
        return starting

    def _as_starting(
        self, node: Node, ignored_taints: frozenset[str], claim: KubeObject | None
    ) -> Node:
        """A starting node without its starting taints and, while its claim is not
        Initialized, with the extended resources the claim promised (module docstring)."""
        node = dataclasses.replace(
            node, taints=tuple(t for t in node.taints if t.key not in ignored_taints)
        )
        if claim is not None:
            promised = self._convert(claim, node_from_nodeclaim)
            if isinstance(promised, Node):
                node = _with_promised_extended(node, promised.allocatable)
        return node

    def _capacity_objects(
        self, invalid: list[InvalidObjectError]
    ) -> tuple[tuple[NodeOverlay, ...], tuple[CapacityBuffer, ...]]:
        """NodeOverlays and CapacityBuffers; invalid ones go to `invalid`."""
        overlays, invalid_overlays = self.overlays()
        invalid.extend(invalid_overlays)
        return overlays, self._buffers(invalid)

    def _buffers(self, invalid: list[InvalidObjectError]) -> tuple[CapacityBuffer, ...]:
        """The mirror's CapacityBuffers by name; invalid ones go to `invalid`."""
        if CAPACITY_BUFFERS not in self._mirror.resources:
            return ()
        valid: list[CapacityBuffer] = []
        for obj in self._mirror.objects(CAPACITY_BUFFERS).values():
            result = self._convert(obj, capacity_buffer_from_k8s)
            if isinstance(result, InvalidObjectError):
                invalid.append(result)
            else:
                valid.append(result)
        return tuple(sorted(valid, key=lambda b: b.name))

    def overlays(self) -> tuple[tuple[NodeOverlay, ...], tuple[InvalidObjectError, ...]]:
        """The mirror's NodeOverlays (converted once per version) and those that are invalid."""
        if NODE_OVERLAYS not in self._mirror.resources:
            return (), ()
        valid: list[NodeOverlay] = []
        invalid: list[InvalidObjectError] = []
        for obj in self._mirror.objects(NODE_OVERLAYS).values():
            result = self._convert(obj, node_overlay_from_k8s)
            if isinstance(result, InvalidObjectError):
                invalid.append(result)
            else:
                valid.append(result)
        return tuple(sorted(valid, key=lambda o: o.name)), tuple(invalid)

    def snapshot(
        self, *, pod_filter: Callable[[KubeObject], bool] = is_pending_pod
    ) -> CoreSnapshot:
        """Convert the mirror's current content; objects that fail conversion go to `invalid`."""
        mirror = self._mirror
        invalid: list[InvalidObjectError] = []
        claims = (
            mirror.objects(PERSISTENT_VOLUME_CLAIMS)
            if PERSISTENT_VOLUME_CLAIMS in mirror.resources
            else {}
        )
        volumes = (
            mirror.objects(PERSISTENT_VOLUMES) if PERSISTENT_VOLUMES in mirror.resources else {}
        )

        def pod_model(obj: KubeObject) -> Pod | None:
            if _uses_volumes(obj):
                # Its volume zones depend on PVCs/PVs too: not cacheable by the pod alone.
                try:
                    return pod_from_k8s(obj, volume_zones=volume_zones_of(obj, claims, volumes))
                except InvalidObjectError as error:
                    invalid.append(error)
                    return None
            result = self._convert(obj, pod_from_k8s)
            if isinstance(result, InvalidObjectError):
                invalid.append(result)
                return None
            return result

        def models(resource: Any, convert: Callable[[KubeObject], _Model]) -> list[_Model]:
            out: list[_Model] = []
            for obj in mirror.objects(resource).values():
                result = self._convert(obj, convert)
                if isinstance(result, InvalidObjectError):
                    invalid.append(result)
                else:
                    out.append(result)
            return out

        pending = tuple(
            model
            for obj in mirror.pending_pods()
            if pod_filter(obj) and (model := pod_model(obj)) is not None
        )

        nodepools = models(NODE_POOLS, nodepool_from_k8s) if NODE_POOLS in mirror.resources else []
        starting_claims: dict[str, KubeObject] = {}
        starting = self._starting_taint_keys(nodepools, starting_claims)
        nodes: list[Node] = []
        registered_provider_ids: set[str] = set()
        for node_obj in mirror.objects(NODES).values():
            provider_id = (node_obj.get("spec") or {}).get("providerID")
            if isinstance(provider_id, str) and provider_id:
                registered_provider_ids.add(provider_id)
            name = (node_obj.get("metadata") or {}).get("name", "")
            pods = tuple(
                model
                for pod in mirror.pods_on_node(name)
                if _occupies_node(pod) and (model := pod_model(pod)) is not None
            )
            bare = self._convert(node_obj, node_from_k8s)
            if isinstance(bare, InvalidObjectError):
                invalid.append(bare)
                continue
            if name in starting:
                bare = self._as_starting(bare, starting[name], starting_claims.get(name))
            nodes.append(_with_pods(bare, pods))

        if NODE_CLAIMS in mirror.resources:
            for claim in mirror.objects(NODE_CLAIMS).values():
                provider_id = (claim.get("status") or {}).get("providerID")
                if _is_deleting(claim) or provider_id in registered_provider_ids:
                    continue  # gone soon, or already counted as its Node
                result = self._convert(claim, node_from_nodeclaim)
                if isinstance(result, InvalidObjectError):
                    invalid.append(result)
                else:
                    nodes.append(result)

        daemonsets = (
            models(DAEMON_SETS, daemonset_pod_from_k8s) if DAEMON_SETS in mirror.resources else []
        )
        namespaces = self._namespaces(invalid)
        overlays, buffers = self._capacity_objects(invalid)
        return CoreSnapshot(
            generation=mirror.generation,
            pending_pods=pending,
            nodes=tuple(nodes),
            nodepools=tuple(nodepools),
            daemonsets=tuple(daemonsets),
            invalid=tuple(invalid),
            namespaces=namespaces,
            overlays=overlays,
            buffers=buffers,
        )

    def _namespaces(self, invalid: list[InvalidObjectError]) -> dict[str, Mapping[str, str]]:
        """Each mirrored namespace's labels by name; malformed ones go to `invalid`."""
        namespaces: dict[str, Mapping[str, str]] = {}
        if NAMESPACES in self._mirror.resources:
            for name, obj in self._mirror.objects(NAMESPACES).items():
                labels = self._convert(obj, namespace_labels_from_k8s)
                if isinstance(labels, InvalidObjectError):
                    invalid.append(labels)
                else:
                    namespaces[name] = labels
        return namespaces


def _taint_keys(taints: object) -> set[str]:
    return (
        {str(t.get("key")) for t in taints if isinstance(t, dict)}
        if isinstance(taints, list)
        else set()
    )


def _with_promised_extended(node: Node, promised: Resources) -> Node:
    """A starting node with the extended resources its claim promised and the node does not
    report yet (a device plugin, or what a NodeOverlay added, comes after the kubelet), as
    Karpenter's StateNode.Allocatable does until the claim is Initialized."""
    have = dict(node.allocatable.extended)
    missing = {k: v for k, v in promised.extended if not have.get(k)}
    if not missing:
        return node
    extended = tuple(sorted({**have, **missing}.items()))
    return dataclasses.replace(
        node, allocatable=dataclasses.replace(node.allocatable, extended=extended)
    )


def _with_pods(node: Node, pods: tuple[Pod, ...]) -> Node:
    if not pods:
        return node
    return Node(
        name=node.name,
        labels=node.labels,
        taints=node.taints,
        allocatable=node.allocatable,
        capacity=node.capacity,
        pods=pods,
        is_in_flight=node.is_in_flight,
    )
