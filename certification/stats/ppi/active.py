"""Active inference: label where the judge is uncertain, estimate the error rate by IPW.

Setting. Each of N items has the judge's predicted error probability f_i in [0, 1] (a score read
as a probability, or a 0/1 verdict). Item i is labelled by people with a known probability pi_i,
independently (Poisson sampling: xi_i ~ Bernoulli(pi_i)), and pi_i is recorded when the sample
is drawn. The target is the error rate theta = (1/N) sum_i Y_i of the N items (Y_i = 1 when people
label item i an error).

Design (:func:`active_inclusion_probabilities`). pi_i grows with the judge's uncertainty u_i:
pi_i = min(1, s q_i) with q_i = (1 - tau) u_i / mean(u) + tau, the mix of the uncertainty rule
with the uniform one (the paper's pi^(tau) = (1 - tau) eta u + tau n_b / n), and s chosen so
that sum_i pi_i = n_b, the label budget (items capped at 1 hand their excess to the others).
Every item keeps pi_i >= tau n_b / N, the floor that bounds the weights 1 / pi_i. For a
calibrated probability p the variance-optimal uncertainty is u = sqrt(p (1 - p)), the
conditional standard deviation of Y - p (Sec. 3: pi(x) proportional to sqrt(E[(Y - f(X))^2 |
X = x])); the authors' experiments use min(p, 1 - p), which ranks items the same way. A 0/1
verdict has no uncertainty to rank by: u is constant and the design is uniform.

Estimator (:func:`active_ppi_mean`). theta = (1/N) sum_i [f_i + (Y_i - f_i) xi_i / pi_i],
unbiased for theta because E[xi_i / pi_i] = 1 (Horvitz–Thompson). The interval is theta ± z_{1 -
delta/2} sigma / sqrt(N), sigma the standard deviation (ddof 0) of the N summands, as in the
authors' code: *asymptotic (CLT)*, valid as N and the labels grow, never exact. The paper's
power-tuned variant (lam f in place of f, lam fitted on the same labels) is not offered: in
simulation with a miscalibrated judge and 100 labels of 1,000 items its 95% interval covered
0.93 of 2,000 studies, below nominal, while lam = 1 held 0.95.

Labels a uniform design would need. With xi ~ Bernoulli(pi), Var(summand) = Var(Y) + E[e^2 (1 -
pi) / pi], e = Y - f. A uniform design at rate m / N has Var(Y) + E[e^2] (N / m - 1); the
two are equal at m = N E[e^2] / E[e^2 / pi] (Var(Y) cancels). Both moments are estimated from
the labelled items by inverse-probability weighting: E[e^2] by (1/N) sum xi e^2 / pi, E[e^2 /
pi] by (1/N) sum xi e^2 / pi^2. The saving is 1 - (expected labels of the active design) / m.

Source: Zrnic and Candès (2024), "Active Statistical Inference", ICML, PMLR 235,
arXiv:2403.03208: Sec. 3 (the estimator, its variance and the optimal sampling rule), Sec. 5
(the mix with the uniform rule, budgets in expectation); authors' code
github.com/tijana-zrnic/active-inference (notebooks ``pew79-post-election-research``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.ppi.checks import unit_vector, z_quantile
from certification.stats.ppi.results import ASYMPTOTIC, Assumption

#: Default floor share tau: every item keeps at least tau times the uniform rate n_b / N.
#: Chosen by simulation (the coverage tests): weights up to 1 / (tau rate) stay tame enough for
#: the normal interval at a few hundred labels; the paper tunes tau on held-out data instead.
DEFAULT_FLOOR = 0.2

ACTIVE_ASSUMPTIONS = (
    "asymptotic (CLT): coverage holds as the workload and the labels grow; with few labels, "
    "or large weights 1/pi on items the judge got wrong, the interval can undercover",
    "each item was labelled with its recorded probability pi, drawn independently before any "
    "human label was seen (Poisson sampling)",
    "the judge's predictions were fixed before the draw (not tuned on the labelled items)",
    "the target is the error rate of the N items judged when the sample was drawn",
)


def judge_uncertainty(predictions: ArrayLike) -> NDArray[np.float64]:
    """Return u = sqrt(p (1 - p)), the judge's uncertainty for a predicted error probability p.

    A 0/1 verdict gives u = 0 everywhere (the design is then uniform). Values lie in [0, 0.5].

    Raises:
        StatsError: if a value is outside [0, 1] or the array is not 1-D.

    Source: Zrnic and Candès (2024), arXiv:2403.03208, Sec. 3: the optimal rule is
    proportional to sqrt(E[(Y - f(X))^2 | X]), which is sqrt(p (1 - p)) for a calibrated p.
    """
    p = unit_vector(predictions, name="predictions")
    return np.sqrt(p * (1.0 - p))


def _design_shape(u: NDArray[np.float64], floor: float) -> NDArray[np.float64]:
    """q_i = (1 - floor) u_i / mean(u) + floor, or 1 everywhere when every u_i is 0."""
    mean_u = float(u.mean())
    return np.ones(u.size) if mean_u == 0.0 else (1.0 - floor) * u / mean_u + floor


def active_inclusion_probabilities(
    uncertainty: ArrayLike, *, budget: float, floor: float = DEFAULT_FLOOR
) -> NDArray[np.float64]:
    """Return inclusion probabilities that grow with uncertainty and sum to the budget.

    pi_i = min(1, s q_i), q_i = (1 - floor) u_i / mean(u) + floor, with s set so that sum pi_i
    = budget exactly (water-filling: items capped at 1 are fixed and the rest rescaled). When
    every u_i is equal (or all zero), pi_i = budget / N: the uniform design.

    ``uncertainty`` (shape (N,)) holds nonnegative finite u_i on any scale; ``budget`` is the
    expected number of labels n_b, 0 < n_b <= N; ``floor`` is tau in (0, 1], the uniform rule's
    share of the mix, so every pi_i >= tau n_b / N. Returns shape (N,), in (0, 1].

    Raises:
        StatsError: on an empty, non-1-D, negative or non-finite uncertainty, a budget outside
            (0, N], or a floor outside (0, 1].

    Source: Zrnic and Candès (2024), arXiv:2403.03208, Sec. 3 and 5 (pi^(tau) = (1 - tau) eta
    u + tau n_b / n); the redistribution of the excess over 1 keeps the budget in expectation,
    where the authors' code clips at 1 and so spends less.
    """
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or u.size == 0:
        raise StatsError("uncertainty must be a non-empty one-dimensional array")
    if not np.all(np.isfinite(u)) or bool(np.any(u < 0)):
        raise StatsError("uncertainty must be finite and nonnegative")
    big_n = u.size
    if isinstance(budget, bool) or not (0 < budget <= big_n):
        raise StatsError(f"budget must lie in (0, {big_n}], got {budget!r}")
    if isinstance(floor, bool) or not (0 < floor <= 1):
        raise StatsError(f"floor must lie in (0, 1], got {floor!r}")
    shape = _design_shape(u, floor)
    capped = np.zeros(big_n, dtype=bool)
    while True:
        # scale the uncapped items to spend what the capped ones leave
        scale = (budget - capped.sum()) / float(shape[~capped].sum())
        newly = ~capped & (scale * shape >= 1.0)
        if not newly.any():
            break
        capped |= newly
        if capped.all():
            break
    return np.where(capped, 1.0, np.minimum(1.0, scale * shape))


def active_observation_range(
    predictions: ArrayLike, inclusion: ArrayLike, *, floor: float
) -> tuple[float, float]:
    """Return (lo, hi): the range of the summand Z = f + (Y - f) xi / pi over the whole design.

    For one item, Z = f when it is not drawn, and f (1 - 1/pi) (Y = 0) or f + (1 - f) / pi
    (Y = 1) when it is; so Z lies in [f (1 - 1/pi), f + (1 - f) / pi], an interval that contains
    f and [0, 1]. The design of :func:`active_inclusion_probabilities` gives every item
    pi(f) = min(1, s q(u(f))) >= pi_0 = min(1, s q(0)), the probability of an item whose
    prediction is certain (u = 0; q(0) = floor, or 1 when every recorded u is 0); s and mean(u)
    are fixed by the workload at the draw. Since 1 - 1/pi_0 <= 0, f (1 - 1/pi) >= f (1 - 1/pi_0)
    >= 1 - 1/pi_0 and f + (1 - f) / pi <= f + (1 - f) / pi_0 <= 1 / pi_0, with equality at f = 1
    and f = 0 (certain predictions). Hence, for every item the design can draw,

        lo = 1 - 1/pi_0 <= Z <= 1/pi_0 = hi,

    the tightest bounds that hold before any item is seen: an anytime-valid sequence needs its
    range fixed before the first observation (bounds that depend on item t itself would make
    its bet depend on item t's prediction, and E[Y | f] is not the rate).

    The scale is read back from the recorded probabilities of the items below the cap, for
    which pi_i = s q_i. When every item is capped the budget is the whole workload (the
    probabilities sum to it): every item is labelled, pi_0 = 1 and Z = Y.

    ``predictions`` f_i in [0, 1] and ``inclusion`` pi_i in (0, 1] have shape (N,); ``floor`` is
    the design's tau. lo <= 0 and hi >= 1; (0, 1) when pi_0 = 1.

    Raises:
        StatsError: on misaligned or empty arrays, values out of range, or a floor outside
            (0, 1].

    Source: Zrnic and Candès (2024), arXiv:2403.03208, Sec. 3 (the summand) and Sec. 5 (the
    design); the range as derived here.
    """
    f = unit_vector(predictions, name="predictions")
    pi = np.asarray(inclusion, dtype=np.float64)
    if f.size == 0 or pi.shape != f.shape:
        raise StatsError(f"inclusion must have the non-empty shape of predictions {f.shape}")
    if not np.all(np.isfinite(pi)) or bool(np.any(pi <= 0)) or bool(np.any(pi > 1)):
        raise StatsError("inclusion probabilities must lie in (0, 1]")
    if isinstance(floor, bool) or not (0 < floor <= 1):
        raise StatsError(f"floor must lie in (0, 1], got {floor!r}")
    u = judge_uncertainty(f)
    shape = _design_shape(u, floor)
    certain = floor if float(u.mean()) > 0.0 else 1.0
    below = pi < 1.0
    if not below.any():
        return 0.0, 1.0
    scale = float(np.max(pi[below] / shape[below]))
    # the least recorded probability too: an item with u = 0 has exactly pi_0 (no rounding)
    least = min(1.0, certain * scale, float(pi.min()))
    return 1.0 - 1.0 / least, 1.0 / least


@dataclass(frozen=True)
class ActivePPIEstimate:
    """The active (IPW prediction-powered) estimate of an error rate, and its normal interval.

    ``estimate`` is theta, which can leave [0, 1] (a weighted difference); ``se`` = sigma /
    sqrt(N), sigma the standard deviation (ddof 0) of the N summands; ``lower``/``upper`` =
    estimate -/+ z_{1-delta/2} se (not clipped), ``upper_bound`` = estimate + z_{1-delta} se,
    ``confidence`` = 1 - delta. ``n_labelled`` is sum xi, ``expected_labels`` sum pi over the N
    items; ``uniform_labels`` the expected labels a uniform design would need for the same
    standard error, N E[e^2] / E[e^2 / pi] (None: see ``saving_reason``); ``saving`` = 1 -
    expected_labels / uniform_labels (negative when active needed more). ``assumption`` is
    always :data:`ASYMPTOTIC`.
    """

    method: str
    estimate: float
    se: float
    lower: float
    upper: float
    upper_bound: float
    confidence: float
    n_population: int
    n_labelled: int
    expected_labels: float
    uniform_labels: float | None
    saving: float | None
    saving_reason: str | None
    assumption: Assumption
    assumptions: tuple[str, ...]

    def clipped(self) -> tuple[float, float, float, float]:
        """Return (estimate, lower, upper, upper_bound) clipped to [0, 1]: no coverage is lost."""
        return (
            min(1.0, max(0.0, self.estimate)),
            max(0.0, self.lower),
            min(1.0, self.upper),
            min(1.0, max(0.0, self.upper_bound)),
        )


def _checked(
    predictions: ArrayLike, inclusion: ArrayLike, labelled: ArrayLike, y: ArrayLike
) -> tuple[NDArray[np.float64], ...]:
    """Return f, pi, xi and xi * Y, each of shape (N,), after checking shapes and ranges."""
    f = unit_vector(predictions, name="predictions")
    pi = np.asarray(inclusion, dtype=np.float64)
    if pi.shape != f.shape:
        raise StatsError(f"inclusion must have shape {f.shape}, got {pi.shape}")
    if not np.all(np.isfinite(pi)) or bool(np.any(pi <= 0)) or bool(np.any(pi > 1)):
        raise StatsError("inclusion probabilities must lie in (0, 1]")
    index = np.asarray(labelled)
    if index.size == 0:
        index = index.astype(np.int64)
    if index.ndim != 1 or (
        index.size and (index.dtype == np.bool_ or not np.issubdtype(index.dtype, np.integer))
    ):
        raise StatsError("labelled must be a one-dimensional array of integer positions")
    labels = unit_vector(y, name="y")
    if labels.shape != index.shape:
        raise StatsError(f"labelled and y must be aligned, got {index.shape} and {labels.shape}")
    if index.size and (int(index.min()) < 0 or int(index.max()) >= f.size):
        raise StatsError(f"labelled positions must lie in [0, {f.size})")
    if np.unique(index).size != index.size:
        raise StatsError("labelled positions must be distinct")
    xi = np.zeros(f.size)
    xi[index] = 1.0
    y_full = np.zeros(f.size)
    y_full[index] = labels
    return f, pi, xi, y_full


def active_ppi_mean(
    predictions: ArrayLike,
    inclusion: ArrayLike,
    labelled: ArrayLike,
    y: ArrayLike,
    *,
    delta: float = 0.05,
) -> ActivePPIEstimate:
    """Return the active estimate of the error rate of N items, with its normal interval.

    theta = (1/N) sum_i [f_i + (Y_i - f_i) xi_i / pi_i]; the interval is theta ±
    z_{1-delta/2} std(summands) / sqrt(N) (ddof 0), the one-sided bound theta + z_{1-delta}
    times the same standard error. See the module docstring for the uniform comparison.

    ``predictions`` (shape (N,), in [0, 1]) are the judge's f_i (or 0/1 verdicts) and
    ``inclusion`` (shape (N,), in (0, 1]) the recorded pi_i of every item; ``labelled`` (shape
    (n,)) holds the distinct positions of the drawn items and ``y`` their human labels in [0, 1]
    (1 = error), aligned; every drawn item needs one.

    Raises:
        StatsError: on misaligned or out-of-range arrays, repeated or out-of-range positions,
            or delta outside (0, 1).

    Source: Zrnic and Candès (2024), arXiv:2403.03208, Sec. 3 (estimator and interval); equals
    the authors' ``np.mean(Yhat + (Y - Yhat) * xi / probs)`` and ``np.std(...) / np.sqrt(n)``.
    """
    level = 1.0 - check_open_unit(delta, name="delta")
    f, pi, xi, y_full = _checked(predictions, inclusion, labelled, y)
    summands = f + (y_full - f) * xi / pi
    big_n = f.size
    estimate = float(summands.mean())
    se = float(summands.std()) / math.sqrt(big_n)
    half = z_quantile(1.0 - (1.0 - level) / 2.0) * se
    # the uniform design with the same standard error (module docstring)
    residual_sq = (y_full - f) ** 2 * xi
    per_pi = float((residual_sq / pi).sum())
    per_pi_sq = float((residual_sq / pi**2).sum())
    expected = float(pi.sum())
    uniform: float | None = None
    saving: float | None = None
    saving_reason: str | None = None
    if per_pi_sq == 0.0:
        saving_reason = (
            "every labelled item equals the judge's prediction, so the residual variance is "
            "estimated as zero and no design can be compared"
        )
    else:
        uniform = big_n * per_pi / per_pi_sq
        saving = 1.0 - expected / uniform
    return ActivePPIEstimate(
        method="active",
        estimate=estimate,
        se=se,
        lower=estimate - half,
        upper=estimate + half,
        upper_bound=estimate + z_quantile(level) * se,
        confidence=level,
        n_population=big_n,
        n_labelled=int(xi.sum()),
        expected_labels=expected,
        uniform_labels=uniform,
        saving=saving,
        saving_reason=saving_reason,
        assumption=ASYMPTOTIC,
        assumptions=ACTIVE_ASSUMPTIONS,
    )
