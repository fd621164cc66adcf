"""The orchestrator: the workload's error rate from the raw labels, all estimators side by side.

:func:`estimate_error_rate` checks the judge labels, the audit sample and the design's strata,
counts each stratum's items, audited items and errors, and hands them to the three estimators
(:mod:`~certification.stats.ppi.human_only`, :mod:`~certification.stats.ppi.prediction_powered`,
:mod:`~certification.stats.ppi.union`), one small step each.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.ppi.checks import label_codes
from certification.stats.ppi.human_only import human_only_bound
from certification.stats.ppi.prediction_powered import ppi_estimate, undefined_ppi
from certification.stats.ppi.results import (
    MISSING,
    NEGATIVE,
    POSITIVE,
    UNSAMPLED_STRATUM,
    ErrorRateComparison,
    HumanOnlyBound,
    JointUnionBound,
    PPIEstimate,
    UnionBound,
    UnresolvedPolicy,
)
from certification.stats.ppi.union import union_bound, union_bound_joint


@dataclass(frozen=True)
class _Design:
    """The audit's design and the used labels, counted per stratum (H strata)."""

    stratum: NDArray[np.int64]  # shape (N,), each item's stratum code 0..H-1
    keys: tuple[Hashable, ...]  # shape (H,), the strata's keys
    used_index: NDArray[np.int64]  # positions of the used audited items
    used_stratum: NDArray[np.int64]  # their strata
    y: NDArray[np.int64]  # their human labels, 1 or 0
    population: NDArray[np.int64]  # shape (H,), N_h
    sampled: NDArray[np.int64]  # shape (H,), used audited items n_h
    errors: NDArray[np.int64]  # shape (H,), human errors k_h among them
    note: str  # how unresolved audited items were treated ("" when there was none)


