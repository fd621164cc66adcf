"""Dependence and coverage variability: within-group correlation, Beta coverage, split draws.

Sources: Kish (1965), "Survey Sampling" (design effect 1 + (m - 1) rho with unequal group sizes,
effective sample size n / deff); Donner (1986) for ICC(1) with unequal group sizes;
Angelopoulos and Bates (2021), "A gentle introduction to conformal prediction", arXiv:2107.07511,
section 3.1 (the Beta and Beta-Binomial distribution of conformal coverage); the split
simulations of :func:`certification.stats.coverage.split_dependence_report`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import num
from certification.certificates.units import PreparedQuestion
from certification.stats.coverage import (
    beta_coverage,
    design_effect_unequal,
    effective_sample_size,
    icc_oneway,
    realised_coverage_spread,
    split_dependence_report,
    tie_summary,
    tied_split_coverage,
)
from certification.stats.errors import StatsError

#: Split simulations (:func:`~certification.stats.coverage.split_dependence_report`) are skipped
#: above this many pooled questions: 20 i.i.d. pools x 200 splits stay well under a second up to
#: here.
SIMULATION_MAX_ROWS = 50_000
SIMULATION_DRAWS = 200
SIMULATION_POOLS = 20


def design_effect(values: Sequence[float], groups: Sequence[str]) -> dict[str, Any]:
    """Return ICC(1) of a per-unit value within groups, the design effect and the effective n.

    ``values`` (shape (n,)) are the 0/1 indicator or the bounded loss per unit, ``groups`` the
    units' group keys. Returns ``n``, ``groups``, ``largest_group``, ``icc`` (in [-1, 1]),
    ``design_effect`` (>= 0), ``effective_n`` and ``reason`` (why something is undefined);
    ``cluster_size`` when the design effect is defined.

    Raises:
        ValueError: if ``values`` and ``groups`` differ in length.
    """
    by_group: dict[str, list[float]] = defaultdict(list)
    for value, group in zip(values, groups, strict=True):
        by_group[group].append(value)
    sizes = [len(v) for v in by_group.values()]
    out: dict[str, Any] = {
        "n": len(values),
        "groups": len(by_group),
        "largest_group": max(sizes, default=0),
        "icc": None,
        "design_effect": None,
        "effective_n": None,
        "reason": None,
    }
    try:
        icc = icc_oneway(list(by_group.values()))
    except StatsError as exc:
        out["reason"] = str(exc)
        return out
    out["icc"] = num(icc.icc)
    if icc.icc is None:
        out["reason"] = icc.reason
        return out
    try:
        deff = design_effect_unequal(sizes, icc.icc)
    except StatsError as exc:
        out["reason"] = str(exc)
        return out
    out["design_effect"] = num(deff.value)
    out["cluster_size"] = num(deff.cluster_size)
    out["effective_n"] = num(effective_sample_size(len(values), deff))
    return out


#: What the Beta and Beta-Binomial figures mean when the scores are tied.
TIED_BETA_NOTE = (
    "the scores are tied, so these laws do not describe the spread: with ties M* can only take "
    "the score values, and coverage jumps between a few levels at or above 1 - alpha. "
    "Beta(k, n+1-k) remains a lower bound on the delivered coverage (in distribution); the "
    "tie-aware spread is the exact law of a random split of the pooled questions below"
)


def ties_section(scores: Sequence[float]) -> dict[str, Any]:
    """Return ``n``, ``distinct``, ``tied_rows``, ``largest_tie`` and ``tied`` of the scores."""
    ties = tie_summary(scores)
    return {
        "n": ties.n,
        "distinct": ties.distinct,
        "tied_rows": ties.tied_rows,
        "largest_tie": ties.largest_tie,
        "tied": ties.has_ties,
    }


def _tied_split(pooled: Sequence[float], n_calibration: int, contract: Contract) -> dict[str, Any]:
    """The exact law of realised coverage under a random split of the pooled scores."""
    try:
        law = tied_split_coverage(pooled, n_calibration, contract.alpha)
    except StatsError as exc:
        return {"reason": str(exc)}
    return {
        "n_pool": law.n_pool,
        "n_calibration": law.n_calibration,
        "n_test": law.n_test,
        "mean": num(law.mean),
        "sd": num(law.sd),
        "threshold_law": [[num(value), num(p)] for value, p in law.threshold_law],
        "reason": law.reason,
    }


def _beta(n_calibration: int, contract: Contract) -> dict[str, Any]:
    beta = beta_coverage(n_calibration, contract.alpha)
    return {
        "a": beta.a,
        "b": beta.b,
        "mean": num(beta.mean),
        "variance": num(beta.variance),
        "sd": num(beta.sd),
        "reason": beta.reason,
    }


def _realised(n_calibration: int, n_test: int, contract: Contract) -> dict[str, Any]:
    spread = realised_coverage_spread(n_calibration, n_test, contract.alpha)
    return {
        "mean": num(spread.mean),
        "variance": num(spread.variance),
        "sd": num(spread.sd),
        "beta_variance": num(spread.beta_variance),
        "approximate_variance": num(spread.approximate_variance),
        "reason": spread.reason,
    }


def _simulation(pooled: Sequence[PreparedQuestion], contract: Contract) -> dict[str, Any]:
    """Row versus group split simulations over the pooled questions, or why they are skipped."""
    groups = [p.group for p in pooled]
    if len(pooled) > SIMULATION_MAX_ROWS:
        return {"reason": f"more than {SIMULATION_MAX_ROWS} questions: skipped"}
    if len(pooled) < 4 or len(set(groups)) < 2:
        return {"reason": "needs at least 4 questions in at least 2 groups"}
    try:
        report = split_dependence_report(
            [p.score for p in pooled],
            groups,
            alpha=contract.alpha,
            draws=SIMULATION_DRAWS,
            pools=SIMULATION_POOLS,
            seed=contract.seed,
        )
    except StatsError as exc:
        return {"reason": str(exc)}
    return {
        "seed": contract.seed,
        "draws": SIMULATION_DRAWS,
        "pools": SIMULATION_POOLS,
        "row": {
            "sd": num(report.row.sd),
            "excess": num(report.row.excess),
            "mean": num(report.row.mean),
        },
        "group": {
            "sd": num(report.group.sd),
            "excess": num(report.group.excess),
            "mean": num(report.group.mean),
        },
        "iid_band": [num(report.control.low), num(report.control.high)],
        "reference": report.row.reference,
        "design_effect": num(report.design_effect.value) if report.design_effect else None,
        "predicted_excess": num(report.predicted_excess),
        "predicted_reason": report.predicted_reason,
        "effective_n": num(report.effective_n),
        "lag_reason": report.lags.reason,
        "reason": None,
    }


def coverage_variability(
    calibration: Sequence[PreparedQuestion],
    test: Sequence[PreparedQuestion],
    threshold: float | None,
    contract: Contract,
) -> dict[str, Any]:
    """Return the dependence section of a conformal run.

    ``threshold`` is M*, None only when no calibration question is used. Returns
    ``n_calibration``, ``n_test`` and, unless calibration is empty (then ``reason``): ``ties``
    (:func:`ties_section` of the pooled scores), ``beta`` (with ``note`` when the scores are
    tied), ``realised`` (with a test partition), ``tied_split`` (with a test partition and tied
    scores: the exact law of a random split of the pooled questions), ``grouping``
    (:func:`design_effect` of coverage) and ``simulation``.

    Raises:
        AssertionError: if calibration questions are used but ``threshold`` is None.
    """
    cal = [p for p in calibration if p.excluded is None]
    tst = [p for p in test if p.excluded is None]
    out: dict[str, Any] = {"n_calibration": len(cal), "n_test": len(tst)}
    if not cal:
        out["reason"] = "no calibration question"
        return out
    pooled = [p.score for p in [*cal, *tst]]
    out["ties"] = ties_section(pooled)
    out["beta"] = _beta(len(cal), contract)
    if out["ties"]["tied"]:
        out["beta"]["note"] = TIED_BETA_NOTE
    if tst:
        out["realised"] = _realised(len(cal), len(tst), contract)
        if out["ties"]["tied"]:
            out["tied_split"] = _tied_split(pooled, len(cal), contract)
    assert threshold is not None
    covered = [1.0 if p.score <= threshold else 0.0 for p in cal]
    out["grouping"] = design_effect(covered, [p.group for p in cal])
    out["simulation"] = _simulation([*cal, *tst], contract)
    return out
