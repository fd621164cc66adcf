"""The coverage calculator's report as JSON primitives, shared by its API endpoint and page.

Source: :func:`certification.stats.coverage.coverage_calculator` (Beta and Beta-Binomial spreads
of conformal coverage, Vovk 2012 and Angelopoulos and Bates 2021 section 3.1; design effect,
Kish 1965).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from certification.certificates.jsonnum import fraction_text, num

#: Largest sizes the calculator takes (far beyond any labelled set; bounds the arithmetic).
MAX_SIZE = 10**12
MAX_GROUP_SIZE = 10**9

#: What every figure of the calculator assumes.
ASSUMPTIONS = (
    "Exchangeable calibration and test points with tie-free scores; within-group correlation "
    "enters only through the design effect 1 + (m-1) rho. With tied scores (frequency ranks) "
    "coverage jumps between a few levels and these spreads do not apply."
)


def coverage_inputs_check(attrs: Mapping[str, Any]) -> dict[str, list[str]]:
    """Return the cross-field errors of calculator inputs, by field (empty: none).

    ``group_size`` and ``icc`` go together, the design effect 1 + (m-1) rho must be positive
    (rho >= -1/(m-1) is the lower limit of a correlation within groups of m), and a group holds
    at most the n calibration points.
    """
    m, rho = attrs.get("group_size"), attrs.get("icc")
    if (m is None) != (rho is None):
        missing = "icc" if rho is None else "group_size"
        return {missing: [f"give {missing} with {'group_size' if rho is None else 'icc'}"]}
    if m is not None and rho is not None and 1 + (m - 1) * rho <= 0:
        return {"icc": [f"icc must exceed -1/(group_size - 1) = {-1 / (m - 1):.6g}"]}
    n = attrs.get("n")
    if m is not None and n is not None and m > n:
        # a group larger than the calibration set: the design effect would describe no design
        return {"group_size": [f"group_size must be at most n = {n} (the calibration size)"]}
    return {}


def coverage_calculator_report(
    *,
    n_calibration: int,
    alpha: Decimal,
    n_test: int | None = None,
    group_size: int | None = None,
    icc: float | None = None,
) -> dict[str, Any]:
    """Return the calculator's figures for the inputs.

    ``alpha`` is exact as typed; ``group_size`` m >= 1 and ``icc`` rho in [-1, 1] go together.
    Returns ``inputs``; ``l`` and ``k``; ``beta`` (``a``, ``b``, ``mean``, ``variance``, ``sd``,
    ``reason``); ``realised`` (``sd``, ``variance``, ``beta_variance``, ``approximate_variance``,
    ``reason``) or None; ``grouping`` (``design_effect``, ``predicted_excess``,
    ``grouped_beta_sd``, ``grouped_realised_sd``, ``effective_n_calibration``,
    ``effective_n_test``) or None; ``assumptions``.

    Raises:
        StatsError: on a bad input (the message names it; e.g. a correlation below the design
            effect's lower limit -1/(m-1)).
    """
    # The statistics (NumPy, SciPy) load with the first figures: the limits and checks above
    # serve the page's form and the API's serializer, in a web process that must not load them.
    from certification.stats.coverage import coverage_calculator

    calc = coverage_calculator(n_calibration, alpha, n_test=n_test, group_size=group_size, icc=icc)
    realised = calc.realised
    deff = calc.design_effect
    return {
        "inputs": {
            "n": calc.n_calibration,
            "alpha": format(alpha.normalize(), "f"),
            "alpha_exact": fraction_text(calc.alpha),
            "n_test": calc.n_test,
            "group_size": calc.group_size,
            "icc": num(calc.icc),
        },
        "l": calc.l,
        "k": calc.beta.k,
        "beta": {
            "a": calc.beta.a,
            "b": calc.beta.b,
            "mean": num(calc.beta.mean),
            "variance": num(calc.beta.variance),
            "sd": num(calc.beta.sd),
            "reason": calc.beta.reason,
        },
        "realised": None
        if realised is None
        else {
            "mean": num(realised.mean),
            "variance": num(realised.variance),
            "sd": num(realised.sd),
            "beta_variance": num(realised.beta_variance),
            "approximate_variance": num(realised.approximate_variance),
            "reason": realised.reason,
        },
        "grouping": None
        if deff is None
        else {
            "design_effect": num(deff.value),
            "predicted_excess": num(deff.predicted_excess),
            "grouped_beta_sd": num(calc.grouped_beta_sd),
            "grouped_realised_sd": num(calc.grouped_realised_sd),
            "effective_n_calibration": num(calc.effective_n_calibration),
            "effective_n_test": num(calc.effective_n_test),
        },
        "assumptions": ASSUMPTIONS,
    }
