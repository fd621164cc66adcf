"""The human-only bound: exact (Clopper–Pearson) bounds on the error rate from audited items.

One stratum (a simple random sample): the plain exact bound. Several strata with unequal
inclusion probabilities: the rate is sum_h W_h m_h with W_h = N_h / N the stratum's share of the
workload and m_h its error rate; each m_h gets an exact bound at level 1 - delta/H (Bonferroni
over the H sampled strata), and sum_h W_h U_h is then an upper bound with probability
>= 1 - delta. *Finite-sample exact*, conservative, never asymptotic.

Source: Clopper and Pearson (1934), "The use of confidence or fiducial limits illustrated in the
case of the binomial", Biometrika 26(4), 404–413; Bonferroni's inequality for the combination.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.intervals import (
    check_open_unit,
    clopper_pearson,
    clopper_pearson_upper_array,
)
from certification.stats.ppi.checks import stratum_arrays, stratum_keys
from certification.stats.ppi.results import (
    EXACT,
    NO_AUDITED_ITEMS,
    UNSAMPLED_STRATUM,
    HumanOnlyBound,
    StratumBound,
)


def human_only_bound(
    errors: ArrayLike,
    sampled: ArrayLike,
    population: ArrayLike | None = None,
    *,
    delta: float = 0.05,
    strata: Sequence[Hashable] | None = None,
    unresolved_note: str | None = None,
) -> HumanOnlyBound:
    """Exact (Clopper–Pearson) bound on the error rate from human labels alone.

    With one stratum (a simple random sample) this is the plain one-sided Clopper–Pearson
    bound on k/n at 1 - delta, and the two-sided interval at 1 - delta. With H > 1 sampled
    strata (unequal inclusion probabilities n_h / N_h), each stratum's bound is taken at
    1 - delta/H (Bonferroni) and the bounds are combined with the stratum shares W_h = N_h / N:
    the rate sum_h W_h m_h is <= sum_h W_h U_h for all strata at once with probability
    >= 1 - delta. A stratum with items but no audited item contributes its whole share (U_h = 1,
    L_h = 0) and spends no delta; the point estimate is then undefined.

    Per stratum (shape (H,)): ``errors`` k_h, ``sampled`` n_h >= k_h audited items with a
    usable label, ``population`` N_h >= max(1, n_h) items in the workload (None: one stratum);
    ``strata`` name them in the report (default 0..H-1); ``unresolved_note`` is added to the
    assumptions. Undefined (:data:`NO_AUDITED_ITEMS`) when no stratum has an audited item.

    Raises:
        StatsError: on non-integer or negative counts, mismatched shapes, k_h > n_h, n_h > N_h,
            an empty stratum, more than one stratum without population sizes, or delta outside
            (0, 1).

    Source: Clopper and Pearson (1934), "The use of confidence or fiducial limits illustrated in
    the case of the binomial", Biometrika 26(4), 404–413; Bonferroni combination over strata as
    in the module docstring. Worked example (a reference value of the tests): 5 errors in 20
    gives the one-sided 95% bound 0.4555824.
    """
    g = check_open_unit(delta, name="delta")
    k, n, big = stratum_arrays(errors, sampled, population)
    keys = stratum_keys(strata, k.size)
    sampled_mask = n > 0
    h = int(sampled_mask.sum())
    assumptions = [
        "finite-sample exact: Clopper-Pearson binomial bounds, no asymptotics",
        "the audited items of each stratum are a simple random sample chosen without looking at "
        "the human labels (i.i.d. draws of the stratum's error indicator)",
    ]
    if k.size > 1:
        assumptions.append(
            "stratified: each stratum's bound at 1 - delta/H (Bonferroni over the H sampled "
            "strata), weighted by its share N_h/N of the workload; conservative. It bounds the "
            "error rate at the workload's stratum mix; for the finite set of judged items "
            "(sampled without replacement) the binomial bound is not strictly guaranteed"
        )
    if unresolved_note:
        assumptions.append(unresolved_note)
    if h == 0:
        return HumanOnlyBound(
            method="human-only",
            estimate=None,
            lower=None,
            upper=None,
            upper_bound=None,
            confidence=1.0 - g,
            per_stratum_confidence=None,
            n_sampled=0,
            n_errors=0,
            n_strata_sampled=0,
            strata=tuple(
                StratumBound(
                    key,
                    int(big[i]) if population is not None else None,
                    0,
                    0,
                    0.0 if population is not None else None,
                    1.0,
                )
                for i, key in enumerate(keys)
            ),
            assumption=EXACT,
            assumptions=tuple(assumptions),
            notes=(),
            reason=NO_AUDITED_ITEMS,
        )
    level = 1.0 - g / h
    upper_one = clopper_pearson_upper_array(k, n, confidence=level)  # 1.0 where n_h = 0
    lower_two = np.zeros(k.size)
    upper_two = np.ones(k.size)
    for i in np.flatnonzero(sampled_mask):
        interval = clopper_pearson(int(k[i]), int(n[i]), confidence=level)
        lower_two[i], upper_two[i] = interval.lower, interval.upper
    total = int(big.sum())
    share = big / total

    def combine(values: NDArray[np.float64]) -> float:
        return min(1.0, math.fsum(share * values))

    notes: list[str] = []
    estimate: float | None = None
    if bool(sampled_mask.all()):
        estimate = math.fsum(share * (k / np.where(n > 0, n, 1)))
    else:
        notes.append(
            f"{UNSAMPLED_STRATUM}: its share counts as all errors in the upper bounds and the "
            "point estimate is undefined"
        )
    return HumanOnlyBound(
        method="human-only",
        estimate=estimate,
        lower=combine(lower_two),
        upper=combine(upper_two),
        upper_bound=combine(upper_one),
        confidence=1.0 - g,
        per_stratum_confidence=level,
        n_sampled=int(n.sum()),
        n_errors=int(k.sum()),
        n_strata_sampled=h,
        strata=tuple(
            StratumBound(
                key,
                int(big[i]) if population is not None else None,
                int(n[i]),
                int(k[i]),
                float(n[i] / big[i]) if population is not None else None,
                float(upper_one[i]),
            )
            for i, key in enumerate(keys)
        ),
        assumption=EXACT,
        assumptions=tuple(assumptions),
        notes=tuple(notes),
        reason=None,
    )
