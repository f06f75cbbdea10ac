"""How requirements read to a person (events, `daiku explain`, drift reasons, NodePool status),
and the value-set queries the solver and topology build on: the exact texts, and which sets
have a single or a finite list of values."""

from __future__ import annotations

import pytest

from scheduler_svc.core.requirements import (
    Operator,
    Requirement,
    RequirementError,
    Requirements,
    ValueSet,
    contradiction,
)

ZONE = "topology.kubernetes.io/zone"
ARCH = "kubernetes.io/arch"


def value_set(*requirements: Requirement) -> ValueSet:
    found = Requirements.of(requirements).get(requirements[0].key)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("requirement", "text"),
    [
        (Requirement("k", Operator.IN, ("b", "a")), "k In [b, a]"),
        (Requirement("k", Operator.NOT_IN, ("a",)), "k NotIn [a]"),
        (Requirement("k", Operator.EXISTS), "k Exists"),
        (Requirement("k", Operator.GT, ("4",)), "k Gt [4]"),
    ],
)
def test_a_written_requirement_reads_as_written(requirement: Requirement, text: str) -> None:
    """A requirement reads key, operator and its values in the order they were written."""
    assert requirement.describe() == text


@pytest.mark.parametrize(
    ("requirements", "text"),
    [
        ([Requirement("k", Operator.IN, ("b", "a"))], "k In [a, b]"),
        ([Requirement("k", Operator.DOES_NOT_EXIST)], "k DoesNotExist"),
        ([Requirement("k", Operator.NOT_IN, ("b", "a"))], "k NotIn [a, b]"),
        ([Requirement("k", Operator.EXISTS)], "k Exists"),
        ([Requirement("k", Operator.GT, ("4",))], "k > 4"),
        ([Requirement("k", Operator.LT, ("4",))], "k < 4"),
        ([Requirement("k", Operator.GTE, ("4",))], "k > 3"),
        (
            [Requirement("k", Operator.GT, ("2",)), Requirement("k", Operator.LT, ("9",))],
            "k > 2 and k < 9",
        ),
        (
            [Requirement("k", Operator.NOT_IN, ("5",)), Requirement("k", Operator.GT, ("2",))],
            "k NotIn [5] and k > 2",
        ),
        (
            [Requirement("k", Operator.IN, ("1", "5", "7")), Requirement("k", Operator.GT, ("2",))],
            "k In [5, 7]",
        ),
    ],
)
def test_a_value_set_reads_as_its_simplest_requirements(
    requirements: list[Requirement], text: str
) -> None:
    """The merged set on a key reads as the requirements that admit exactly its values:
    sorted values, bounds as > and <, both joined by "and", Exists when nothing narrows it."""
    assert value_set(*requirements).describe("k") == text


def test_contradiction_quotes_every_term_on_the_key_and_only_those() -> None:
    """The message names the key and each requirement written on it, none on other keys."""
    found = contradiction(
        [
            Requirement("team", Operator.IN, ("a",)),
            Requirement(ARCH, Operator.IN, ("amd64",)),
            Requirement("team", Operator.IN, ("b",)),
        ],
        {},
    )
    assert found == "the requirements on team admit no value (team In [a], team In [b])"


def test_first_unmet_names_the_requirement_a_node_fails() -> None:
    """Drift names the NodePool requirement a node's labels no longer meet (None: all met)."""
    pool = Requirements.of(
        [Requirement(ARCH, Operator.IN, ("amd64",)), Requirement(ZONE, Operator.IN, ("a", "b"))]
    )
    assert pool.first_unmet({ARCH: "amd64", ZONE: "b"}) is None
    assert pool.first_unmet({ARCH: "amd64", ZONE: "c"}) == f"{ZONE} In [a, b]"
    assert pool.first_unmet({ARCH: "arm64", ZONE: "a"}) == f"{ARCH} In [amd64]"
    assert pool.first_unmet({ZONE: "a"}) == f"{ARCH} In [amd64]"


