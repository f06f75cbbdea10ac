"""Disruption decisions: which of daiku's nodes go, why, and what replaces them. Pure: no I/O,
no clock (``now`` is an argument); the controller acts and logs.

Public surface::

    from scheduler_svc.core.disruption import (
        DisruptionSnapshot, Candidate, CandidatePod, NodePoolState, NodeClassState,
        PodDisruptionBudget, DisruptionSettings, plan_disruption, validate, explain_node,
        nodepool_hash, nodeclass_hash,
    )

    settings = DisruptionSettings.from_spec(name, nodepool["spec"])   # CRD defaults applied
    plan = plan_disruption(snapshot, now)        # DisruptionPlan: decisions + blocked nodes
    for decision in plan.decisions:              # reason, nodes, nodeclaims, replacements
        if decision.needs_validation:            # consolidation: wait 15 s, then
            validate(decision, newer_snapshot, later)   # -> Validation(is_valid, reason)
    plan.blocked                                 # BlockedNode(node, event_reason, message):
                                                 #   DisruptionBlocked / Unconsolidatable
    explain_node(snapshot, "ip-10-0-1-2", now)   # NodeExplanation(verdict, details)
    plan_repair(snapshot, now)                   # node repair: Unhealthy decisions and
                                                 #   NodeRepairBlocked (the 20 % rule)
    plan_rebalance(snapshot, now)                # rebalance recommendations (Replace pools)
    nodepool_hash(spec), nodeclass_hash(spec)    # AMIs: Candidate.image_id in ami_ids;
                                                 # subnets/SGs: recorded ids vs resolved
"""

from scheduler_svc.core.disruption.drift import (
    accepted_nodeclass_hashes,
    canonical_json,
    drift_reason,
    nodeclass_hash,
    nodepool_hash,
)
from scheduler_svc.core.disruption.explain import NodeExplanation, explain_node
from scheduler_svc.core.disruption.methods import (
    DISRUPTION_BLOCKED,
    UNCONSOLIDATABLE,
    Validation,
    expiry_reason,
    plan_disruption,
    validate,
)
from scheduler_svc.core.disruption.model import (
    DO_NOT_DISRUPT_ANNOTATIONS,
    NODECLASS_HASH_ANNOTATION,
    NODEPOOL_HASH_ANNOTATION,
    REBALANCE_RECOMMENDED_ANNOTATION,
    ROOM_HELD_FOR_ANNOTATION,
    ROOM_HELD_UNTIL_ANNOTATION,
    SECURITY_GROUP_IDS_ANNOTATION,
    SUBNET_ID_ANNOTATION,
    TERMINATION_TIMESTAMP_ANNOTATION,
    BlockedNode,
    Candidate,
    CandidatePod,
    ConsolidationOptions,
    DisruptionDecision,
    DisruptionPlan,
    DisruptionSnapshot,
    NodeClassState,
    NodeCondition,
    NodePoolState,
    PodDisruptionBudget,
)
from scheduler_svc.core.disruption.rebalance import plan_rebalance, rebalance_status
from scheduler_svc.core.disruption.repair import (
    DEFAULT_REPAIR_POLICIES,
    NODE_REPAIR_BLOCKED,
    RepairPolicy,
    nodepool_health,
    plan_repair,
    repair_status,
    unhealthy_condition,
)
from scheduler_svc.core.disruption.settings import (
    Budget,
    ConsolidationPolicy,
    DisruptionReason,
    DisruptionSettings,
    DisruptionSettingsError,
    RebalanceRecommendationPolicy,
    parse_duration,
)

__all__ = [
    "DEFAULT_REPAIR_POLICIES",
    "DISRUPTION_BLOCKED",
    "DO_NOT_DISRUPT_ANNOTATIONS",
    "NODECLASS_HASH_ANNOTATION",
    "NODEPOOL_HASH_ANNOTATION",
    "NODE_REPAIR_BLOCKED",
    "REBALANCE_RECOMMENDED_ANNOTATION",
    "ROOM_HELD_FOR_ANNOTATION",
    "ROOM_HELD_UNTIL_ANNOTATION",
    "SECURITY_GROUP_IDS_ANNOTATION",
    "SUBNET_ID_ANNOTATION",
    "TERMINATION_TIMESTAMP_ANNOTATION",
    "UNCONSOLIDATABLE",
    "BlockedNode",
    "Budget",
    "Candidate",
    "CandidatePod",
    "ConsolidationOptions",
    "ConsolidationPolicy",
    "DisruptionDecision",
    "DisruptionPlan",
    "DisruptionReason",
    "DisruptionSettings",
    "DisruptionSettingsError",
    "DisruptionSnapshot",
    "NodeClassState",
    "NodeCondition",
    "NodeExplanation",
    "NodePoolState",
    "PodDisruptionBudget",
    "RebalanceRecommendationPolicy",
    "RepairPolicy",
    "Validation",
    "accepted_nodeclass_hashes",
    "canonical_json",
    "drift_reason",
    "expiry_reason",
    "explain_node",
    "nodeclass_hash",
    "nodepool_hash",
    "nodepool_health",
    "parse_duration",
    "plan_disruption",
    "plan_rebalance",
    "plan_repair",
    "rebalance_status",
    "repair_status",
    "unhealthy_condition",
    "validate",
]
