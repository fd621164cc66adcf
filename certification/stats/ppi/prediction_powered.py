"""Prediction-powered inference for a mean: PPI (lam = 1) and PPI++ (lam tuned), weighted.

theta_lam = mean_w_u(lam f on the unlabelled items) + mean_w(Y - lam f on the labelled items),
with Horvitz–Thompson weights 1/pi rescaled to mean 1 (the Hájek form), and a normal interval:
*asymptotic (CLT)*, shown beside, never instead of, an exact bound.

Sources: Angelopoulos, Bates, Fannjiang, Jordan and Zrnic (2023), "Prediction-powered
inference", Science 382(6671), 669–674, arXiv:2301.09633 (mean estimation); Angelopoulos, Duchi
and Zrnic (2023), "PPI++: Efficient prediction-powered inference", arXiv:2311.01453 (power
tuning). The formulas, including the weighted ones, follow the authors' package ``ppi_py``
(``ppi_mean_ci``, ``_calc_lam_glm``), which the tests use as an independent reference.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.ppi.checks import normalised_weights, unit_vector, z_quantile
from certification.stats.ppi.results import (
    ASYMPTOTIC,
    FEWER_THAN_TWO_LABELLED,
    NO_UNLABELLED_ITEMS,
    PPIEstimate,
)

_CONSTANT_TOL = 1e-12  # relative: a variance this small next to the mean square is "constant"

_PPI_ASSUMPTIONS = (
    "asymptotic (CLT): coverage holds as the audit and the workload grow; with few audited items "
    "or a rate near 0 or 1 the interval can undercover",
    "the audited items are a probability sample with known inclusion probabilities pi (weights "
    "1/pi rescaled to mean 1, the Hajek form), selected without looking at the human labels",
    "the judge's labels were fixed before the audit (not tuned on audited items)",
    "variance: the i.i.d. (with-replacement) formula of the weighted terms with population "
    "variances, as ppi_py; under stratified sampling without replacement it ignores the "
    "finite-population correction and the stratification gain, so it is conservative in "
    "expectation",
)


def undefined_ppi(method: str, confidence: float, n: int, big_n: int, reason: str) -> PPIEstimate:
    """Return an undefined :class:`PPIEstimate` (every number None) with its reason."""
    return PPIEstimate(
        method=method,
        estimate=None,
        se=None,
        lower=None,
        upper=None,
        upper_bound=None,
        confidence=confidence,
        lam=None,
        n_labelled=n,
        n_unlabelled=big_n,
        imputed_mean=None,
        rectifier=None,
        imputed_se=None,
        rectifier_se=None,
        assumption=ASYMPTOTIC,
        assumptions=_PPI_ASSUMPTIONS,
        notes=(),
        reason=reason,
    )


def ppi_estimate(
    method: str,
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabelled: ArrayLike,
    *,
    delta: float,
    lam: float | None,
    weights: ArrayLike | None,
    weights_unlabelled: ArrayLike | None,
    extra_notes: tuple[str, ...] = (),
) -> PPIEstimate:
    """Return the prediction-powered estimate of a mean at a fixed or tuned lam.

    The shared body of :func:`ppi_mean` (lam = 1) and :func:`ppi_plus_plus_mean` (lam tuned
    when None); see them for the formulas. ``method`` (``"ppi"`` or ``"ppi++"``) is recorded;
    ``extra_notes`` come first in the notes. Undefined when n < 2 or N = 0.

    Raises:
        StatsError: as :func:`ppi_plus_plus_mean`.

    Source: Angelopoulos et al. (2023), Science, mean estimation; Angelopoulos, Duchi and Zrnic
    (2023), arXiv:2311.01453, power tuning.
    """
    level = 1.0 - check_open_unit(delta, name="delta")
    y_l = unit_vector(y, name="y")
    f_l = unit_vector(yhat, name="yhat")
    f_u = unit_vector(yhat_unlabelled, name="yhat_unlabelled")
    if y_l.shape != f_l.shape:
        raise StatsError(
            f"y and yhat must be aligned (one prediction per labelled item), got {y_l.shape} "
            f"and {f_l.shape}"
        )
    n, big_n = y_l.size, f_u.size
    w = normalised_weights(weights, n, name="weights")
    w_u = normalised_weights(weights_unlabelled, big_n, name="weights_unlabelled")
    if lam is not None and not (
        isinstance(lam, int | float) and not isinstance(lam, bool) and 0.0 <= lam <= 1.0
    ):
        raise StatsError(f"lam must be a number in [0, 1] or None (tuned), got {lam!r}")
    if n < 2:
        return undefined_ppi(method, level, n, big_n, FEWER_THAN_TWO_LABELLED)
    if big_n == 0:
        return undefined_ppi(method, level, n, big_n, NO_UNLABELLED_ITEMS)

    notes = list(extra_notes)
    if lam is None:
        lam_used, tuning_note = _tuned_lambda(y_l, f_l, f_u, w, w_u)
        if tuning_note:
            notes.append(tuning_note)
    else:
        lam_used = float(lam)

    imputed = w_u * (lam_used * f_u)
    rectified = w * (y_l - lam_used * f_l)
    imputed_mean = float(imputed.mean())
    rectifier = float(rectified.mean())
    estimate = imputed_mean + rectifier
    imputed_se = float(imputed.std()) / math.sqrt(big_n)
    rectifier_se = float(rectified.std()) / math.sqrt(n)
    se = math.hypot(imputed_se, rectifier_se)
    if se == 0.0:
        notes.append(
            "the estimated variance is zero, so the asymptotic interval has zero width; "
            "rely on the exact bound"
        )
    half = z_quantile(1.0 - (1.0 - level) / 2.0) * se
    return PPIEstimate(
        method=method,
        estimate=estimate,
        se=se,
        lower=estimate - half,
        upper=estimate + half,
        upper_bound=estimate + z_quantile(level) * se,
        confidence=level,
        lam=lam_used,
        n_labelled=n,
        n_unlabelled=big_n,
        imputed_mean=imputed_mean,
        rectifier=rectifier,
        imputed_se=imputed_se,
        rectifier_se=rectifier_se,
        assumption=ASYMPTOTIC,
        assumptions=_PPI_ASSUMPTIONS,
        notes=tuple(notes),
        reason=None,
    )


def _tuned_lambda(
    y: NDArray[np.float64],
    f: NDArray[np.float64],
    f_u: NDArray[np.float64],
    w: NDArray[np.float64],
    w_u: NDArray[np.float64],
) -> tuple[float, str | None]:
    """PPI++ plug-in lam for the mean, as ppi_py ``_calc_lam_glm`` (Hessian 1, clipped)."""
    n, big_n = y.size, f_u.size
    theta = float((w_u * f_u).mean() + (w * (y - f)).mean())  # the lam = 1 estimate
    grads = w * (y - theta)
    grads_hat = w * (f - theta)
    grads_hat_u = w_u * (f_u - theta)
    cov = float(((grads - grads.mean()) * (grads_hat - grads_hat.mean())).mean())
    pooled = np.concatenate([grads_hat, grads_hat_u])
    var = float(pooled.var(ddof=1))
    # decide "constant" with a relative tolerance, not == 0 (rounding leaves tiny variances)
    if var <= _CONSTANT_TOL * float(np.mean(pooled * pooled)):
        return 0.0, (
            "the judge's weighted predictions are constant, so they carry no information: "
            "lam = 0 (the classical human-only estimate)"
        )
    lam = cov / ((1.0 + n / big_n) * var)
    return float(min(1.0, max(0.0, lam))), None


def ppi_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabelled: ArrayLike,
    *,
    delta: float = 0.05,
    weights: ArrayLike | None = None,
    weights_unlabelled: ArrayLike | None = None,
) -> PPIEstimate:
    """Prediction-powered estimate of a mean (lam = 1), with its normal interval.

    theta = mean_w_u(f on unlabelled) + mean_w(Y - f on labelled); the interval is
    theta ± z_{1-delta/2} sqrt(Var(w_u f_u) / N + Var(w (Y - f)) / n) with population variances
    (ddof 0), and the one-sided bound theta + z_{1-delta} times the same standard error.

    ``y`` (labels, 0/1 or in [0, 1]) and ``yhat`` (the judge's predictions in [0, 1]) have shape
    (n,) over the labelled items; ``yhat_unlabelled`` shape (N,). For a stratified audit pass
    *every* judged item as unlabelled (audited ones included), so its mean is the workload's flag
    rate; for a simple random audit either all items or the unaudited ones. ``weights`` (shape
    (n,), > 0) are 1 / inclusion probability, rescaled to mean 1; None means equal weights, as
    for ``weights_unlabelled``. Undefined (:data:`FEWER_THAN_TWO_LABELLED`,
    :data:`NO_UNLABELLED_ITEMS`) when n < 2 or N = 0.

    Raises:
        StatsError: if an array is not 1-D, holds a value outside [0, 1], y and yhat differ in
            length, a weight is not positive and finite, or delta is outside (0, 1).

    Source: Angelopoulos et al. (2023), Science, mean estimation; equals ``ppi_py.ppi_mean_ci(Y,
    Yhat, Yhat_unlabeled, alpha=delta, lam=1, w=..., w_unlabeled=...)``. Worked example (a
    reference value of the tests): human ones at 0, 1, 2, 18, 19 of 20, judge ones at 0, 1,
    17, 18, 24 of 200 unlabelled flagged give 0.17 and 95% CI (-0.00423848, 0.34423848).
    """
    return ppi_estimate(
        "ppi",
        y,
        yhat,
        yhat_unlabelled,
        delta=delta,
        lam=1.0,
        weights=weights,
        weights_unlabelled=weights_unlabelled,
    )


def ppi_plus_plus_mean(
    y: ArrayLike,
    yhat: ArrayLike,
    yhat_unlabelled: ArrayLike,
    *,
    delta: float = 0.05,
    lam: float | None = None,
    weights: ArrayLike | None = None,
    weights_unlabelled: ArrayLike | None = None,
) -> PPIEstimate:
    """PPI++: the power-tuned prediction-powered estimate of a mean, with its normal interval.

    theta_lam = mean_w_u(lam f on unlabelled) + mean_w(Y - lam f on labelled). lam = 0 is the
    classical (human-only, weighted) mean, lam = 1 is PPI. With ``lam=None`` it is estimated as
    in ppi_py: with theta_1 the PPI estimate, g = w (Y - theta_1), g_hat = w (f - theta_1) on the
    labelled items and w_u (f_u - theta_1) on the unlabelled, lam = mean[(g - mean g)(g_hat -
    mean g_hat)] / ((1 + n/N) Var(g_hat pooled over n + N items, ddof 1)), clipped to [0, 1].
    Unweighted, this is the paper's Cov(Y, f) / ((1 + n/N) Var(f)). Tuning lam on the same data
    keeps the interval asymptotically valid (PPI++, power tuning).

    Arguments as :func:`ppi_mean`, plus ``lam``, fixed in [0, 1] or None to tune. When the
    judge's (weighted) predictions are constant, lam is 0 with a note (ppi_py divides by zero
    there).

    Raises:
        StatsError: as :func:`ppi_mean`, or if ``lam`` is outside [0, 1].

    Source: Angelopoulos, Duchi and Zrnic (2023), arXiv:2311.01453, power tuning for mean
    estimation; equals ``ppi_py.ppi_mean_ci(..., lam=None)`` and ``ppi_mean_pointestimate``
    (ppi_py 0.2.3 ignores ``alternative`` when it tunes lam; the one-sided bound here equals its
    one-sided interval at the tuned lam).

    Behaviour seen in simulation (a 100,000-item workload, 2,000 audited in 10 verdict × slice
    strata with weights differing ninefold, 2,000 audits): PPI's two-sided and one-sided 95%
    coverage 0.962 and 0.946, PPI++'s 0.948 and 0.930 with lam near 0.22 (the weighted rule
    gives a small lam when weights vary a lot; tuning on the same data makes its standard error
    slightly optimistic). Asymptotic, as labelled.
    """
    return ppi_estimate(
        "ppi++",
        y,
        yhat,
        yhat_unlabelled,
        delta=delta,
        lam=lam,
        weights=weights,
        weights_unlabelled=weights_unlabelled,
    )