def _checked_labels(
    judge: ArrayLike,
    audited: ArrayLike,
    human: ArrayLike,
    unresolved: str,
    unavailable_prediction: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The judge codes (N,), the audited positions (n,) and the human codes (n,), checked."""
    judge_codes = label_codes(judge, name="judge")
    human_codes = label_codes(human, name="human")
    index = np.asarray(audited)
    if index.ndim != 1 or (
        index.size and (index.dtype == np.bool_ or not np.issubdtype(index.dtype, np.integer))
    ):
        raise StatsError("audited must be a one-dimensional array of integer positions")
    index = index.astype(np.int64, copy=False)
    big_n = judge_codes.size
    if big_n == 0:
        raise InsufficientDataError("the workload has no judged item")
    if index.shape != human_codes.shape:
        raise StatsError(
            f"audited and human must be aligned, got {index.shape} and {human_codes.shape}"
        )
    if index.size and (int(index.min()) < 0 or int(index.max()) >= big_n):
        raise StatsError(f"audited positions must lie in [0, {big_n})")
    if np.unique(index).size != index.size:
        raise StatsError("audited positions must be distinct")
    if unresolved not in ("count-as-error", "exclude"):
        raise StatsError(f"unresolved must be 'count-as-error' or 'exclude', got {unresolved!r}")
    if isinstance(unavailable_prediction, bool) or not (0.0 <= unavailable_prediction <= 1.0):
        raise StatsError("unavailable_prediction must be a number in [0, 1]")
    return judge_codes, index, human_codes


def _stratum_codes(
    strata: ArrayLike | None, big_n: int
) -> tuple[NDArray[np.int64], tuple[Hashable, ...]]:
    """Each item's stratum code (N,) and the strata's sorted keys (one ``"all"`` when None)."""
    if strata is None:
        return np.zeros(big_n, dtype=np.int64), ("all",)
    labels = np.asarray(strata)
    if labels.shape != (big_n,):
        raise StatsError(f"strata must have shape ({big_n},), got {labels.shape}")
    try:
        unique, stratum = np.unique(labels, return_inverse=True)
    except TypeError as exc:
        raise StatsError(f"strata must be mutually sortable values: {exc}") from None
    keys = tuple(v.item() if isinstance(v, np.generic) else v for v in unique)
    return stratum, keys


def _used_labels(
    human_codes: NDArray[np.int64], unresolved: str
) -> tuple[NDArray[np.bool_], NDArray[np.int64], str]:
    """Which audited items are used, their labels (1 or 0) and the note on unresolved ones."""
    is_unresolved = human_codes == MISSING
    if unresolved == "count-as-error":
        used = np.ones(human_codes.size, dtype=bool)
        y = np.where(is_unresolved, POSITIVE, human_codes)
        note = "unresolved audited items count as errors (conservative for upper bounds)"
    else:
        used = ~is_unresolved
        y = human_codes[used]
        note = "unresolved audited items are excluded (missing at random within their stratum)"
    if not is_unresolved.any():
        note = ""
    return used, y, note


def _design(
    stratum: NDArray[np.int64],
    keys: tuple[Hashable, ...],
    index: NDArray[np.int64],
    human_codes: NDArray[np.int64],
    unresolved: str,
) -> _Design:
    """Count each stratum's items, used audited items and human errors."""
    used, y, note = _used_labels(human_codes, unresolved)
    used_index = index[used]
    used_stratum = stratum[used_index]
    n_strata = len(keys)
    return _Design(
        stratum=stratum,
        keys=keys,
        used_index=used_index,
        used_stratum=used_stratum,
        y=y,
        population=np.bincount(stratum, minlength=n_strata),
        sampled=np.bincount(used_stratum, minlength=n_strata),
        errors=np.bincount(used_stratum[y == POSITIVE], minlength=n_strata),
        note=note,
    )


def _human_only(design: _Design, delta: float) -> HumanOnlyBound:
    """The human-only exact bound from the per-stratum counts."""
    return human_only_bound(
        design.errors,
        design.sampled,
        design.population,
        delta=delta,
        strata=design.keys,
        unresolved_note=design.note or None,
    )


def _prediction_powered(
    design: _Design,
    judge_codes: NDArray[np.int64],
    *,
    stratified: bool,
    unavailable_prediction: float,
    delta: float,
) -> tuple[PPIEstimate, PPIEstimate]:
    """PPI and PPI++: every judged item is unlabelled; audited items carry weight N_h / n_h."""
    big_n = judge_codes.size
    n_used = design.used_index.size
    predictions = np.where(
        judge_codes == MISSING, float(unavailable_prediction), judge_codes.astype(np.float64)
    )
    extra = (design.note,) if design.note else ()
    if bool(np.any(design.sampled == 0)) and n_used:
        return (
            undefined_ppi("ppi", 1.0 - delta, n_used, big_n, UNSAMPLED_STRATUM),
            undefined_ppi("ppi++", 1.0 - delta, n_used, big_n, UNSAMPLED_STRATUM),
        )
    weights = None
    if stratified and n_used:
        weights = (design.population / np.maximum(design.sampled, 1))[design.used_stratum]
    y_float = design.y.astype(np.float64)
    f_labelled = predictions[design.used_index]
    ppi, ppi_pp = (
        ppi_estimate(
            method,
            y_float,
            f_labelled,
            predictions,
            delta=delta,
            lam=lam,
            weights=weights,
            weights_unlabelled=None,
            extra_notes=extra,
        )
        for method, lam in (("ppi", 1.0), ("ppi++", None))
    )
    return ppi, ppi_pp


def _union(design: _Design, judge_codes: NDArray[np.int64], delta: float) -> UnionBound:
    """Union bound: flags (unavailable included) over all items; misses among judge-negatives."""
    big_n = judge_codes.size
    n_strata = len(design.keys)
    negative = judge_codes == NEGATIVE
    neg_population = np.bincount(design.stratum[negative], minlength=n_strata)
    neg_used = judge_codes[design.used_index] == NEGATIVE
    neg_sampled = np.bincount(design.used_stratum[neg_used], minlength=n_strata)
    neg_missed = np.bincount(
        design.used_stratum[neg_used & (design.y == POSITIVE)], minlength=n_strata
    )
    keep = neg_population > 0
    return union_bound(
        int(big_n - negative.sum()),
        big_n,
        neg_missed[keep],
        neg_sampled[keep],
        neg_population[keep],
        delta=delta,
        strata=[key for key, kept in zip(design.keys, keep, strict=True) if kept],
        unresolved_note=design.note or None,
    )


def _union_joint(
    design: _Design, judge_codes: NDArray[np.int64], delta: float, *, stratified: bool
) -> JointUnionBound:
    """Joint union bound: flags over all items; unflagged errors among all used audited items."""
    unflagged = judge_codes[design.used_index] == NEGATIVE
    return union_bound_joint(
        int(judge_codes.size - (judge_codes == NEGATIVE).sum()),
        int(judge_codes.size),
        int((unflagged & (design.y == POSITIVE)).sum()),
        int(design.used_index.size),
        delta=delta,
        stratified=stratified,
        unresolved_note=design.note or None,
    )


def estimate_error_rate(
    judge: ArrayLike,
    audited: ArrayLike,
    human: ArrayLike,
    *,
    strata: ArrayLike | None = None,
    delta: float = 0.05,
    unresolved: UnresolvedPolicy = "count-as-error",
    unavailable_prediction: float = 1.0,
) -> ErrorRateComparison:
    """Estimate the workload's error rate three ways: human-only, PPI / PPI++, union bound.

    ``judge`` (shape (N,)) labels every workload item 1 flagged (error), 0 not flagged, -1
    unavailable; ``audited`` (shape (n,)) holds distinct positions in ``judge`` and ``human``
    their resolved labels, 1 error, 0 no error, -1 unresolved. ``strata`` (shape (N,), sortable,
    e.g. codes of verdict × slice) is each item's stratum in the audit design, None for a simple
    random sample; inclusion probabilities are n_h / N_h over the used audited items.
    ``unresolved``: ``"count-as-error"`` (every upper bound stays valid whatever the label turns
    out to be) or ``"exclude"`` (assumes missing at random within the stratum).
    ``unavailable_prediction`` in [0, 1] is PPI's judge prediction where the judge is unavailable
    (default 1: a flag, like the union bound).

    PPI takes every judged item as the unlabelled set (its mean is then the workload's flag
    rate) and the used audited items as the labelled set, weighted N_h / n_h; PPI and PPI++ are
    undefined (:data:`UNSAMPLED_STRATUM`) when a stratum with items has no used audited item,
    because the judge's bias there cannot be estimated.

    Raises:
        InsufficientDataError: if the workload is empty.
        StatsError: on codes other than 1, 0, -1, misaligned arrays, audited positions out of
            range or repeated, a policy other than the two above, or delta outside (0, 1).

    Source: Clopper and Pearson (1934), Biometrika 26(4), 404–413 (the exact bounds);
    Angelopoulos et al. (2023), Science 382(6671), 669–674, and Angelopoulos, Duchi and Zrnic
    (2023), arXiv:2311.01453 (PPI and PPI++); the package docstring for how they combine.
    """
    g = check_open_unit(delta, name="delta")
    judge_codes, index, human_codes = _checked_labels(
        judge, audited, human, unresolved, unavailable_prediction
    )
    stratum, keys = _stratum_codes(strata, judge_codes.size)
    design = _design(stratum, keys, index, human_codes, unresolved)
    human_only = _human_only(design, g)
    ppi, ppi_pp = _prediction_powered(
        design,
        judge_codes,
        stratified=strata is not None,
        unavailable_prediction=unavailable_prediction,
        delta=g,
    )
    return ErrorRateComparison(
        human_only=human_only,
        ppi=ppi,
        ppi_plus_plus=ppi_pp,
        union=_union(design, judge_codes, g),
        union_joint=_union_joint(design, judge_codes, g, stratified=strata is not None),
        delta=g,
        n_population=int(judge_codes.size),
        n_audited=int(index.size),
        n_unresolved=int((human_codes == MISSING).sum()),
        n_unavailable=int((judge_codes == MISSING).sum()),
        unresolved_policy=unresolved,
        unavailable_prediction=float(unavailable_prediction),
    )
