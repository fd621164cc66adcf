"""Everything for one label level: the all-rater statistics and Cohen's kappa per rater pair."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from certification.stats.agreement.cohen import cohen_kappa, pair_table
from certification.stats.agreement.encoding import encode_ratings
from certification.stats.agreement.multi_rater import (
    alpha_statistic,
    fleiss_statistic,
    pairable_units,
    percent_statistic,
)
from certification.stats.agreement.results import (
    MISSING,
    AgreementSummary,
    EncodedRatings,
    Label,
    PairKappa,
    PairwiseKappa,
    pairs_reason,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit


def _check_raters(raters: Sequence[str]) -> tuple[str, ...]:
    names = tuple(raters)
    if isinstance(raters, str) or not all(isinstance(name, str) for name in names):
        raise StatsError("raters must be a sequence of string ids")
    if len(set(names)) != len(names):
        raise StatsError("rater ids must be unique")
    return names


def _pairs(
    encoded: EncodedRatings, raters: tuple[str, ...], confidence: float
) -> tuple[PairKappa, ...]:
    codes, k = encoded.codes, len(encoded.categories)
    present = codes != MISSING
    pairs = []
    for i in range(len(raters)):
        for j in range(i + 1, len(raters)):
            shared = present[:, i] & present[:, j]
            if not shared.any():
                continue
            table = pair_table(codes[shared, i], codes[shared, j], k)
            pairs.append(PairKappa(raters[i], raters[j], cohen_kappa(table, confidence=confidence)))
    return tuple(pairs)


def pairwise_cohen_kappa(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    confidence: float = 0.95,
) -> PairwiseKappa:
    """Cohen's kappa for every pair of raters, over the units both rated.

    ``ratings`` is n_units × n_raters (``None`` = missing), columns named by the unique
    ``raters``. One :class:`PairKappa` per pair (i < j in ``raters`` order) sharing a unit;
    each kappa may be undefined (fewer than 2 shared units, no variation); with no pair,
    ``reason`` says why (fewer than 2 raters with a rating, no shared unit).

    Raises:
        StatsError: if the matrix is ragged, the rater ids do not match its columns or repeat,
            or ``confidence`` is outside (0, 1).
    """
    names = _check_raters(raters)
    encoded = encode_ratings(ratings, n_raters=len(names))
    pairs = _pairs(encoded, names, check_open_unit(confidence, name="confidence"))
    n_raters = int((encoded.codes != MISSING).any(axis=0).sum())
    return PairwiseKappa(pairs, pairs_reason(n_raters, len(pairs)))


def agreement_summary(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    confidence: float = 0.95,
) -> AgreementSummary:
    """All agreement statistics of one label level.

    ``ratings`` is n_units × n_raters (``None`` = missing; units without a rating are ignored),
    columns named by the unique ``raters``. Undefined statistics carry a reason, never a number.

    Raises:
        StatsError: if the matrix is ragged, the rater ids do not match its columns or repeat,
            or ``confidence`` is outside (0, 1).
    """
    level = check_open_unit(confidence, name="confidence")
    names = _check_raters(raters)
    encoded = encode_ratings(ratings, n_raters=len(names))
    codes = encoded.codes
    k = len(encoded.categories)
    present = codes != MISSING
    per_category = np.bincount(codes[present], minlength=k) if k else np.zeros(0, np.int64)
    pairs = _pairs(encoded, names, level)
    return AgreementSummary(
        n_units=int(present.any(axis=1).sum()),
        n_pairable_units=int(pairable_units(codes).sum()),
        n_ratings=int(present.sum()),
        raters=tuple(name for name, used in zip(names, present.any(axis=0), strict=True) if used),
        category_counts=tuple(
            (label, int(count))
            for label, count in zip(encoded.categories, per_category, strict=True)
        ),
        alpha=alpha_statistic(codes),
        fleiss_kappa=fleiss_statistic(codes, k),
        percent_agreement=percent_statistic(codes, k),
        pairs=pairs,
        confidence=level,
        pairs_reason=pairs_reason(int(present.any(axis=0).sum()), len(pairs)),
    )
