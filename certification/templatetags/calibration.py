"""Template filters of the calibration pages: numbers as stored results write them."""

from __future__ import annotations

import math
from typing import Any

from django import template

from certification.formatting import p_value_text
from certification.models import CalibrationRun
from certification.selectors import calibration_run_trigger_text
from certification.services.releases.card import certifying_methods

register = template.Library()

DASH = "—"


@register.filter
def num(value: object, digits: int = 4) -> str:
    """Format a stored number: ``"inf"`` as ∞, None as —, floats to ``digits`` significant digits.

    Integers (counts) are printed as they are.
    """
    if value is None or value == "":
        return DASH
    if value == "inf":
        return "∞"
    if value == "-inf":
        return "−∞"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        number = float(str(value))
    except ValueError:
        return str(value)
    if math.isinf(number):
        return "∞" if number > 0 else "−∞"
    return f"{number:.{int(digits)}g}"


@register.filter
def pct(value: object) -> str:
    """Format a proportion in [0, 1] as a percentage with two decimals (— when undefined)."""
    if value is None or value == "" or isinstance(value, bool):
        return DASH
    try:
        return f"{100 * float(str(value)):.2f}%"
    except ValueError:
        return str(value)


@register.filter
def get(mapping: object, key: object) -> object:
    """Return ``mapping[key]`` or None."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def pvalue(value: object) -> str:
    """Format a p-value so that a tiny one never reads as 0.0000 (see ``p_value_text``)."""
    return p_value_text(value)


@register.filter
def run_trigger(run: CalibrationRun) -> str:
    """What started a calibration run, in words (``calibration_run_trigger_text``)."""
    return calibration_run_trigger_text(run)


@register.filter
def certifies_alone(entry: dict[str, Any]) -> list[str]:
    """The methods of a release's named run that certify on their own (``certifying_methods``)."""
    return certifying_methods(entry)
