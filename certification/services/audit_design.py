"""What an evaluator audit's computations share: the judge's verdict, the sample's design, JSON.

Both the fixed-n figures (``certification.services.audit``) and the anytime-valid ones
(``certification.services.audit_anytime``) read an evaluator's verdict on a row, the design of
the evaluator's latest audit sample, and store their results as JSON primitives; they import
these from here. Loads no statistics (NumPy is imported by :func:`to_json` when it runs).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from certification.models import AuditReport, FlagWhen
from certification.selectors import AuditRow

#: The evaluator labels of a thresholded score (flag = positive).
FLAG, PASS = "flag", "pass"
#: How a thresholded score is compared with the threshold, by ``flag_when``.
FLAG_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    FlagWhen.LT: operator.lt,
    FlagWhen.LE: operator.le,
    FlagWhen.GT: operator.gt,
    FlagWhen.GE: operator.ge,
}


def evaluator_verdict(report: AuditReport, row: AuditRow) -> str | None:
    """Return the evaluator's label for the audit (None = unavailable, never a verdict).

    A thresholded evaluator says :data:`FLAG` or :data:`PASS` from its score; an available
    label without the needed score (or score without label) is unavailable for the audit.
    """
    if not row.available:
        return None
    if report.score_threshold is not None:
        if row.score is None:
            return None
        return FLAG if FLAG_OPERATORS[report.flag_when](row.score, report.score_threshold) else PASS
    return row.label


@dataclasses.dataclass(frozen=True)
class ActiveDesign:
    """The latest audit sample of an evaluator when it is active.

    Attributes:
        sample_id: the :class:`~certification.models.AuditSample` id.
        seed: its seed.
        population: item id -> (inclusion probability, predicted error probability), recorded
            at the draw for every item labelled then.
        members: the drawn item ids.
        floor: the design's floor share.
    """

    sample_id: int
    seed: int
    population: dict[int, tuple[float, float]]
    members: frozenset[int]
    floor: float


@dataclasses.dataclass(frozen=True)
class SampleDesign:
    """The latest audit sample of an evaluator, as the estimates need it.

    Attributes:
        sample_id: the :class:`~certification.models.AuditSample` id.
        seed: its seed.
        strata: item id -> stratum key, for every item labelled when the sample was drawn.
        members: item id -> inclusion probability of the sampled items.
    """

    sample_id: int
    seed: int
    strata: dict[int, str]
    members: dict[int, float]


def to_json(value: Any) -> Any:
    """Return a stats result as JSON primitives (dataclasses as dicts; NaN/inf as None)."""
    import numpy as np

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(to_json(v) for v in value)
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, Fraction | Decimal):
        return str(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
