"""The requirements algebra: operators, intersection, compatibility with NodePools."""

import pytest

from scheduler_svc.core.requirements import (
    Operator,
    Requirement,
    RequirementError,
    Requirements,
)

ARCH = "kubernetes.io/arch"


@pytest.mark.parametrize(
    ("requirement", "value", "allowed"),
    [
        (Requirement("k", Operator.IN, ("a", "b")), "a", True),
        (Requirement("k", Operator.IN, ("a", "b")), "c", False),
        (Requirement("k", Operator.IN, ("a",)), None, False),
        (Requirement("k", Operator.NOT_IN, ("a",)), "a", False),
        (Requirement("k", Operator.NOT_IN, ("a",)), None, True),
        (Requirement("k", Operator.EXISTS), "x", True),
        (Requirement("k", Operator.EXISTS), None, False),
        (Requirement("k", Operator.DOES_NOT_EXIST), None, True),
        (Requirement("k", Operator.DOES_NOT_EXIST), "x", False),
        (Requirement("k", Operator.GT, ("4",)), "5", True),
        (Requirement("k", Operator.GT, ("4",)), "4", False),
        (Requirement("k", Operator.GT, ("4",)), "x", False),
        (Requirement("k", Operator.LT, ("4",)), "3", True),
        (Requirement("k", Operator.LT, ("4",)), "4", False),
        (Requirement("k", Operator.GTE, ("4",)), "4", True),
        (Requirement("k", Operator.LTE, ("4",)), "4", True),
        (Requirement("k", Operator.LTE, ("4",)), "5", False),
    ],
)
def test_operator_semantics(requirement: Requirement, value: str | None, allowed: bool) -> None:
    """Each operator admits exactly the label values (or absence) Kubernetes says it does."""
    assert requirement.value_set().allows(value) is allowed


@pytest.mark.parametrize(
    ("a", "b", "empty"),
    [
        (Requirement("k", Operator.IN, ("a", "b")), Requirement("k", Operator.IN, ("b",)), False),
        (Requirement("k", Operator.IN, ("a",)), Requirement("k", Operator.NOT_IN, ("a",)), True),
        (Requirement("k", Operator.GT, ("4",)), Requirement("k", Operator.LT, ("5",)), True),
        (Requirement("k", Operator.GT, ("4",)), Requirement("k", Operator.LT, ("6",)), False),
        (Requirement("k", Operator.IN, ("3", "8")), Requirement("k", Operator.GT, ("4",)), False),
        (Requirement("k", Operator.IN, ("3",)), Requirement("k", Operator.GT, ("4",)), True),
        (Requirement("k", Operator.EXISTS), Requirement("k", Operator.DOES_NOT_EXIST), True),
        (
            Requirement("k", Operator.NOT_IN, ("a",)),
            Requirement("k", Operator.DOES_NOT_EXIST),
            False,
        ),
    ],
)
def test_intersection(a: Requirement, b: Requirement, empty: bool) -> None:
    """Intersecting two requirements on a key is empty exactly when nothing satisfies both."""
    assert a.value_set().intersect(b.value_set()).is_empty() is empty


def test_conflict_names_key_and_pool_side() -> None:
    """A pod requiring arm64 against an amd64-only NodePool conflicts with a readable reason."""
    pod = Requirements.of([Requirement(ARCH, Operator.IN, ("arm64",))])
    pool = Requirements.of([Requirement(ARCH, Operator.IN, ("amd64",))])
    reason = pod.conflict(pool)
    assert reason is not None
    assert "kubernetes.io/arch In [arm64]" in reason
    assert "kubernetes.io/arch In [amd64]" in reason


def test_undefined_custom_label_conflicts_but_well_known_does_not() -> None:
    """A custom label the NodePool does not set cannot be required; a well-known one can."""
    pool = Requirements()
    custom = Requirements.of([Requirement("team", Operator.IN, ("ml",))])
    well_known = Requirements.of(
        [Requirement("karpenter.k8s.aws/instance-family", Operator.IN, ("m5",))]
    )
    absent_ok = Requirements.of([Requirement("team", Operator.NOT_IN, ("ml",))])
    assert custom.conflict(pool) is not None
    assert well_known.conflict(pool) is None
    assert absent_ok.conflict(pool) is None


def test_invalid_requirements_raise() -> None:
    """Operators given the wrong number or kind of values are rejected."""
    with pytest.raises(RequirementError):
        Requirement("k", Operator.IN, ())
    with pytest.raises(RequirementError):
        Requirement("k", Operator.GT, ("x",))
    with pytest.raises(RequirementError):
        Requirement("k", Operator.EXISTS, ("x",))
