"""Requirement operators against a brute-force oracle written from the Kubernetes definition.

Kubernetes (node affinity, ``NodeSelectorRequirement``): ``In`` needs the label with one of the
values; ``NotIn`` admits a node without the label or with another value; ``Exists`` needs the
label, ``DoesNotExist`` its absence; ``Gt``/``Lt`` need the label, parsed as an integer, above /
below the single value. Karpenter adds ``Gte``/``Lte`` (at or above / at or below) on NodePools.
Several requirements hold together when each one does, whichever side (pod, NodePool, instance
type) wrote it. Every operator, with and without the label, is checked alone, in every pair and
(through the solver) across pod x NodePool x instance type.
"""

from __future__ import annotations

import itertools

import pytest

from scheduler_svc.core import InstanceType, NodePool, Pod, SchedulingInput, solve
from scheduler_svc.core.catalog_index import CatalogIndex, iter_bits
from scheduler_svc.core.requirements import Operator, Requirement, Requirements
from tests.scheduler_svc.core.builders import instance_type, pod

# A well-known label (every launched node gets it from its instance type), so a NodePool need
# not set it for a pod to require it.
KEY = "karpenter.k8s.aws/instance-generation"
# Label values the oracle is evaluated on: absent, integers either side of every bound, text.
VALUES: tuple[str | None, ...] = (None, "0", "1", "2", "3", "x")
# A wider set of present values, to decide whether anything at all satisfies a requirement.
WITNESSES: tuple[str | None, ...] = (None, *(str(n) for n in range(-3, 7)), "x", "y")


def oracle(requirement: Requirement, value: str | None) -> bool:  # noqa: PLR0911 - one return per operator
    """Whether a node whose ``requirement.key`` label is ``value`` (None: absent) satisfies it,
    straight from the definitions above."""
    op, values = requirement.operator, requirement.values
    if op is Operator.IN:
        return value is not None and value in values
    if op is Operator.NOT_IN:
        return value is None or value not in values
    if op is Operator.EXISTS:
        return value is not None
    if op is Operator.DOES_NOT_EXIST:
        return value is None
    if value is None:
        return False
    try:
        number = int(value)
    except ValueError:
        return False
    bound = int(values[0])
    return {
        Operator.GT: number > bound,
        Operator.LT: number < bound,
        Operator.GTE: number >= bound,
        Operator.LTE: number <= bound,
    }[op]


def _all_requirements() -> list[Requirement]:
    texts = ("1", "2", "x")
    listed = [c for size in (1, 2) for c in itertools.combinations(texts, size)]
    out = [Requirement(KEY, Operator.IN, values) for values in listed]
    out += [Requirement(KEY, Operator.NOT_IN, values) for values in listed]
    out += [Requirement(KEY, Operator.EXISTS), Requirement(KEY, Operator.DOES_NOT_EXIST)]
    out += [
        Requirement(KEY, op, (bound,))
        for op in (Operator.GT, Operator.LT, Operator.GTE, Operator.LTE)
        for bound in ("1", "2")
    ]
    return out


REQUIREMENTS = _all_requirements()
PAIRS = list(itertools.product(REQUIREMENTS, repeat=2))


def _labels(value: str | None) -> dict[str, str]:
    return {} if value is None else {KEY: value}


def test_every_operator_alone_matches_the_oracle() -> None:
    """One requirement admits exactly the values (and absence) the definition admits."""
    for requirement in REQUIREMENTS:
        for value in WITNESSES:
            expected = oracle(requirement, value)
            assert requirement.value_set().allows(value) is expected, (requirement, value)
            assert Requirements.of([requirement]).matches(_labels(value)) is expected


def test_every_pair_intersects_as_the_oracle_says() -> None:
    """Two requirements on one key (pod and NodePool, or two lines of one term) admit exactly
    the values both admit; the intersection is empty exactly when no value satisfies both, and
    the NodePool conflicts with the pod exactly then."""
    for mine, theirs in PAIRS:
        merged = Requirements.of([mine]).intersect(Requirements.of([theirs]))
        for value in WITNESSES:
            expected = oracle(mine, value) and oracle(theirs, value)
            assert merged.matches(_labels(value)) is expected, (mine, theirs, value)
        satisfiable = any(oracle(mine, v) and oracle(theirs, v) for v in WITNESSES)
        assert mine.value_set().intersect(theirs.value_set()).is_empty() is not satisfiable
        conflict = Requirements.of([mine]).conflict(Requirements.of([theirs]))
        assert (conflict is None) is satisfiable, (mine, theirs)


