"""McNemar's exact test on discordant pairs (proportions: :mod:`certification.stats.intervals`).

McNemar (1947), "Note on the sampling error of the
difference between correlated proportions or percentages", Psychometrika 12(2), 153–157, exact
(binomial) form as in ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from certification.stats.intervals import Proportion, check_count, proportion_of

__all__ = ["McNemarExact", "Proportion", "mcnemar_exact", "proportion_of"]


@dataclass(frozen=True)
class McNemarExact:
    """McNemar's exact test of marginal homogeneity on the binary core.

    H0: P(evaluator positive, human negative) = P(evaluator negative, human positive), i.e. the
    evaluator flags as often as people do. Under H0, given the n discordant items, the false
    positives are Binomial(n, 1/2).

    b = ``false_negatives`` (evaluator negative, human positive: statsmodels' b for the table
    ``[[TP, FN], [FP, TN]]``) and c = ``false_positives``; ``statistic`` = min(b, c);
    ``p_value`` = min(1, 2 P[Binomial(n, 1/2) <= min(b, c)]), two-sided exact, in (0, 1]; 1 with
    no discordant item (no information; a p-value of 1 never rejects).
    """

    false_negatives: int
    false_positives: int
    n_discordant: int
    statistic: int
    p_value: float


def mcnemar_exact(false_negatives: int, false_positives: int) -> McNemarExact:
    """McNemar's exact (binomial) test from the two discordant counts.

    The tail sum is exact rational arithmetic, so the p-value is the correctly rounded
    2 sum_{i <= min(b, c)} C(n, i) / 2^n.

    Raises:
        StatsError: if a count is not a non-negative integer.

    Source: McNemar (1947); ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``
    (``2 * binom.cdf(min(b, c), b + c, 0.5)``, capped at 1). Check: b = 10, c = 5 gives
    0.3017578125.
    """
    b = check_count(false_negatives, name="false_negatives")
    c = check_count(false_positives, name="false_positives")
    n = b + c
    low = min(b, c)
    tail = Fraction(sum(math.comb(n, i) for i in range(low + 1)), 2**n)
    return McNemarExact(
        false_negatives=b,
        false_positives=c,
        n_discordant=n,
        statistic=low,
        p_value=float(min(Fraction(1), 2 * tail)),
    )
