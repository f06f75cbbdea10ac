"""What the disruption core decides on: candidates (a node with its NodeClaim facts), the
snapshot around them, and the decisions it returns, each with reasons a person can act on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from scheduler_svc.core.disruption.settings import DisruptionReason, DisruptionSettings
from scheduler_svc.core.model import (
    InstanceType,
    LabelSelector,
    MinValuesPolicy,
    Node,
    NodeClaimPlan,
    NodePool,
    Pod,
    Resources,
    UnavailableOffering,
)
from scheduler_svc.core.taints import Taint

DO_NOT_DISRUPT_ANNOTATIONS = ("daiku.dev/do-not-disrupt", "karpenter.sh/do-not-disrupt")
NODEPOOL_HASH_ANNOTATION = "daiku.dev/nodepool-hash"
NODECLASS_HASH_ANNOTATION = "daiku.dev/ec2nodeclass-hash"
# Where the claim's instance runs, recorded at launch from the actuator's answer (NodeClaim
# status has no such fields and its CRD schema prunes unknown ones): the subnet id, and the
# security group ids sorted and comma-separated. Drift compares them with the EC2NodeClass's
# status.subnets/status.securityGroups.
SUBNET_ID_ANNOTATION = "daiku.dev/subnet-id"
SECURITY_GROUP_IDS_ANNOTATION = "daiku.dev/security-group-ids"
# When EC2 first recommended rebalancing the claim's instance (RFC 3339), written by the
# interruption handler; the rebalance method acts on it (decision 0015).
REBALANCE_RECOMMENDED_ANNOTATION = "daiku.dev/rebalance-recommended-at"
# A deadline for a NodeClaim's drain set before its deletion (node repair bounds a broken
# node's drain; Karpenter's karpenter.sh/nodeclaim-termination-timestamp). Termination takes
# the earlier of it and the terminationGracePeriod's deadline.
TERMINATION_TIMESTAMP_ANNOTATION = "daiku.dev/nodeclaim-termination-timestamp"
# Set on an expired or drifted NodeClaim whose do-not-disrupt pods' grace period ran out
# (``grace``; RFC 3339, when it was acted on): its drain no longer waits for those pods.
DO_NOT_DISRUPT_GRACE_ENDED_ANNOTATION = "daiku.dev/do-not-disrupt-grace-ended"
# Set on the replacements of a consolidation in waves (decision 0021): the NodeClaims deferred
# to later passes whose pods they were bought for (comma-separated), and until when (RFC 3339)
# their room is held for them. While held, no method takes the replacement (an empty one would
# otherwise go as Empty before the deferred nodes' pods arrive).
ROOM_HELD_FOR_ANNOTATION = "daiku.dev/room-held-for"
ROOM_HELD_UNTIL_ANNOTATION = "daiku.dev/room-held-until"
# Pods of these owners are not rescheduled: the DaemonSet puts one on every new node, and a
# mirror pod (owner Node) belongs to its static pod's node.
NON_RESCHEDULABLE_OWNER_KINDS = frozenset({"DaemonSet", "Node"})


@dataclass(frozen=True)
class NodeCondition:
    """One of a Node's status conditions (``Ready``, ``MemoryPressure``, a node problem
    detector's ``KernelReady`` ...): ``status`` is ``True``, ``False`` or ``Unknown``;
    ``since`` its ``lastTransitionTime`` (None: not stamped)."""

    type: str
    status: str
    since: datetime | None = None


@dataclass(frozen=True)
class CandidatePod:
    """A pod bound to a candidate: the scheduling view plus what disruption needs.

    ``owner_kind`` is its controller's kind (None: a bare pod with no controller);
    ``do_not_disrupt`` from either annotation; ``do_not_disrupt_until``: when the annotation
    holds a duration (``karpenter.sh/do-not-disrupt: "4h"``, Karpenter v1.12), the moment the
    hold ends (its start time plus the duration; None: ``true``, held for good).
    ``deletion_cost`` (``controller.kubernetes.io/pod-deletion-cost``) and ``priority``
    weigh its eviction in Balanced consolidation (``balanced.eviction_cost``)."""

    pod: Pod
    owner_kind: str | None = "ReplicaSet"
    do_not_disrupt: bool = False
    do_not_disrupt_until: datetime | None = None
    deletion_cost: int = 0
    priority: int = 0

    def holds(self, now: datetime) -> bool:
        """Whether its do-not-disrupt annotation holds its node now."""
        if not self.do_not_disrupt:
            return False
        return self.do_not_disrupt_until is None or now < self.do_not_disrupt_until

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return self.pod.key

    @property
    def is_reschedulable(self) -> bool:
        """Whether removing the node moves it elsewhere (not a DaemonSet or mirror pod)."""
        return self.owner_kind not in NON_RESCHEDULABLE_OWNER_KINDS


@dataclass(frozen=True)
class Candidate:
    """A node daiku launched, with its NodeClaim's facts.

    ``last_pod_event_at`` is the last time a pod was bound to or left the node (None: never,
    the node's age counts instead); ``nodepool_hash``/``nodeclass_hash`` are the hashes
    stamped on the NodeClaim at launch (None: not stamped, never drifted by hash);
    ``subnet_id`` the subnet its instance is in, ``security_group_ids`` its instance's
    security groups (both recorded at launch; None: unknown, e.g. launched before daiku
    recorded them), ``image_id`` the AMI it runs (its NodeClaim's ``status.imageID``; None:
    unknown); ``nominated_pods``/``nominated_until``: see ``is_nominated``."""

    name: str
    nodeclaim: str
    nodepool: str
    created_at: datetime
    instance_type: str
    capacity_type: str
    zone: str
    price_per_hour: float
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    pods: tuple[CandidatePod, ...] = ()
    last_pod_event_at: datetime | None = None
    nodepool_hash: str | None = None
    nodeclass_hash: str | None = None
    subnet_id: str | None = None
    security_group_ids: frozenset[str] | None = None
    image_id: str | None = None
    is_initialized: bool = True
    # Node repair and rebalance recommendations (``repair``, ``rebalance``): the Node's
    # conditions, and when EC2 last recommended rebalancing the instance (None: never).
    conditions: tuple[NodeCondition, ...] = ()
    rebalance_recommended_at: datetime | None = None
    nominated_pods: int = 0
    nominated_until: datetime | None = None
    # Since when its NodeClaim's ``Drifted`` condition is True (None: not recorded yet); the
    # do-not-disrupt grace period of a drifted node counts from it (``grace``).
    drifted_since: datetime | None = None
    # A replacement of a consolidation in waves: the deferred NodeClaims it was bought to take
    # in, and until when it waits for them (``holds_room``; ROOM_HELD_* annotations).
    room_held_for: frozenset[str] = frozenset()
    room_held_until: datetime | None = None

    def is_nominated(self, now: datetime) -> bool:
        """Whether pods the provisioner planned onto it are still pending within the
        nomination window (``nominated_pods`` of them, until ``nominated_until``): the
        default-scheduler has not bound them yet, so it is not empty and not disrupted."""
        return (
            self.nominated_pods > 0
            and self.nominated_until is not None
            and now < self.nominated_until
        )

    def holds_room(self, now: datetime, nodeclaims: frozenset[str]) -> frozenset[str]:
        """Which of the deferred NodeClaims it was bought for still exist (``nodeclaims``: the
        snapshot's) while its hold lasts: it stays for them, as Empty or Underutilized would
        otherwise take the room their pods are coming to (empty set: no hold)."""
        if self.room_held_until is None or now >= self.room_held_until:
            return frozenset()
        return self.room_held_for & nodeclaims

    def to_node(self) -> Node:
        """The scheduling core's view (every bound pod takes room)."""
        return Node(
            self.name,
            labels=self.labels,
            taints=self.taints,
            allocatable=self.allocatable,
            pods=tuple(p.pod for p in self.pods),
        )

    def reschedulable_pods(self) -> tuple[CandidatePod, ...]:
        """The pods that would have to move (no DaemonSet or mirror pods)."""
        return tuple(p for p in self.pods if p.is_reschedulable)

    def quiet_since(self) -> datetime:
        """Since when nothing was bound to or left it (its creation if nothing ever was)."""
        if self.last_pod_event_at is None:
            return self.created_at
        return max(self.created_at, self.last_pod_event_at)


@dataclass(frozen=True)
class PodDisruptionBudget:
    """A PDB: pods of ``namespace`` matching ``selector``; ``disruptions_allowed`` from its
    status (how many more may be evicted now). ``selector`` None: the budget has none and
    selects no pod (Kubernetes' null selector; an empty one selects every pod)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        """Whether the budget counts ``pod``."""
        return pod.namespace == self.namespace and self.selects(pod.labels)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod of the budget's namespace with ``labels`` is counted."""
        return self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True)
class NodePoolState:
    """A NodePool: the solver's view, its disruption settings, its current launch hash and
    the EC2NodeClass it launches with."""

    nodepool: NodePool
    disruption: DisruptionSettings = field(default_factory=DisruptionSettings)
    nodepool_hash: str | None = None
    nodeclass: str | None = None

    @property
    def name(self) -> str:
        """The NodePool's name."""
        return self.nodepool.name


@dataclass(frozen=True)
class NodeClassState:
    """An EC2NodeClass: its current launch hash, resolved subnet, security group and AMI ids
    (its ``status.subnets``/``status.securityGroups``/``status.amis``; None: not resolved).

    ``accepted_nodeclass_hashes``: hashes of the same spec under earlier hash versions that a
    claim's stamp may also equal without drifting (a claim stamped before an upgrade changed
    what the hash covers is not replaced for that alone)."""

    name: str
    nodeclass_hash: str | None = None
    subnet_ids: frozenset[str] | None = None
    ami_ids: frozenset[str] | None = None
    security_group_ids: frozenset[str] | None = None
    accepted_nodeclass_hashes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DisruptionSnapshot:
    """Everything one disruption pass looks at.

    ``candidates``: daiku's nodes; ``other_nodes``: every other node (and in-flight claims)
    that can take pods; ``disrupting``: names of nodes already being disrupted (they count
    against budgets and take no pods); ``pending_pods``: pods waiting for capacity. While any
    pod waits, a claim is in flight or a candidate is not initialized yet, consolidation of
    underutilized nodes is suspended (a scale-up is under way)."""

    candidates: tuple[Candidate, ...]
    nodepools: tuple[NodePoolState, ...]
    instance_types: tuple[InstanceType, ...]
    nodeclasses: tuple[NodeClassState, ...] = ()
    other_nodes: tuple[Node, ...] = ()
    daemonsets: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    pending_pods: tuple[Pod, ...] = ()
    disrupting: frozenset[str] = frozenset()
    unavailable_offerings: frozenset[UnavailableOffering] = frozenset()
    # Namespace labels by name, for pod (anti-)affinity's namespaceSelector.
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def candidate(self, name: str) -> Candidate | None:
        """The candidate named ``name``."""
        return next((c for c in self.candidates if c.name == name), None)

    def nodepool(self, name: str) -> NodePoolState | None:
        """The NodePool named ``name``."""
        return next((p for p in self.nodepools if p.name == name), None)

    def nodeclass(self, name: str | None) -> NodeClassState | None:
        """The EC2NodeClass named ``name``."""
        return next((c for c in self.nodeclasses if c.name == name), None)


@dataclass(frozen=True)
class ConsolidationOptions:
    """Knobs of the consolidation math.

    A consolidation must save at least ``min_saving_fraction`` of the replaced price *and*
    ``min_saving_per_hour`` dollars: 10 % and $0.01/h by default, so swapping a node for one a
    cent cheaper never pays for the evictions and cold caches it costs. Spot candidates are
    replaced by spot only when at least ``spot_to_spot_min_types`` cheaper spot types exist
    (Karpenter's 15: a replacement with few options is likely to be interrupted again).
    ``validation_wait_seconds``: how long a consolidation waits before ``validate``.
    ``max_multi_node_candidates``: the most nodes one replacement may merge (Karpenter's 100).
    ``max_multi_node_scan``: extra multi-node simulations per pass for the prefix lengths the
    binary search skipped (daiku's addition: the saving is not monotonic in the length).
    ``max_single_node_attempts``: simulations per pass for single-node consolidation.
    ``room_hold_seconds_per_deferred_node``: how long the replacements of a consolidation in
    waves hold their room for the nodes deferred to later passes, per deferred node, counted
    from the decision (a later wave needs ``consolidateAfter``, the validation wait and a drain;
    a deferred node that cannot go by then no longer holds the replacements).
    ``waves_min_quiet_seconds``: how long every node of a merge in waves must have been quiet
    (no pod bound or gone; ``consolidateAfter`` if longer). A wave spans several passes: on a
    cluster still changing, its replacements' room goes to other pods and the same pods move
    again (bench.churn: without it, waves raised the default policy's evictions; decision
    0021).
    ``min_values_policy``: the scheduler's ``--min-values-policy``, in the simulations too (as
    Karpenter's): under ``BestEffort`` a replacement may open with minValues lowered, so a node
    launched that way can be replaced (drift, consolidation) as it was launched."""

    min_saving_fraction: float = 0.10
    min_saving_per_hour: float = 0.01
    spot_to_spot_min_types: int = 15
    validation_wait_seconds: float = 15.0
    max_multi_node_candidates: int = 100
    max_multi_node_scan: int = 10
    max_single_node_attempts: int = 50
    room_hold_seconds_per_deferred_node: float = 300.0
    waves_min_quiet_seconds: float = 600.0
    min_values_policy: MinValuesPolicy = MinValuesPolicy.STRICT


@dataclass(frozen=True)
class DisruptionDecision:
    """Disrupt ``nodes`` (node names) for ``reason``; launch ``replacements`` first (empty:
    their pods fit on the remaining nodes). ``savings_per_hour`` is old price - new price.
    ``needs_validation``: the controller waits ``validation_wait_seconds`` and calls
    ``validate`` before acting (consolidation of underutilized nodes). ``balanced_score``:
    the move's Balanced score (``balanced.BalancedScore.score``; None: not scored).
    ``ends_do_not_disrupt``: see ``grace``."""

    reason: DisruptionReason
    nodes: tuple[str, ...]
    nodeclaims: tuple[str, ...]
    replacements: tuple[NodeClaimPlan, ...]
    message: str
    decided_at: datetime
    old_price_per_hour: float
    new_price_per_hour: float
    needs_validation: bool = False
    balanced_score: float | None = None
    # An expired or drifted node whose do-not-disrupt pods' grace period ran out (``grace``):
    # the controller marks its NodeClaim so the drain evicts those pods too.
    ends_do_not_disrupt: bool = False
    # A consolidation in waves (decision 0021): ``nodes`` go now (as many as the budgets
    # allow), ``deferred`` (node names; ``deferred_nodeclaims`` theirs) are the rest of the
    # merge, each a single-node delete of a later pass once ``replacements`` run. The prices
    # are the whole merge's. The replacements hold their room for them until
    # ``room_held_until``.
    deferred: tuple[str, ...] = ()
    deferred_nodeclaims: tuple[str, ...] = ()
    room_held_until: datetime | None = None

    @property
    def merged(self) -> tuple[str, ...]:
        """Every node of the merge: those going now, then the deferred."""
        return self.nodes + self.deferred

    @property
    def savings_per_hour(self) -> float:
        """Price removed minus price launched."""
        return self.old_price_per_hour - self.new_price_per_hour


@dataclass(frozen=True)
class BlockedNode:
    """A node that stays, and why, as an Event reason/message pair:
    ``DisruptionBlocked`` (``pdb default/web``, ``budget ...``, ``do-not-disrupt pod ...``) or
    ``Unconsolidatable`` (``would cost more``, ...)."""

    node: str
    event_reason: str
    message: str


@dataclass(frozen=True)
class DisruptionPlan:
    """One pass: decisions to act on, and the nodes that stay with why."""

    decisions: tuple[DisruptionDecision, ...]
    blocked: tuple[BlockedNode, ...]
