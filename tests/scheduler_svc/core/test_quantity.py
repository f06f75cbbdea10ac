"""Kubernetes quantity grammar, exactly."""

import time
from fractions import Fraction

import pytest

from scheduler_svc.core.quantity import QuantityError, cpu_millis, parse_quantity, to_base_units


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("512Mi", 512 * 1024**2),
        ("1G", 10**9),
        ("1e3", 1000),
        ("1E3", 1000),
        ("0.5Gi", 1024**3 // 2),
        ("2Ki", 2048),
        ("1k", 1000),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+3", 3),
        ("-1", -1),
        ("1E", 10**18),
        ("3e-3", Fraction(3, 1000)),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity_exact(text: str | int | float, value: Fraction | int) -> None:
    """Each quantity form parses to its exact value."""
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.5.5", "Mi", "1mi", "1 Gi", "1Gb", "abc", "1e", "--1"])
def test_parse_quantity_rejects_garbage(text: str) -> None:
    """Strings outside the grammar raise QuantityError quoting them."""
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "millis"), [("500m", 500), ("1.5", 1500), ("0.1m", 1), ("2", 2000), ("1e-3", 1)]
)
def test_cpu_millis_round_up(text: str, millis: int) -> None:
    """cpu converts to millicores, rounding fractions of a millicore up like Kubernetes."""
    assert cpu_millis(text) == millis


def test_bytes_round_up() -> None:
    """Memory converts to whole bytes, rounding up."""
    assert to_base_units("512Mi") == 536870912
    assert to_base_units("1.5") == 2
    assert to_base_units("1G") == 1_000_000_000


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1e20000000", "exponent beyond e99"),
        ("1e-20000000", "exponent beyond e99"),
        ("1e99", "larger than 9223372036854775807"),
        ("9223372036854775808", "larger than"),
        ("8Ei", "larger than"),
        (10**40, "an integer is larger than"),
        ("1" * 65, "longer than 64 characters"),
        (" " * 10_000_000 + "1", "longer than 64 characters"),
        ("\u0661", "is not a quantity"),
    ],
)
def test_quantities_past_the_bounds_are_refused_at_once(value: str | int, says: str) -> None:
    """A quantity with a long exponent, above 2^63-1, longer than 64 characters or with
    non-ASCII digits is a QuantityError saying which bound, within a millisecond (the
    unbounded parse of 1e20000000 took seconds)."""
    started = time.process_time()
    with pytest.raises(QuantityError, match=says):
        parse_quantity(value)
    assert time.process_time() - started < 0.01


def test_the_largest_quantities_still_parse() -> None:
    """Kubernetes' ceiling 2^63-1 and 7Ei are quantities."""
    assert parse_quantity("9223372036854775807") == 2**63 - 1
    assert parse_quantity("7Ei") == 7 * 1024**6
    assert parse_quantity("1e18") == 10**18
