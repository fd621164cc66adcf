"""Near-silent raters: people who almost never give anything but the default label.

Definition (per label level). The *default label* is the label most labels of the level carry
(ties broken by the sorted label order): the answer "admissible", the claim "supported" in a
typical project, i.e. "nothing to flag". A *flag* is any other label. For rater r:

- f_r / n_r: r's flags over r's labels (with its exact two-sided Clopper–Pearson interval);
- p_others: the other raters' flags over their labels **on the units r labelled** (the same
  items, so a rater who happened to get easy items is not compared with the hard ones).

r is near-silent when n_r >= ``min_labels`` and both hold:

1. f_r / n_r <= ``ratio`` × p_others: far below the others (``ratio`` 0.25 by default: at most a
   quarter of the others' rate);
2. the interval's upper bound is below p_others: the gap is not chance at the interval's level.

A rater whose units nobody else labelled has no comparison (``others_rate`` None) and is never
near-silent.

This is a screening flag for a manager, not a test of a hypothesis about the person: it says
the rater's labels carry little information about the items, and the agreement figures can be
shown with the rater left out (:func:`certification.stats.agreement.krippendorff_alpha_nominal`
on the remaining columns) without changing any label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from certification.stats.errors import StatsError
from certification.stats.intervals import Proportion, check_open_unit
from certification.stats.reliability.rates import Label, check_shape, rate

# A quarter of the others' rate: "far below" (the FaithBench near-silent annotators flag about
# one twentieth as often as their batch-mates).
NEAR_SILENT_RATIO = 0.25
# Fewer labels than this say too little about a person to call them silent.
NEAR_SILENT_MIN_LABELS = 20


@dataclass(frozen=True)
class Silence:
    """One rater's flag rate against the others' on the same units.

    ``flags`` is the rater's flags / labels with its exact interval; ``others_rate`` the other
    raters' flag share on the units this rater labelled (None when nobody else did);
    ``near_silent`` applies the module docstring's rule; ``default_label`` is None when the level
    has no label.
    """

    rater: str
    default_label: Label | None
    flags: Proportion
    others_rate: float | None
    near_silent: bool


def default_label(ratings: Sequence[Sequence[Label | None]]) -> Label | None:
    """The label most labels carry (ties: the first in sorted order); None without labels."""
    counts = Counter(v for row in ratings for v in row if v is not None)
    if not counts:
        return None
    top = max(counts.values())
    return min(label for label, count in counts.items() if count == top)


def near_silence(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    ratio: float = NEAR_SILENT_RATIO,
    min_labels: int = NEAR_SILENT_MIN_LABELS,
    confidence: float = 0.95,
) -> tuple[Silence, ...]:
    """Each rater's flag rate, the others' on the same units, and whether r is near-silent.

    ``ratings`` is n_units × n_raters labels (``None`` = not labelled); ``ratio`` in (0, 1) is
    the "far below" factor; a rater needs ``min_labels`` >= 1 labels before the flag can be
    raised. Raters with a label come in ``raters`` order.

    Raises:
        StatsError: ragged ratings, duplicate raters, ratio or confidence outside (0, 1),
            min_labels < 1.
    """
    check_shape(ratings, raters)
    check_open_unit(ratio, name="ratio")
    if min_labels < 1:
        raise StatsError(f"min_labels must be >= 1, got {min_labels}")
    default = default_label(ratings)
    results = []
    for column, rater in enumerate(raters):
        own = [row for row in ratings if row[column] is not None]
        if not own:
            continue
        flags = sum(row[column] != default for row in own)
        others = [v for row in own for j, v in enumerate(row) if j != column and v is not None]
        others_rate = sum(v != default for v in others) / len(others) if others else None
        flag_rate = rate(flags, len(own), confidence=confidence)
        silent = (
            others_rate is not None
            and len(own) >= min_labels
            and flags / len(own) <= ratio * others_rate
            and flag_rate.interval is not None
            and flag_rate.interval.upper < others_rate
        )
        results.append(
            Silence(
                rater=rater,
                default_label=default,
                flags=flag_rate,
                others_rate=others_rate,
                near_silent=silent,
            )
        )
    return tuple(results)