def test_as_dict_maps_each_key_to_its_value_set() -> None:
    """Every key written appears once, with the intersection of what was written on it."""
    requirements = Requirements.of(
        [
            Requirement(ZONE, Operator.IN, ("a", "b")),
            Requirement(ARCH, Operator.EXISTS),
            Requirement(ZONE, Operator.NOT_IN, ("b",)),
        ]
    )
    assert requirements.as_dict() == {
        ZONE: ValueSet(False, False, frozenset({"a"})),
        ARCH: ValueSet(False, True, frozenset()),
    }


@pytest.mark.parametrize(
    ("requirements", "single"),
    [
        ([Requirement("k", Operator.IN, ("a",))], "a"),
        ([Requirement("k", Operator.IN, ("a", "b"))], None),
        ([Requirement("k", Operator.NOT_IN, ("a",))], None),
        ([Requirement("k", Operator.EXISTS)], None),
        ([Requirement("k", Operator.DOES_NOT_EXIST)], None),
        ([Requirement("k", Operator.IN, ("a", "b")),
          Requirement("k", Operator.NOT_IN, ("b",))], "a"),
    ],
)  # fmt: skip
def test_single_value_only_when_the_label_must_have_exactly_one_value(
    requirements: list[Requirement], single: str | None
) -> None:
    """A set names its single value only when every admitted node carries that one value."""
    assert value_set(*requirements).single_value() == single


def test_single_value_is_none_when_absence_is_also_admitted() -> None:
    """A set admitting one value or no label at all has no single value (a node without the
    label satisfies it too)."""
    assert ValueSet(True, False, frozenset({"a"})).single_value() is None


@pytest.mark.parametrize(
    ("requirements", "finite"),
    [
        ([Requirement("k", Operator.IN, ("a", "b"))], frozenset({"a", "b"})),
        ([Requirement("k", Operator.DOES_NOT_EXIST)], frozenset()),
        ([Requirement("k", Operator.NOT_IN, ("a",))], None),
        ([Requirement("k", Operator.EXISTS)], None),
        ([Requirement("k", Operator.GT, ("1",))], None),
    ],
)
def test_finite_values_only_for_a_list_of_values(
    requirements: list[Requirement], finite: frozenset[str] | None
) -> None:
    """In lists its values; sets defined by what they exclude (NotIn, Exists, bounds) have no
    finite list."""
    assert value_set(*requirements).finite_values() == finite


def test_conflict_on_a_label_the_pool_does_not_set_names_the_requirement_and_key() -> None:
    pod = Requirements.of([Requirement("team", Operator.IN, ("ml",))])
    assert pod.conflict(Requirements()) == (
        "requires team In [ml] but the NodePool does not set team"
    )


def test_a_label_the_pool_leaves_open_does_not_hide_a_conflict_on_a_later_key() -> None:
    """A pod key the NodePool does not mention (and need not: absence is admitted) is passed
    over; the keys after it are still checked."""
    pod = Requirements.of(
        [Requirement("aaa-team", Operator.NOT_IN, ("x",)), Requirement(ZONE, Operator.IN, ("a",))]
    )
    pool = Requirements.of([Requirement(ZONE, Operator.IN, ("b",))])
    assert pod.conflict(pool) == f"requires {ZONE} In [a] but the NodePool has {ZONE} In [b]"


@pytest.mark.parametrize(
    ("operator", "values", "message"),
    [
        (Operator.IN, (), "k In: needs at least one value"),
        (Operator.EXISTS, ("x",), "k Exists: takes no values"),
        (Operator.GT, ("x",), "k Gt: needs exactly one integer"),
    ],
)
def test_an_invalid_requirement_says_which_key_and_operator(
    operator: Operator, values: tuple[str, ...], message: str
) -> None:
    with pytest.raises(RequirementError) as info:
        Requirement("k", operator, values)
    assert str(info.value) == message
