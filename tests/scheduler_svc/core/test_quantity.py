"""Kubernetes quantity grammar, exactly."""

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
