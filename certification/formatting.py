"""How the certification pages and commands print numbers that need care (p-values)."""

from __future__ import annotations

import math

DASH = "—"
# Below this a p-value is printed in scientific notation: four decimals would show 0.0000.
SCIENTIFIC_BELOW = 1e-4


def p_value_text(value: object) -> str:
    """Return a p-value as text that never reads as zero.

    Args:
        value: a p-value in [0, 1] (a float, or a number stored as text), or None.

    Returns:
        ``"—"`` for None; four decimals from 0.0001 up (``"0.0312"``); scientific notation
        below (``"3.20e-07"``); ``"< 1e-300"`` for a p-value that underflowed to 0.0.
    """
    if value is None or value == "":
        return DASH
    try:
        number = float(str(value))
    except ValueError:
        return str(value)
    if math.isnan(number):
        return DASH
    if number == 0.0:
        return "< 1e-300"
    if number < SCIENTIFIC_BELOW:
        return f"{number:.2e}"
    return f"{number:.4f}"
