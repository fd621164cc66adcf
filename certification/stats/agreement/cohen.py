"""Cohen's kappa of two raters, from a k × k contingency table or from two label sequences.

Cohen (1960), "A coefficient of agreement for nominal scales", Educational and Psychological
Measurement 20(1), 37–46, with the large-sample standard error of Fleiss, Cohen and Everitt (1969),
"Large sample standard errors of kappa and weighted kappa", Psychological Bulletin 72(5), 323–327,
a Wald interval, and the same paper's standard error under the null hypothesis kappa = 0 with its
z test: the same numbers as ``statsmodels.stats.inter_rater.cohens_kappa`` (``std_kappa``,
``kappa_low``/``kappa_upp``, ``std_kappa0``, ``z_value``, ``pvalue_two_sided``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from certification.stats.agreement.encoding import check_table, encode_ratings, normal_quantile
from certification.stats.agreement.results import (
    FEWER_THAN_TWO_SHARED_UNITS,
    NO_VARIATION,
    CohenKappa,
    Label,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit


def cohen_kappa(table: ArrayLike, *, confidence: float = 0.95) -> CohenKappa:
    """Cohen's kappa of a two-rater contingency table, with standard error and Wald interval.

    ``table[i, j]`` (k × k integers) counts units rater A labelled i and rater B j, categories
    in the same order on both axes; 0.95 ``confidence`` gives z = 1.959964. Kappa is undefined
    ("fewer than 2 units rated by both raters") under 2 units, and ("no variation") when the
    expected agreement is 1 (both raters used one and the same label throughout); observed
    agreement is still reported. Computed from integer counts, perfect agreement gives exactly
    1.0.

    Raises:
        StatsError: if the table is not square, not integer, or has a negative count, or
            ``confidence`` is outside (0, 1).

    The standard error is the large-sample (non-null) one of Fleiss, Cohen and Everitt (1969),
    eq. 13, exactly as ``statsmodels.stats.inter_rater.cohens_kappa(table).std_kappa``:
    var = [sum_i p_ii (1 - (p_i. + p_.i)(1 - k))^2 + (1 - k)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
    - (k - p_e (1 - k))^2] / ((1 - p_e)^2 n). The interval is kappa ± z·se, clipped to [-1, 1]
    (the range of kappa); unclipped it equals statsmodels' ``kappa_low``/``kappa_upp``.

    The null standard error (Fleiss, Cohen and Everitt 1969, eq. 14, kappa = 0 with the
    observed marginals): var0 = [p_e + p_e^2 - sum_i p_i. p_.i (p_i. + p_.i)] / ((1 - p_e)^2 n);
    z = kappa / se0 and the two-sided p-value 2 P(Z >= |z|). When one rater used a single
    label on every shared unit, kappa is 0 whatever the other rater did and both standard errors
    are 0; so too when the raters used no label in common: z is then undefined (None).

    The standard error is a large-sample one: with k categories, Cicchetti and Fleiss (1977),
    "Comparison of the null distributions of weighted kappa and the C ordinal statistic", Applied
    Psychological Measurement 1(2), 195–201, found it adequate from about n = 2k² units. Below
    that, or when the standard error is 0 (every unit agreed: the interval has no width), the
    figures are still returned, and ``interval_reason`` says why they are not to be read.
    Check: [[20, 5], [10, 15]] gives kappa 0.4, se 0.126996, 95% CI
    (0.151092, 0.648908).
    """
    counts = check_table(table)
    level = check_open_unit(confidence, name="confidence")
    n = int(counts.sum())
    if n == 0:
        return CohenKappa(0, None, None, None, None, None, None, level, FEWER_THAN_TWO_SHARED_UNITS)
    rows = [int(v) for v in counts.sum(axis=1)]
    cols = [int(v) for v in counts.sum(axis=0)]
    agree = int(np.trace(counts))
    chance = sum(r * c for r, c in zip(rows, cols, strict=True))  # n**2 * p_e, exactly
    p_o = agree / n
    p_e = chance / (n * n)
    if n < 2:
        return CohenKappa(n, p_o, p_e, None, None, None, None, level, FEWER_THAN_TWO_SHARED_UNITS)
    if chance == n * n:
        return CohenKappa(n, p_o, p_e, None, None, None, None, level, NO_VARIATION)
    # kappa = (p_o - p_e) / (1 - p_e) with both multiplied by n**2: exact in integers.
    kappa = (n * agree - chance) / (n * n - chance)

    p = counts / n
    p_row = np.asarray(rows, dtype=float) / n
    p_col = np.asarray(cols, dtype=float) / n
    diag = np.diag(p)
    term_a = float((diag * (1.0 - (p_row + p_col) * (1.0 - kappa)) ** 2).sum())
    off = p * (p_col[:, None] + p_row[None, :]) ** 2
    np.fill_diagonal(off, 0.0)
    term_b = (1.0 - kappa) ** 2 * float(off.sum())
    term_c = (kappa - p_e * (1.0 - kappa)) ** 2
    variance = (term_a + term_b - term_c) / ((1.0 - p_e) ** 2 * n)
    # Algebraically >= 0 (0 at perfect agreement); rounding can leave a tiny negative.
    se = math.sqrt(max(variance, 0.0))
    half = normal_quantile(level) * se
    single = min(sum(1 for r in rows if r), sum(1 for c in cols if c)) == 1
    null_variance = (p_e + p_e * p_e - float((p_row * p_col * (p_row + p_col)).sum())) / (
        (1.0 - p_e) ** 2 * n
    )
    se0 = math.sqrt(max(null_variance, 0.0))
    z = None if single or chance == 0 else kappa / se0
    return CohenKappa(
        n=n,
        observed_agreement=p_o,
        expected_agreement=p_e,
        kappa=kappa,
        se=se,
        ci_low=max(-1.0, kappa - half),
        ci_high=min(1.0, kappa + half),
        confidence=level,
        reason=None,
        interval_reason=_interval_reason(n, counts.shape[0], agree, chance, single=single),
        se0=se0,
        z=z,
        p_value=None if z is None else float(2.0 * norm.sf(abs(z))),
    )


# Why a kappa's standard errors, interval and z test are not to be read.
SINGLE_LABEL = (
    "not meaningful: one rater used a single label on every shared unit, so kappa is 0 "
    "whatever the other rater did and its standard errors are 0"
)
NO_COMMON_LABEL = (
    "not meaningful: the raters used no label in common, so kappa is 0 and its standard "
    "errors are 0"
)
ALL_AGREE = "not meaningful: the standard error is 0 when every shared unit agrees"


def _interval_reason(n: int, k: int, agree: int, chance: int, *, single: bool) -> str | None:
    """Why a kappa's large-sample standard errors and interval are not meaningful, or None.

    Decided on the integer counts, not on a computed standard error that rounding may leave
    a hair above 0: a rater with a single label, or two raters without a label in common
    (chance agreement 0), give se = se0 = 0 exactly in exact arithmetic, and perfect agreement
    gives se = 0.
    """
    if single:
        return SINGLE_LABEL
    if chance == 0:
        return NO_COMMON_LABEL
    if n < 2 * k * k:
        return (
            f"not meaningful on {n} shared units: the large-sample interval needs about "
            f"2k² = {2 * k * k} for k = {k} labels"
        )
    if agree == n:
        return ALL_AGREE
    return None


def contingency_table(
    labels_a: Sequence[Label | None], labels_b: Sequence[Label | None]
) -> tuple[NDArray[np.int64], tuple[Label, ...]]:
    """Cross-tabulate two raters' labels over the units both rated.

    ``labels_b`` are for the same units; ``None`` = not rated. ``table`` is k × k ``int64``,
    rater A on rows, over the k labels either rater used on a shared unit, in ``categories``
    order (sorted by ``repr``).

    Raises:
        StatsError: if the sequences have different lengths.
    """
    if len(labels_a) != len(labels_b):
        raise StatsError(
            f"both raters need one entry per unit, got {len(labels_a)} and {len(labels_b)}"
        )
    encoded = encode_ratings(
        [
            (a, b)
            for a, b in zip(labels_a, labels_b, strict=True)
            if a is not None and b is not None
        ],
        n_raters=2,
    )
    table = pair_table(encoded.codes[:, 0], encoded.codes[:, 1], len(encoded.categories))
    return table, encoded.categories


def pair_table(a: NDArray[np.int64], b: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """The k x k table of two raters' paired codes (row: ``a``, column: ``b``)."""
    return np.bincount(a * k + b, minlength=k * k).astype(np.int64).reshape(k, k)


def cohen_kappa_labels(
    labels_a: Sequence[Label | None],
    labels_b: Sequence[Label | None],
    *,
    confidence: float = 0.95,
) -> CohenKappa:
    """Cohen's kappa of two raters from their labels, over the units both rated.

    Returns :func:`cohen_kappa` of :func:`contingency_table`.

    Raises:
        StatsError: as :func:`contingency_table` and :func:`cohen_kappa`.

    Check: A ``S S S S S U U U N N``, B ``S S S S U U U N N N`` gives
    percent agreement 0.8 and kappa 9/13.
    """
    table, _ = contingency_table(labels_a, labels_b)
    return cohen_kappa(table, confidence=confidence)
