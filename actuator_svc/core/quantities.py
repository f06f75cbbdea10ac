"""Kubernetes resource quantities ("500m", "7577Mi", "20Gi") to and from base units."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

_SUFFIXES: Final = {
    "Ki": Decimal(1024),
    "Mi": Decimal(1024**2),
    "Gi": Decimal(1024**3),
    "Ti": Decimal(1024**4),
    "Pi": Decimal(1024**5),
    "Ei": Decimal(1024**6),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(1000),
    "M": Decimal(1000**2),
    "G": Decimal(1000**3),
    "T": Decimal(1000**4),
    "P": Decimal(1000**5),
    "E": Decimal(1000**6),
}
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$"
)


# Kubernetes keeps a quantity in an int64 of its smallest unit; nothing larger means anything,
# and a short text such as "1e999990" would otherwise cost seconds of CPU to turn into an int.
MAX_QUANTITY: Final = Decimal(2**63 - 1)
MAX_QUANTITY_CHARACTERS: Final = 64
# A quick bound on the decimal exponent before any arithmetic (2**63 * 1024**6 < 1e38).
_MAX_ADJUSTED_EXPONENT: Final = 38


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity string in base units; ValueError when it is not one or when
    its magnitude exceeds MAX_QUANTITY (checked before any costly arithmetic)."""
    if len(text) > MAX_QUANTITY_CHARACTERS:
        raise ValueError(f"a quantity has at most {MAX_QUANTITY_CHARACTERS} characters")
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity") from exc
    if number and number.adjusted() > _MAX_ADJUSTED_EXPONENT:
        raise ValueError(f"{text!r} is out of range (at most {MAX_QUANTITY})")
    value = number * _SUFFIXES[match.group(2)]
    if abs(value) > MAX_QUANTITY:
        raise ValueError(f"{text!r} is out of range (at most {MAX_QUANTITY})")
    return value


def parse_cpu_millis(text: str) -> int:
    """A cpu quantity ("1", "250m") in millicores, rounded up."""
    millis = parse_quantity(text) * 1000
    return int(millis.to_integral_value(rounding="ROUND_CEILING"))


def parse_bytes(text: str) -> int:
    """A memory or storage quantity in bytes, rounded up."""
    return int(parse_quantity(text).to_integral_value(rounding="ROUND_CEILING"))


def format_cpu(cpu_millis: int) -> str:
    """Millicores as Kubernetes writes them: whole cores plainly, otherwise in m."""
    return str(cpu_millis // 1000) if cpu_millis % 1000 == 0 else f"{cpu_millis}m"


def format_bytes(amount_bytes: int) -> str:
    """Bytes in the largest binary suffix that divides them exactly (Gi, Mi, Ki or none)."""
    for suffix, factor in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if amount_bytes and amount_bytes % factor == 0:
            return f"{amount_bytes // factor}{suffix}"
    return str(amount_bytes)
