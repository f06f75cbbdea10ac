"""daiku's scheduling core: pure, synchronous, no I/O, no clock.

Public surface::

    from scheduler_svc.core import solve, SchedulingInput, Pod, Node, NodePool, InstanceType

    result = solve(SchedulingInput(pods=..., nodepools=..., instance_types=..., nodes=...,
                                   daemonsets=..., unavailable_offerings=frozenset(...)))
    result.new_claims           # tuple[NodeClaimPlan]: nodepool, requirements, pods ("ns/name"),
                                #   requests, offerings (OfferingOption: instance_type, zone,
                                #   capacity_type, price_per_hour), cheapest first; offerings[0]
                                #   is the choice (claim.instance_type / claim.price_per_hour)
    result.existing_placements  # tuple[ExistingPlacement]: node name, pods
    result.unschedulable        # tuple[UnschedulablePod]: pod, reason (a sentence to act on)

Inputs are small frozen dataclasses in integer base units (``cpu_millis``, ``memory_bytes``);
``quantity`` parses Kubernetes quantities exactly, ``requirements`` holds the label algebra.
``unavailable_offerings`` excludes offerings the actuator reported exhausted. Same input, same
plan, however loaded the machine (``solve(..., packing=PackingSettings(...))`` sets which
batches the integer program improves and its work budget, counted, not timed).
``explain_pod`` says, for one pod, which NodePools and how many instance types each
constraint ruled out.
"""

from scheduler_svc.core.explain import PodExplanation, explain_pod
from scheduler_svc.core.integer_packing import PackingSettings
from scheduler_svc.core.model import (
    ExistingPlacement,
    HostPort,
    InitContainer,
    InstanceType,
    LabelSelector,
    NamespaceScope,
    Node,
    NodeClaimPlan,
    NodePool,
    NodePoolLimits,
    Offering,
    OfferingOption,
    Pod,
    PodAffinityTerm,
    PreferredNodeAffinityTerm,
    RelaxedPod,
    Resources,
    SchedulingInput,
    SchedulingResult,
    TopologySpreadConstraint,
    UnavailableOffering,
    UnschedulablePod,
    WeightedPodAffinityTerm,
    WhenUnsatisfiable,
)
from scheduler_svc.core.quantity import QuantityError, cpu_millis, parse_quantity, to_base_units
from scheduler_svc.core.requirements import Operator, Requirement, RequirementError, Requirements
from scheduler_svc.core.solver import solve
from scheduler_svc.core.taints import Taint, TaintEffect, Toleration

__all__ = [
    "ExistingPlacement",
    "HostPort",
    "InitContainer",
    "InstanceType",
    "LabelSelector",
    "NamespaceScope",
    "Node",
    "NodeClaimPlan",
    "NodePool",
    "NodePoolLimits",
    "Offering",
    "OfferingOption",
    "Operator",
    "PackingSettings",
    "Pod",
    "PodAffinityTerm",
    "PodExplanation",
    "PreferredNodeAffinityTerm",
    "QuantityError",
    "RelaxedPod",
    "Requirement",
    "RequirementError",
    "Requirements",
    "Resources",
    "SchedulingInput",
    "SchedulingResult",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TopologySpreadConstraint",
    "UnavailableOffering",
    "UnschedulablePod",
    "WeightedPodAffinityTerm",
    "WhenUnsatisfiable",
    "cpu_millis",
    "explain_pod",
    "parse_quantity",
    "solve",
    "to_base_units",
]
