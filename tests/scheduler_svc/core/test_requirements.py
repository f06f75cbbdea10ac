"""The requirements algebra: operators, intersection, compatibility with NodePools."""

import pytest

from scheduler_svc.core.requirements import (
    Operator,
    Requirement,
    RequirementError,
    Requirements,
    contradiction,
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


def _req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, Operator(operator), values)


@pytest.mark.parametrize(
    ("requirements", "labels", "says"),
    [
        (
            [_req("karpenter.sh/capacity-type", "In", "spot"),
             _req("karpenter.sh/capacity-type", "NotIn", "spot")],
            {},
            "requirements on karpenter.sh/capacity-type admit no value",
        ),
        ([_req("team", "In", "a"), _req("team", "In", "b")], {}, "on team admit no value"),
        ([_req("node.kubernetes.io/instance-type", "DoesNotExist")], {}, "admit no value"),
        ([_req("karpenter.k8s.aws/instance-cpu", "Gt", "8"),
          _req("karpenter.k8s.aws/instance-cpu", "Lt", "4")], {}, "admit no value"),
        ([_req("team", "In", "b")], {"team": "a"}, "label team=a is excluded by team In [b]"),
        ([_req("team", "DoesNotExist")], {"team": "a"}, "label team=a is excluded"),
    ],
)  # fmt: skip
def test_contradictory_nodepool_requirements_are_named(
    requirements: list[Requirement], labels: dict[str, str], says: str
) -> None:
    """Requirements no node can meet (on a key every node has or one they insist on), or a
    template label they exclude, are a contradiction naming the key."""
    found = contradiction(requirements, labels)
    assert found is not None
    assert says in found


@pytest.mark.parametrize(
    ("requirements", "labels"),
    [
        ([_req("karpenter.sh/capacity-type", "In", "spot", "on-demand"),
          _req("karpenter.sh/capacity-type", "NotIn", "spot")], {}),
        ([_req("team", "DoesNotExist")], {}),
        ([_req("team", "NotIn", "b")], {"team": "a"}),
        ([], {"team": "a"}),
    ],
)  # fmt: skip
def test_satisfiable_nodepool_requirements_are_no_contradiction(
    requirements: list[Requirement], labels: dict[str, str]
) -> None:
    """Requirements some node can meet, with labels they admit, are not a contradiction."""
    assert contradiction(requirements, labels) is None
