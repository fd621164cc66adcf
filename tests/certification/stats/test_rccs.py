"""RCCS against hand-computed reference values and scipy's Pearson correlation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.rccs import rccs

NAN = float("nan")


def test_reference_row_one():
    result = rccs([0.9, 0.8, 0.5, 0.3], [1, 0.5, 0.8, 0.2], [1, 1, 0, 0])
    assert result.rccs_correlation == pytest.approx(0.7007790765, abs=1e-9)
    assert result.confidence_calibration_error == pytest.approx(0.29, abs=1e-12)
    assert result.mean_rc == pytest.approx(0.44, abs=1e-12)
    assert (result.n, result.n_dropped) == (4, 0)
    # independent reference
    assert result.rccs_correlation == pytest.approx(
        pearsonr([0.9, 0.4, 0.4, 0.06], [1, 1, 0, 0]).statistic, rel=1e-12
    )


def test_reference_row_two_constant_correctness_is_undefined():
    result = rccs([0.9, 0.8, 0.5], [1, 1, 1], [1, 1, 1])
    assert result.rccs_correlation is None
    assert "constant" in result.correlation_reason
    assert result.confidence_calibration_error == pytest.approx(0.2666666667, abs=1e-9)
    assert result.mean_rc == pytest.approx(0.7333333333, abs=1e-9)
    assert result.n == 3


def test_reference_row_three_drops_incomplete_rows():
    result = rccs([0.9, NAN, 0.5, 0.3, 0.7], [1, 0.5, 0.8, 0.2, NAN], [1, 1, 0, 0, 1])
    assert (result.n, result.n_dropped) == (3, 2)
    assert result.rccs_correlation == pytest.approx(0.9154919261, abs=1e-9)
    assert result.confidence_calibration_error == pytest.approx(0.1866666667, abs=1e-9)
    assert result.mean_rc == pytest.approx(0.4533333333, abs=1e-9)
    assert result.rccs_correlation == pytest.approx(
        pearsonr([0.9, 0.4, 0.06], [1, 0, 0]).statistic, rel=1e-12
    )


def test_none_counts_as_missing_like_nan():
    result = rccs([0.9, None, 0.5, 0.3, 0.7], [1, 0.5, 0.8, 0.2, None], [1, 1, 0, 0, None])
    assert (result.n, result.n_dropped) == (3, 2)


def test_product_constant_only_in_exact_arithmetic_is_constant():
    # 0.1 * 0.9 and 0.3 * 0.3 are both 0.09 exactly but differ in floating point
    assert 0.1 * 0.9 != 0.3 * 0.3
    result = rccs([0.1, 0.3, 0.1], [0.9, 0.3, 0.9], [1, 0, 0])
    assert result.rccs_correlation is None
    assert "R*C is constant" in result.correlation_reason


def test_fewer_than_three_rows_have_no_correlation():
    result = rccs([0.9, 0.2], [0.5, 0.5], [1, 0])
    assert result.rccs_correlation is None
    assert "n = 2 < 3" in result.correlation_reason
    assert result.mean_rc == pytest.approx(0.275)


@pytest.mark.parametrize(
    ("r", "c", "a", "message"),
    [
        ([1.2, 0.5, 0.5], [1, 1, 1], [1, 0, 1], "retrieval must lie in"),
        ([0.2, 0.5, 0.5], [1, -0.1, 1], [1, 0, 1], "confidence must lie in"),
        ([0.2, 0.5, math.inf], [1, 1, 1], [1, 0, 1], "retrieval must lie in"),
        ([0.2, 0.5, 0.5], [1, 1, 1], [1, 0.5, 1], "correctness must be 0 or 1"),
        ([0.2, 0.5], [1, 1, 1], [1, 0, 1], "same length"),
        (["x", 0.5, 0.5], [1, 1, 1], [1, 0, 1], "retrieval must hold numbers"),
    ],
)
def test_bad_values_are_refused_not_clipped(r, c, a, message):
    with pytest.raises(StatsError, match=message):
        rccs(r, c, a)


def test_no_complete_row_is_insufficient_data():
    with pytest.raises(InsufficientDataError, match="no complete row"):
        rccs([NAN, 0.4], [0.2, NAN], [1, 0])


unit = st.floats(0, 1, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(unit, unit, st.integers(0, 1)), min_size=3, max_size=40))
def test_matches_scipy_and_hand_formulas(rows):
    r = np.array([row[0] for row in rows])
    c = np.array([row[1] for row in rows])
    a = np.array([row[2] for row in rows], dtype=float)
    result = rccs(r, c, a)
    rc = r * c
    assert result.confidence_calibration_error == pytest.approx(np.mean(np.abs(rc - a)))
    assert result.mean_rc == pytest.approx(np.mean(rc))
    if result.rccs_correlation is None:
        assert np.ptp(rc) <= 1e-12 or np.ptp(a) == 0
    else:
        assert -1 <= result.rccs_correlation <= 1
        if np.ptp(rc) > 1e-6:  # scipy warns and loses precision on near-constant input
            assert result.rccs_correlation == pytest.approx(
                pearsonr(rc, a).statistic, rel=1e-7, abs=1e-9
            )
