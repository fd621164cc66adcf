"""Evaluator audit statistics: hand-computed reference values, statsmodels and scipy
cross-checks, undefined cases and properties.

No database and no Django: ``certification.stats`` is plain Python.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import cohens_kappa

from certification.stats.agreement import FEWER_THAN_TWO_SHARED_UNITS, NO_VARIATION
from certification.stats.audit import (
    DISAGREEMENT_COLUMNS,
    LABELS_NOT_COMPARABLE,
    NO_COMPARED_ITEMS,
    NO_EVALUATOR_NEGATIVES,
    NO_EVALUATOR_POSITIVES,
    NO_HUMAN_NEGATIVES,
    NO_HUMAN_POSITIVES,
    UNAVAILABLE,
    UNRESOLVED,
    AuditRecord,
    Polarity,
    audit,
    audit_by_slice,
    confusion_matrix,
    disagreements,
    mcnemar_exact,
)
from certification.stats.errors import StatsError

ERROR = Polarity.same({"unsupported", "contradicted"})
BINARY_JUDGE = Polarity(
    name="error / not supported",
    human_positive=frozenset({"unsupported", "contradicted"}),
    evaluator_positive=frozenset({"hallucinated"}),
)


def labels_from_counts(tp: int, fn: int, fp: int, tn: int) -> tuple[list[str], list[str]]:
    """Evaluator and human label lists realising a binary core (positive = "unsupported")."""
    evaluator = ["unsupported"] * tp + ["supported"] * fn + ["unsupported"] * fp
    human = ["unsupported"] * (tp + fn) + ["supported"] * fp
    evaluator += ["supported"] * tn
    human += ["supported"] * tn
    return evaluator, human


# -- the reference table TP 40, FN 10, FP 5, TN 145 -------------------------------------------
def test_reference_table_sensitivity_specificity_accuracy():
    # given the reference table TP 40, FN 10, FP 5, TN 145
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    # when it is audited
    result = audit(evaluator, human, ERROR)
    # then the reference values come out, with their counts
    assert (result.sensitivity.numerator, result.sensitivity.denominator) == (40, 50)
    assert result.sensitivity.value == pytest.approx(0.8, abs=1e-6)
    assert result.sensitivity.lower == pytest.approx(0.662817, abs=1e-6)
    assert result.sensitivity.upper == pytest.approx(0.899698, abs=1e-6)
    assert (result.specificity.numerator, result.specificity.denominator) == (145, 150)
    assert result.specificity.value == pytest.approx(0.966667, abs=1e-6)
    assert result.specificity.lower == pytest.approx(0.923928, abs=1e-6)
    assert result.specificity.upper == pytest.approx(0.989090, abs=1e-6)
    assert result.accuracy.value == pytest.approx(0.925, abs=1e-12)
    assert (result.accuracy.numerator, result.accuracy.denominator) == (185, 200)


def test_reference_table_mcnemar_exact():
    # given the same table (b = FN = 10, c = FP = 5)
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    result = audit(evaluator, human, ERROR).mcnemar
    # then the exact p-value is the reference's and statsmodels'
    assert (result.false_negatives, result.false_positives, result.n_discordant) == (10, 5, 15)
    assert result.p_value == pytest.approx(0.3017578125, rel=1e-9)
    reference = mcnemar(np.array([[40, 10], [5, 145]]), exact=True)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert result.statistic == reference.statistic


def test_ppv_npv_intervals_equal_scipy_exact():
    # given the reference table
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    result = audit(evaluator, human, ERROR, confidence=0.99)
    # then PPV = 40/45 and NPV = 145/155 carry scipy's exact (Clopper–Pearson) intervals
    for proportion, (k, n) in ((result.ppv, (40, 45)), (result.npv, (145, 155))):
        reference = binomtest(k, n).proportion_ci(0.99, method="exact")
        assert (proportion.numerator, proportion.denominator) == (k, n)
        assert proportion.value == pytest.approx(k / n, rel=1e-12)
        assert proportion.lower == pytest.approx(reference.low, rel=1e-9)
        assert proportion.upper == pytest.approx(reference.high, rel=1e-9)
        assert proportion.interval is not None and proportion.interval.confidence == 0.99


def test_positive_rates():
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    result = audit(evaluator, human, ERROR)
    assert (result.human_positive_rate.numerator, result.human_positive_rate.denominator) == (
        50,
        200,
    )
    assert result.evaluator_positive_rate.value == pytest.approx(45 / 200)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 1), (1, 0), (3, 3), (10, 5), (7, 30), (60, 41)])
def test_mcnemar_matches_statsmodels(b, c):
    reference = mcnemar(np.array([[5, b], [c, 5]]), exact=True)
    result = mcnemar_exact(b, c)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert 0.0 < result.p_value <= 1.0


def test_mcnemar_without_discordant_pairs_has_p_value_one():
    result = mcnemar_exact(0, 0)
    assert result.n_discordant == 0
    assert result.p_value == 1.0


def test_mcnemar_refuses_float_counts():
    with pytest.raises(StatsError):
        mcnemar_exact(10.0, 5)  # type: ignore[arg-type]


# -- kappa (reused from agreement.py) ---------------------------------------------------------
def test_kappa_reference_table_of_section_4():
    # given Cohen's 2×2 reference [[20, 5], [10, 15]] (rows evaluator, columns human)
    evaluator = ["unsupported"] * 25 + ["supported"] * 25
    human = ["unsupported"] * 20 + ["supported"] * 5 + ["unsupported"] * 10 + ["supported"] * 15
    # when it is audited
    kappa = audit(evaluator, human, ERROR).kappa
    # then kappa, its standard error and interval are the reference's
    assert kappa.kappa == pytest.approx(0.4, abs=1e-12)
    assert kappa.se == pytest.approx(0.126996, abs=1e-6)
    assert kappa.ci_low == pytest.approx(0.151092, abs=1e-6)
    assert kappa.ci_high == pytest.approx(0.648908, abs=1e-6)


def test_kappa_of_reference_audit_table_matches_statsmodels():
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    kappa = audit(evaluator, human, ERROR).kappa
    reference = cohens_kappa(np.array([[40, 5], [10, 145]]))
    assert kappa.kappa == pytest.approx(reference.kappa, rel=1e-9)
    assert kappa.se == pytest.approx(reference.std_kappa, rel=1e-9)
    assert kappa.ci_low == pytest.approx(reference.kappa_low, rel=1e-9)
    assert kappa.ci_high == pytest.approx(reference.kappa_upp, rel=1e-9)


def test_label_kappa_over_the_schema():
    # given an evaluator that speaks the people's three-label schema
    evaluator = [
        "supported",
        "supported",
        "unsupported",
        "contradicted",
        "unsupported",
        "supported",
    ]
    human = ["supported", "unsupported", "unsupported", "contradicted", "contradicted", "supported"]
    result = audit(evaluator, human, ERROR)
    # then the schema kappa equals statsmodels' on the 3×3 table (rows evaluator)
    table = np.array([[1, 0, 0], [0, 2, 1], [1, 0, 1]])  # contradicted, supported, unsupported
    assert result.label_kappa.kappa == pytest.approx(cohens_kappa(table).kappa, rel=1e-9)


def test_label_kappa_undefined_for_a_binary_judge_vocabulary():
    evaluator = ["hallucinated", "faithful", "faithful", "hallucinated"]
    human = ["unsupported", "supported", "unsupported", "supported"]
    result = audit(evaluator, human, BINARY_JUDGE)
    assert result.label_kappa.kappa is None
    assert result.label_kappa.reason == LABELS_NOT_COMPARABLE
    # the binary kappa is still defined
    assert result.kappa.kappa == pytest.approx(0.0, abs=1e-12)


# -- confusion matrix: nothing dropped --------------------------------------------------------
def test_unavailable_and_unresolved_have_their_own_row_and_column():
    # given items with an unavailable evaluator label or an unresolved human label
    evaluator = ["unsupported", None, UNAVAILABLE, "supported", "supported", "unsupported", None]
    human = ["unsupported", "supported", None, UNRESOLVED, "supported", "contradicted", None]
    # when the matrix is built
    matrix = confusion_matrix(evaluator, human, ERROR)
    # then the sentinels close the axes and every item is counted
    assert matrix.evaluator_labels[-1] == UNAVAILABLE
    assert matrix.human_labels[-1] == UNRESOLVED
    assert matrix.n_total == len(evaluator)
    table = matrix.as_array()
    assert table[-1, -1] == 2  # unavailable × unresolved
    assert table.sum() == 7
    binary = matrix.binary
    assert (binary.tp, binary.fp, binary.fn, binary.tn) == (2, 0, 0, 1)
    assert binary.unavailable_negative == 1
    assert binary.unavailable_unresolved == 2
    assert binary.unresolved_unflagged == 1
    assert (binary.n_compared, binary.n_unavailable, binary.n_unresolved) == (3, 3, 3)
    assert binary.n_total == 7
    assert sum(map(sum, binary.as_table())) == 7


def test_metrics_use_the_core_but_report_what_is_outside_it():
    evaluator = ["unsupported", "supported", None, "unsupported"]
    human = ["unsupported", "supported", "unsupported", None]
    result = audit(evaluator, human, ERROR)
    assert (result.n_total, result.n_compared, result.n_unavailable, result.n_unresolved) == (
        4,
        2,
        1,
        1,
    )
    assert result.accuracy.denominator == 2


def test_declared_orders_keep_unused_labels_and_sentinels_even_when_empty():
    matrix = confusion_matrix(
        ["supported"],
        ["supported"],
        ERROR,
        evaluator_order=["unsupported", "supported"],
        human_order=["supported", "unsupported", "contradicted"],
    )
    assert matrix.evaluator_labels == ("unsupported", "supported", UNAVAILABLE)
    assert matrix.human_labels == ("supported", "unsupported", "contradicted", UNRESOLVED)
    assert matrix.counts == ((0, 0, 0, 0), (1, 0, 0, 0), (0, 0, 0, 0))


def test_undeclared_labels_follow_the_declared_ones_sorted():
    matrix = confusion_matrix(
        ["b", "a", "supported"], ["x", "y", "supported"], ERROR, evaluator_order=["supported"]
    )
    assert matrix.evaluator_labels == ("supported", "a", "b", UNAVAILABLE)
    assert matrix.human_labels == ("supported", "x", "y", UNRESOLVED)


def test_matrix_counts_are_immutable():
    matrix = confusion_matrix(["supported"], ["supported"], ERROR)
    array = matrix.as_array()
    array[0, 0] = 99
    assert matrix.counts[0][0] == 1


# -- undefined --------------------------------------------------------------------------------
def test_no_human_positives_leaves_sensitivity_undefined():
    evaluator, human = labels_from_counts(0, 0, 3, 7)
    result = audit(evaluator, human, ERROR)
    assert result.sensitivity.value is None
    assert result.sensitivity.interval is None
    assert result.sensitivity.reason == NO_HUMAN_POSITIVES
    assert (result.sensitivity.numerator, result.sensitivity.denominator) == (0, 0)
    assert result.npv.reason is None and result.npv.value == 1.0
    assert result.specificity.value == pytest.approx(0.7)


def test_each_undefined_rate_names_its_empty_denominator():
    no_negatives = audit(*labels_from_counts(4, 2, 0, 0), ERROR)
    assert no_negatives.specificity.reason == NO_HUMAN_NEGATIVES
    no_flags = audit(*labels_from_counts(0, 3, 0, 5), ERROR)
    assert no_flags.ppv.reason == NO_EVALUATOR_POSITIVES
    all_flags = audit(*labels_from_counts(3, 0, 5, 0), ERROR)
    assert all_flags.npv.reason == NO_EVALUATOR_NEGATIVES


def test_empty_core_leaves_every_statistic_undefined():
    # given only unavailable or unresolved items
    result = audit([None, "supported"], ["supported", None], ERROR)
    # then nothing is computed from an empty core, and the reasons say so
    for proportion in (
        result.accuracy,
        result.sensitivity,
        result.specificity,
        result.ppv,
        result.npv,
        result.human_positive_rate,
        result.evaluator_positive_rate,
    ):
        assert proportion.value is None
        assert proportion.reason == NO_COMPARED_ITEMS
    assert result.kappa.kappa is None
    assert result.kappa.reason == FEWER_THAN_TWO_SHARED_UNITS
    assert result.mcnemar.p_value == 1.0
    assert result.n_total == 2


def test_no_items_at_all():
    result = audit([], [], ERROR)
    assert result.n_total == 0
    assert result.accuracy.reason == NO_COMPARED_ITEMS


def test_constant_labels_leave_kappa_undefined_not_one():
    result = audit(["supported"] * 5, ["supported"] * 5, ERROR)
    assert result.kappa.kappa is None
    assert result.kappa.reason == NO_VARIATION
    assert result.accuracy.value == 1.0


# -- input checks -----------------------------------------------------------------------------
def test_misaligned_labels_are_refused():
    with pytest.raises(StatsError):
        audit(["supported"], [], ERROR)


def test_a_single_string_is_not_a_label_sequence():
    with pytest.raises(StatsError):
        audit("supported", "supported", ERROR)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "positive", [frozenset(), frozenset({UNAVAILABLE}), frozenset({UNRESOLVED})]
)
def test_polarity_refuses_empty_or_sentinel_positives(positive):
    with pytest.raises(StatsError):
        Polarity(name="x", human_positive=positive, evaluator_positive=frozenset({"a"}))


def test_declared_order_may_not_repeat():
    with pytest.raises(StatsError):
        confusion_matrix([], [], ERROR, human_order=["a", "a"])


@pytest.mark.parametrize("weights", [[1.0], [1.0, 0.0], [1.0, float("nan")], [1.0, -2.0]])
def test_bad_weights_are_refused(weights):
    with pytest.raises(StatsError):
        audit(["supported", "supported"], ["supported", "supported"], ERROR, weights=weights)


# -- weighted population estimates ------------------------------------------------------------
def test_equal_weights_reproduce_the_sample_rates():
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    result = audit(evaluator, human, ERROR, weights=np.full(200, 3.0))
    assert result.weighted is not None
    assert result.weighted.sensitivity == pytest.approx(0.8)
    assert result.weighted.specificity == pytest.approx(145 / 150)
    assert result.weighted.accuracy == pytest.approx(0.925)
    assert result.weighted.reasons == ()


def test_weights_undo_a_verdict_stratified_sample():
    # given a population of 1,000 flagged items (PPV 0.8) and 9,000 unflagged ones (NPV 0.95),
    # audited with 100 flagged (pi = 0.1) and 100 unflagged (pi = 1/90)
    evaluator, human = labels_from_counts(80, 5, 20, 95)
    weights = np.array([10.0] * 80 + [90.0] * 5 + [10.0] * 20 + [90.0] * 95)
    result = audit(evaluator, human, ERROR, weights=weights)
    # then the weighted sensitivity is the population's: 800 / (800 + 450)
    assert result.weighted is not None
    assert result.weighted.sensitivity == pytest.approx(800 / 1250)
    assert result.weighted.specificity == pytest.approx(8550 / (8550 + 200))
    assert result.weighted.ppv == pytest.approx(0.8)
    assert result.weighted.npv == pytest.approx(0.95)
    assert result.weighted.human_positive_rate == pytest.approx(1250 / 10000)
    # while the sample's own sensitivity over-represents the flagged stratum
    assert result.sensitivity.value == pytest.approx(80 / 85)


def test_weighted_rates_report_their_undefined_denominators():
    evaluator, human = labels_from_counts(0, 0, 2, 3)
    result = audit(evaluator, human, ERROR, weights=np.ones(5))
    assert result.weighted is not None
    assert result.weighted.sensitivity is None
    assert ("sensitivity", NO_HUMAN_POSITIVES) in result.weighted.reasons


# -- per slice --------------------------------------------------------------------------------
def test_per_slice_tables_add_up_and_share_their_axes():
    # given 5 slices with different agreement
    rng = np.random.default_rng(7)
    n = 400
    human = rng.choice(["supported", "unsupported", "contradicted", None], size=n).tolist()
    evaluator = rng.choice(["supported", "unsupported", None], size=n).tolist()
    slices = rng.choice(["law", "medicine", "news", "science", None], size=n).tolist()
    # when every slice is audited
    per_slice = audit_by_slice(evaluator, human, slices, ERROR)
    overall = audit(evaluator, human, ERROR)
    # then the slices (None included) partition the items, cell by cell
    assert set(per_slice) == {"law", "medicine", "news", "science", None}
    stacked = sum(result.matrix.as_array() for result in per_slice.values())
    np.testing.assert_array_equal(stacked, overall.matrix.as_array())
    axes = {(r.matrix.evaluator_labels, r.matrix.human_labels) for r in per_slice.values()}
    assert axes == {(overall.matrix.evaluator_labels, overall.matrix.human_labels)}


def test_a_slice_without_positives_reports_undefined_sensitivity():
    evaluator = ["unsupported", "supported", "supported", "supported"]
    human = ["unsupported", "supported", "supported", "supported"]
    per_slice = audit_by_slice(evaluator, human, ["a", "a", "b", "b"], ERROR)
    assert per_slice["a"].sensitivity.value == 1.0
    assert per_slice["b"].sensitivity.reason == NO_HUMAN_POSITIVES


def test_per_slice_weights_follow_their_items():
    evaluator, human = labels_from_counts(2, 2, 0, 0)
    per_slice = audit_by_slice(
        evaluator, human, ["a", "b", "a", "b"], ERROR, weights=[1.0, 1.0, 3.0, 1.0]
    )
    assert per_slice["a"].weighted is not None
    assert per_slice["a"].weighted.sensitivity == pytest.approx(1 / 4)


def test_per_slice_refuses_misaligned_slices():
    with pytest.raises(StatsError):
        audit_by_slice(["supported"], ["supported"], [], ERROR)


# -- disagreements ----------------------------------------------------------------------------
def test_disagreement_list_keeps_only_core_discordances_in_input_order():
    records = [
        AuditRecord("q1", "unsupported", "supported", "the source says so"),
        AuditRecord("q2", "supported", "supported"),
        AuditRecord("q3", "supported", "contradicted", "page 4 contradicts"),
        AuditRecord("q4", None, "unsupported"),
        AuditRecord("q5", "unsupported", None),
        AuditRecord("q6", "contradicted", "unsupported", "weaker than contradicted"),
    ]
    rows = disagreements(records, ERROR)
    assert [(r.item, r.kind) for r in rows] == [("q1", "false positive"), ("q3", "false negative")]
    assert rows[1].as_row() == (
        "q3",
        "supported",
        "contradicted",
        "false negative",
        "page 4 contradicts",
    )
    assert len(DISAGREEMENT_COLUMNS) == len(rows[0].as_row())
    # at label level, same-polarity label mismatches are listed too
    labelled = disagreements(records, ERROR, level="label")
    assert [r.item for r in labelled] == ["q1", "q3", "q6"]
    assert labelled[2].kind == "label mismatch"


def test_disagreements_match_mcnemar_counts():
    evaluator, human = labels_from_counts(40, 10, 5, 145)
    records = [
        AuditRecord(f"i{i}", e, h) for i, (e, h) in enumerate(zip(evaluator, human, strict=True))
    ]
    rows = disagreements(records, ERROR)
    assert sum(r.kind == "false negative" for r in rows) == 10
    assert sum(r.kind == "false positive" for r in rows) == 5


def test_disagreements_with_a_binary_judge_vocabulary():
    rows = disagreements([AuditRecord("a", "faithful", "unsupported")], BINARY_JUDGE)
    assert rows[0].kind == "false negative"


def test_disagreement_level_is_checked():
    with pytest.raises(StatsError):
        disagreements([], ERROR, level="schema")  # type: ignore[arg-type]


# -- properties -------------------------------------------------------------------------------
LABEL = st.sampled_from(["supported", "unsupported", "contradicted", None])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(LABEL, LABEL), max_size=60), st.sampled_from([0.8, 0.95, 0.99]))
def test_intervals_contain_their_estimates_and_counts_add_up(pairs, confidence):
    evaluator = [e for e, _ in pairs]
    human = [h for _, h in pairs]
    result = audit(evaluator, human, ERROR, confidence=confidence)
    b = result.matrix.binary
    assert b.n_total == result.matrix.n_total == len(pairs)
    assert b.n_compared + b.n_unavailable + b.unresolved_flagged + b.unresolved_unflagged == len(
        pairs
    )
    for proportion in (
        result.accuracy,
        result.sensitivity,
        result.specificity,
        result.ppv,
        result.npv,
    ):
        if proportion.defined:
            assert proportion.interval is not None
            assert proportion.interval.contains(proportion.value)
            assert 0.0 <= proportion.lower <= proportion.upper <= 1.0
        else:
            assert proportion.denominator == 0 and proportion.reason
    if result.kappa.defined:
        assert -1.0 <= result.kappa.kappa <= 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(LABEL, LABEL), min_size=1, max_size=40), st.randoms())
def test_metrics_do_not_depend_on_item_order(pairs, random):
    shuffled = list(pairs)
    random.shuffle(shuffled)
    first = audit([e for e, _ in pairs], [h for _, h in pairs], ERROR)
    second = audit([e for e, _ in shuffled], [h for _, h in shuffled], ERROR)
    assert first == second
