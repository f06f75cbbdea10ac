"""Kubernetes resource quantities, parsed exactly (no floating point).

Grammar (k8s.io/apimachinery resource.Quantity):
``<signedNumber><suffix>`` where suffix is a binary SI suffix (Ki Mi Gi Ti Pi Ei), a decimal SI
suffix (m, "", k, M, G, T, P, E) or a decimal exponent (``e3``, ``E-2``). Values are exact
fractions; conversion to integer base units rounds up, as Kubernetes does for requests
(``0.1m`` of cpu is 1 milli-core, ``0.5`` bytes is 1 byte).

Bounded, so that no input costs more than microseconds: at most 64 characters, a decimal
exponent of at most two digits, and a magnitude of at most 2^63-1 (Kubernetes' own ceiling).
Without the bounds ``1e20000000`` is exact arithmetic on a twenty-million-digit integer, seconds
of CPU on every round that reads it.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+\.?\d*|\.\d+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d{1,2}|m|k|M|G|T|P|E)?$",
    re.ASCII,
)
_LONG_EXPONENT = re.compile(r"[eE][+-]?\d{3,}$", re.ASCII)
MAX_QUANTITY_TEXT = 64
MAX_QUANTITY = 2**63 - 1
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (the message quotes it)."""


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity such as ``500m``, ``1.5``, ``512Mi``, ``1G`` or ``1e3``.

    Integers and floats (as YAML gives them) are read through their decimal text.
    Raises QuantityError for anything else.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int) and abs(value) > MAX_QUANTITY:
        raise QuantityError(f"{_shown(value)} is larger than {MAX_QUANTITY} (2^63-1)")
    text = str(value) if isinstance(value, int | float) else value
    if len(text) > MAX_QUANTITY_TEXT:
        raise QuantityError(f"{_shown(value)} is longer than {MAX_QUANTITY_TEXT} characters")
    text = text.strip()
    match = _QUANTITY.match(text)
    if match is None and _LONG_EXPONENT.search(text):
        raise QuantityError(f"{_shown(value)} has an exponent beyond e99")
    if match is None:
        raise QuantityError(
            f"{_shown(value)} is not a quantity (expected e.g. 500m, 1.5, 512Mi, 1G)"
        )
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix:
        number *= Fraction(10) ** int(suffix[1:])
    if number > MAX_QUANTITY:
        raise QuantityError(f"{_shown(value)} is larger than {MAX_QUANTITY} (2^63-1)")
    return -number if match["sign"] == "-" else number


def _shown(value: str | int | float) -> str:
    """The value quoted for an error, cut short when long (a message must stay readable)."""
    if isinstance(value, int) and abs(value) > MAX_QUANTITY:
        return "an integer"  # str() of a huge int is itself slow (and refused past 4300 digits)
    text = repr(value[:41] if isinstance(value, str) else value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def ceil_units(quantity: Fraction, scale: int = 1) -> int:
    """The quantity times ``scale``, rounded up to an integer (Kubernetes rounds requests up)."""
    return math.ceil(quantity * scale)


def cpu_millis(value: str | int | float) -> int:
    """Milli-cores of a cpu quantity, rounded up: ``"1.5"`` -> 1500, ``"0.1m"`` -> 1."""
    return ceil_units(parse_quantity(value), 1000)


def to_base_units(value: str | int | float) -> int:
    """Base units (bytes, pods, devices) of a quantity, rounded up: ``"512Mi"`` -> 536870912."""
    return ceil_units(parse_quantity(value))


def resource_units(resource: str, value: str | int | float) -> int:
    """Integer units the core uses for ``resource``: milli-cores for cpu, base units otherwise."""
    return cpu_millis(value) if resource == "cpu" else to_base_units(value)
