"""The union bound's joint form, and PPI's summary clipped to [0, 1].

Every expected bound is computed here from scipy.stats.beta (the Clopper–Pearson upper limit
at level c is beta.ppf(c, k + 1, n - k), and 1 when k = n), independently of the module.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta

from certification.stats.errors import StatsError
from certification.stats.ppi import estimate_error_rate, union_bound_joint
from certification.stats.ppi.union import NO_AUDITED_ITEM, STRATIFIED_AUDIT


def cp_upper(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(beta.ppf(level, k + 1, n - k))


def workload(seed: int, big_n: int = 4000, n: int = 400, flag_rate: float = 0.6):
    """A judge that flags a lot, errors at 20%, and a simple random audit of n items."""
    rng = np.random.default_rng(seed)
    error = rng.random(big_n) < 0.2
    flag = np.where(error, rng.random(big_n) < 0.9, rng.random(big_n) < flag_rate)
    judge = flag.astype(np.int64)
    audited = rng.choice(big_n, size=n, replace=False)
    return judge, audited, error[audited].astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_joint_form_equals_its_formula(seed):
    judge, audited, human = workload(seed)
    result = estimate_error_rate(judge, audited, human, delta=0.1)
    joint = result.union_joint
    flagged = int((judge != 0).sum())
    missed = int(((judge[audited] == 0) & (human == 1)).sum())
    expected = cp_upper(flagged, judge.size, 0.95) + cp_upper(missed, audited.size, 0.95)
    assert (joint.n_flagged, joint.n_audited, joint.n_joint_missed) == (flagged, 400, missed)
    assert joint.upper_bound == pytest.approx(min(1.0, expected), abs=1e-12)
    assert joint.joint_miss_rate == missed / 400
    assert joint.reason is None
    # with a judge that flags most items, few audited items are judge-negatives: the joint form
    # reads all 400 labels and is the tighter of the two here
    assert joint.upper_bound < result.union.upper_bound
    rows = {s.method: s for s in result.summaries()}
    assert rows["union bound (joint)"].upper_bound == joint.upper_bound


def test_a_stratified_audit_gets_no_joint_form():
    judge, audited, human = workload(3)
    strata = judge.copy()  # stratified by the judge's verdict
    result = estimate_error_rate(judge, audited, human, strata=strata)
    assert result.union_joint.upper_bound is None
    assert result.union_joint.reason == STRATIFIED_AUDIT
    assert result.union.upper_bound is not None  # the conditional form still applies


def test_no_audited_item_is_said():
    bound = union_bound_joint(3, 10, 0, 0)
    assert (bound.upper_bound, bound.reason, bound.joint_miss_rate) == (None, NO_AUDITED_ITEM, None)


@pytest.mark.parametrize(
    "counts", [(11, 10, 0, 1), (3, 10, 2, 1), (3, 10, 0, 11), (-1, 10, 0, 1), (1.5, 10, 0, 1)]
)
def test_inconsistent_counts_are_refused(counts):
    with pytest.raises(StatsError):
        union_bound_joint(*counts)


def test_ppi_summary_is_clipped_to_the_range_of_a_rate_and_says_so():
    # the judge flags every audited item, people find none in error, and the judge flags half of
    # the workload: PPI's estimate is 0.5 + (0 - 1) < 0
    big_n, n = 200, 20
    judge = np.zeros(big_n, dtype=np.int64)
    judge[:100] = 1
    audited = np.arange(n)
    human = np.zeros(n, dtype=np.int64)
    result = estimate_error_rate(judge, audited, human)
    assert result.ppi.estimate is not None and result.ppi.estimate < 0
    row = next(s for s in result.summaries() if s.method == "ppi")
    assert row.estimate == 0.0 and row.lower == 0.0
    assert row.upper == min(1.0, max(0.0, result.ppi.upper))
    assert row.note is not None and row.note.startswith("clipped to [0, 1]")
    assert f"{result.ppi.estimate:.4f}" in row.note
    # a result inside [0, 1] is left alone
    judge, audited, human = workload(4)
    row = next(
        s for s in estimate_error_rate(judge, audited, human).summaries() if s.method == "ppi"
    )
    assert row.note is None
