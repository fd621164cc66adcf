"""The union bound: judge flag-rate bound plus judge miss-rate bound, each exact at delta/2.

error rate = P(flag) P(error | flag) + P(no flag) P(error | no flag) <= P(flag) + P(error | no
flag). The flag rate (judge positive or unavailable) gets an exact upper bound from all N items
and the miss rate from the audited judge-negatives; *finite-sample exact*. It uses only the
judge-negatives' labels: cheap to audit, loose when the judge flags a lot.

Source: Clopper and Pearson (1934), "The use of confidence or fiducial limits illustrated in the
case of the binomial", Biometrika 26(4), 404–413; Boole's inequality.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import (
    check_count,
    check_open_unit,
    clopper_pearson_upper,
    clopper_pearson_upper_array,
)
from certification.stats.ppi.checks import stratum_arrays, stratum_keys
from certification.stats.ppi.results import (
    EXACT,
    UNSAMPLED_STRATUM,
    JointUnionBound,
    StratumBound,
    UnionBound,
)

STRATIFIED_AUDIT = (
    "the audit was stratified: the joint form needs a simple random audit of the whole workload "
    "(the conditional form applies)"
)
NO_AUDITED_ITEM = "no audited item with a usable human label"


def union_bound(
    n_flagged: int,
    n_population: int,
    missed: ArrayLike,
    negatives_sampled: ArrayLike,
    negatives_population: ArrayLike | None = None,
    *,
    delta: float = 0.05,
    strata: Sequence[Hashable] | None = None,
    unresolved_note: str | None = None,
) -> UnionBound:
    """Finite-sample union bound: flag-rate bound + miss-rate bound, each exact at delta/2.

    error rate = P(flag) P(error | flag) + P(no flag) P(error | no flag)
    <= P(flag) + P(error | no flag) <= U_flag + U_miss, where U_flag is the one-sided
    Clopper–Pearson bound on n_flagged / N at 1 - delta/2 and U_miss bounds P(error | no flag)
    at 1 - delta/2. When the judge-negatives were audited in several strata, U_miss is the
    largest stratum bound, each at 1 - delta/(2 H_neg): P(error | no flag) is a mixture of the
    strata's rates with unknown mixing weights, and cannot exceed their maximum. The union bound
    over the two events gives level 1 - delta; the sum is capped at 1.

    ``n_flagged`` (unavailable included) lies in 0..N for the N = ``n_population`` judged items.
    Per judge-negative stratum (shape (H_neg,)): ``missed`` human errors among the audited
    judge-negatives, ``negatives_sampled`` audited ones with a usable label,
    ``negatives_population`` judge-negatives in the workload (None: one stratum); a stratum with
    judge-negatives but none audited makes U_miss = 1. ``strata`` name the strata in the report;
    ``unresolved_note`` is added to the assumptions. Always defined (:data:`EXACT`); with no
    audited judge-negative the bound is 1.

    Raises:
        InsufficientDataError: if N = 0.
        StatsError: on non-integer or inconsistent counts (n_flagged > N, errors > sampled,
            sampled > population) or delta outside (0, 1).

    Source: Clopper and Pearson (1934), "The use of confidence or fiducial limits illustrated in
    the case of the binomial", Biometrika 26(4), 404–413; Boole's inequality.
    """
    g = check_open_unit(delta, name="delta")
    flagged = check_count(n_flagged, name="n_flagged")
    big_n = check_count(n_population, name="n_population")
    if big_n == 0:
        raise InsufficientDataError("the union bound needs at least one judged item")
    if flagged > big_n:
        raise StatsError(f"n_flagged must be <= n_population, got {flagged} > {big_n}")
    k, n, big = stratum_arrays(missed, negatives_sampled, negatives_population)
    keys = stratum_keys(strata, k.size)
    flag_upper = clopper_pearson_upper(flagged, big_n, confidence=1.0 - g / 2.0)
    h = int((n > 0).sum())
    notes: list[str] = []
    if h == 0:
        per_stratum = np.ones(k.size)
        miss_upper = 1.0
        notes.append("no audited judge-negative item: the miss-rate bound is 1")
    else:
        per_stratum = clopper_pearson_upper_array(k, n, confidence=1.0 - g / (2.0 * h))
        miss_upper = float(per_stratum.max())
        if bool(np.any(n == 0)):
            notes.append(f"{UNSAMPLED_STRATUM} among the judge-negatives: the miss-rate bound is 1")
    assumptions = [
        "finite-sample exact: two Clopper-Pearson bounds at 1 - delta/2 joined by the union bound",
        "the judged items are i.i.d. draws from the population of interest (flag-rate bound)",
        "the audited judge-negatives of each stratum are a simple random sample chosen without "
        "looking at the human labels (miss-rate bound; the maximum over strata when several, "
        "valid for any mix)",
        "unavailable judge labels count as flags",
    ]
    if unresolved_note:
        assumptions.append(unresolved_note)
    n_neg = int(n.sum())
    return UnionBound(
        method="union bound",
        upper_bound=min(1.0, flag_upper + miss_upper),
        confidence=1.0 - g,
        n_population=big_n,
        n_flagged=flagged,
        flag_rate=flagged / big_n,
        flag_rate_upper=flag_upper,
        n_negatives_audited=n_neg,
        n_missed=int(k.sum()),
        miss_rate=int(k.sum()) / n_neg if n_neg else None,
        miss_rate_upper=miss_upper,
        miss_strata=tuple(
            StratumBound(
                key,
                int(big[i]) if negatives_population is not None else None,
                int(n[i]),
                int(k[i]),
                float(n[i] / big[i]) if negatives_population is not None else None,
                float(per_stratum[i]),
            )
            for i, key in enumerate(keys)
        ),
        assumption=EXACT,
        assumptions=tuple(assumptions),
        notes=tuple(notes),
    )


def union_bound_joint(
    n_flagged: int,
    n_population: int,
    joint_missed: int,
    n_audited: int,
    *,
    delta: float = 0.05,
    stratified: bool = False,
    unresolved_note: str | None = None,
) -> JointUnionBound:
    """Finite-sample union bound, joint form: flag-rate bound + P(not flagged, error) bound.

    error rate = P(flag, error) + P(no flag, error) <= P(flag) + P(no flag, error)
    <= U_flag + U_joint, with U_flag the one-sided Clopper–Pearson bound on n_flagged / N and
    U_joint the one on joint_missed / n_audited, each at 1 - delta/2. Since P(no flag, error) =
    P(no flag) P(error | no flag) <= P(error | no flag), the joint form is never looser in the
    population than the conditional one (:func:`union_bound`), and it uses every audited item's
    label; but it reads the audit as a simple random sample of the whole workload, so it does not
    apply to an audit stratified by the judge's verdict or by slice.

    ``n_flagged`` (unavailable included) lies in 0..N; ``joint_missed`` counts audited items
    the judge did not flag and people found in error, out of ``n_audited`` with a usable label.
    A ``stratified`` audit makes the result not applicable (``upper_bound`` None, ``reason``);
    ``unresolved_note`` is added to the assumptions.

    Raises:
        InsufficientDataError: if N = 0.
        StatsError: on non-integer or inconsistent counts, or delta outside (0, 1).

    Source: Clopper and Pearson (1934), Biometrika 26(4), 404–413; Boole's inequality.
    """
    g = check_open_unit(delta, name="delta")
    flagged = check_count(n_flagged, name="n_flagged")
    big_n = check_count(n_population, name="n_population")
    missed = check_count(joint_missed, name="joint_missed")
    audited = check_count(n_audited, name="n_audited")
    if big_n == 0:
        raise InsufficientDataError("the union bound needs at least one judged item")
    if flagged > big_n:
        raise StatsError(f"n_flagged must be <= n_population, got {flagged} > {big_n}")
    if missed > audited or audited > big_n:
        raise StatsError(
            f"need joint_missed <= n_audited <= n_population, got {missed}, {audited}, {big_n}"
        )
    flag_upper = clopper_pearson_upper(flagged, big_n, confidence=1.0 - g / 2.0)
    assumptions = [
        "finite-sample exact: two Clopper-Pearson bounds at 1 - delta/2 joined by the union bound",
        "the judged items are i.i.d. draws from the population of interest (flag-rate bound)",
        "the audited items are a simple random sample of the judged items, chosen without "
        "looking at the human labels (bound on unflagged errors)",
        "unavailable judge labels count as flags",
    ]
    if unresolved_note:
        assumptions.append(unresolved_note)
    reason = STRATIFIED_AUDIT if stratified else (NO_AUDITED_ITEM if audited == 0 else None)
    joint_upper = None
    if reason is None:
        joint_upper = clopper_pearson_upper(missed, audited, confidence=1.0 - g / 2.0)
    return JointUnionBound(
        method="union bound (joint)",
        upper_bound=None if joint_upper is None else min(1.0, flag_upper + joint_upper),
        confidence=1.0 - g,
        n_population=big_n,
        n_flagged=flagged,
        flag_rate_upper=flag_upper,
        n_audited=audited,
        n_joint_missed=missed,
        joint_miss_rate=missed / audited if audited else None,
        joint_miss_rate_upper=joint_upper,
        assumption=EXACT,
        assumptions=tuple(assumptions),
        reason=reason,
    )