def test_written_back_requirements_admit_the_same_values() -> None:
    """A merged pair written back as requirements (how a NodeClaim carries them) admits the
    same values as the pair."""
    for mine, theirs in PAIRS:
        merged = Requirements.of([mine]).intersect(Requirements.of([theirs]))
        if merged.get(KEY) is not None and merged.get(KEY).is_empty():  # type: ignore[union-attr]
            continue  # nothing to write: no node satisfies it
        written = Requirements.of(merged.to_requirements())
        for value in WITNESSES:
            assert written.matches(_labels(value)) is merged.matches(_labels(value))


def _catalog() -> tuple[InstanceType, ...]:
    """One type per value of ``KEY`` in ``VALUES`` (``none`` lacks the label), same shape and
    price, so only requirements tell them apart."""
    types = []
    for value in VALUES:
        name = f"t-{value or 'none'}"
        labels = {} if value is None else {KEY: value}
        types.append(instance_type(name, 4, 16, 0.2, labels=labels, zones=("zone-a",)))
    return tuple(types)


CATALOG = _catalog()
TYPE_VALUE = {f"t-{value or 'none'}": value for value in VALUES}


def test_catalog_compatibility_matches_the_oracle_for_every_pair() -> None:
    """The catalog index admits exactly the instance types whose label (or its absence)
    satisfies both the pod's and the NodePool's requirement."""
    index = CatalogIndex(CATALOG, ("cpu", "memory", "pods", "ephemeral-storage"))
    for mine, theirs in PAIRS:
        merged = Requirements.of([mine]).intersect(Requirements.of([theirs]))
        admitted = {index.names[p] for p in iter_bits(index.compatible(merged))}
        expected = {
            name
            for name, value in TYPE_VALUE.items()
            if oracle(mine, value) and oracle(theirs, value)
        }
        assert admitted == expected, (mine, theirs)


def _pod_requiring(requirement: Requirement) -> Pod:
    return pod("p", 1, 1, required_node_affinity=((requirement,),))


@pytest.mark.parametrize("pool_requirement", REQUIREMENTS, ids=Requirement.describe)
def test_solver_launches_only_types_all_three_sides_admit(pool_requirement: Requirement) -> None:
    """For a pod requirement x NodePool requirement x instance-type label, the pod's claim
    lists exactly the types satisfying both, and the pod is unschedulable when none does."""
    nodepool = NodePool("default", requirements=(pool_requirement,))
    for pod_requirement in REQUIREMENTS:
        result = solve(SchedulingInput((_pod_requiring(pod_requirement),), (nodepool,), CATALOG))
        expected = {
            name
            for name, value in TYPE_VALUE.items()
            if oracle(pod_requirement, value) and oracle(pool_requirement, value)
        }
        launched = {o.instance_type for c in result.new_claims for o in c.offerings}
        assert launched == expected, (pod_requirement, pool_requirement)
        assert (len(result.unschedulable) == 1) is (not expected)


def test_pod_not_in_survives_a_nodepool_not_in_on_the_same_key() -> None:
    """A pod's NotIn [zone-a] under a NodePool's NotIn [zone-c] launches in neither zone
    (neither side's excluded values are dropped when the two NotIn sets meet)."""
    zone = "topology.kubernetes.io/zone"
    nodepool = NodePool("default", requirements=(Requirement(zone, Operator.NOT_IN, ("zone-c",)),))
    avoiding_a = pod(
        "p", 1, 1, required_node_affinity=((Requirement(zone, Operator.NOT_IN, ("zone-a",)),),)
    )
    types = (instance_type("m5.large", 2, 8, 0.096),)
    result = solve(SchedulingInput((avoiding_a,), (nodepool,), types))
    (claim,) = result.new_claims
    assert {o.zone for o in claim.offerings} == {"zone-b"}


@pytest.mark.parametrize("operator", [Operator.LT, Operator.GT, Operator.LTE, Operator.GTE])
def test_numeric_operators_reject_a_type_without_the_label(operator: Operator) -> None:
    """Gt/Lt (and Gte/Lte) never admit an instance type lacking the label, even when every
    type carrying it is ruled out by the bound."""
    labelled = instance_type(
        "m5.large", 2, 8, 0.096, labels={"karpenter.k8s.aws/instance-cpu": "2"}
    )
    bare = instance_type("x1.large", 2, 8, 0.05)
    bound = "100" if operator in (Operator.LT, Operator.LTE) else "0"
    requirement = Requirement("karpenter.k8s.aws/instance-cpu", operator, (bound,))
    result = solve(
        SchedulingInput(
            (pod("p", 1, 1, required_node_affinity=((requirement,),)),),
            (NodePool("default"),),
            (labelled, bare),
        )
    )
    (claim,) = result.new_claims
    assert {o.instance_type for o in claim.offerings} == {"m5.large"}
    assert not Requirements.of([requirement]).matches({})
