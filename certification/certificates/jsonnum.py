"""JSON-safe numbers for stored results: infinities as strings, NaN as null, fractions as text.

JSON has no infinity, so every number of a result that can be infinite is written as the string
``"inf"`` (or ``"-inf"``); :func:`from_num` reads it back.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any


def num(value: float | int | Fraction | Decimal | None) -> float | int | str | None:
    """Return a JSON-safe number: a float unless None/bool/int; ``"inf"``/``"-inf"``, NaN None."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    number = float(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return number


def from_num(value: Any) -> float | None:
    """Read a number written by :func:`num` (``"inf"`` -> ``math.inf``).

    Raises:
        ValueError: if ``value`` is a string other than a number or ``"inf"``/``"-inf"``.
        TypeError: if ``value`` is neither a number nor a string.
    """
    if value is None:
        return None
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return float(value)


def fraction_text(value: Fraction | None) -> str | None:
    """Return a fraction as ``"numerator/denominator"`` (exact), or None for None."""
    return None if value is None else f"{value.numerator}/{value.denominator}"
