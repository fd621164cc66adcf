"""agreement_recompute: stores both levels from the current votes; idempotent, order-independent."""

from __future__ import annotations

import json
import threading

import krippendorff
import numpy as np
import pytest
from django.core.exceptions import ValidationError
from statsmodels.stats import inter_rater

from certification.models import AgreementReport
from certification.services import agreement_recompute, votes_sha256
from certification.services.derived import SupersededInputs
from certification.stats.agreement import FEWER_THAN_TWO_RATERS, NO_VARIATION, agreement_summary
from labeling.exceptions import NotFound
from labeling.models import CANNOT_DECIDE, LabelPolicy
from labeling.selectors import project_votes
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _content(report):
    return (report.project_id, report.computed_at, report.input_sha256, report.answer, report.claim)


@pytest.fixture
def voted(items, cast_vote, prior_vote):
    """Two annotators and one prior annotator over four items, disagreeing somewhat."""
    alice, bob = UserFactory(), UserFactory()
    a0, a1, a2, a3 = items[0], items[1], items[2], items[4]  # a0, a2, a3 have 2 claims
    cast_vote(a0, alice, "admissible", claims=["supported", "supported"])
    cast_vote(a0, bob, "admissible", claims=["supported", "not_supported"])
    cast_vote(a1, alice, "inadmissible")
    cast_vote(a1, bob, "admissible")
    cast_vote(a2, alice, "inadmissible", claims=["contradicted", "supported"])
    cast_vote(a2, bob, "inadmissible", claims=["contradicted", "supported"])
    prior_vote(a2, "p1", "inadmissible", claims=["contradicted", "not_supported"])
    cast_vote(a3, alice, "admissible", claims=["supported", "supported"])
    return alice, bob


def test_stores_both_levels_with_rater_ids(project, voted):
    alice, bob = voted
    # when
    report = agreement_recompute(project_id=project.pk)
    # then one row, with the figures of the stats module over the selector's matrices
    assert AgreementReport.objects.get() == report
    votes = project_votes(project=project)
    assert report.input_sha256 == votes_sha256(votes)
    answer = report.answer
    assert answer["raters"] == ["prior:p1", f"user:{alice.pk}", f"user:{bob.pk}"]
    assert (answer["n_units"], answer["n_pairable_units"], answer["n_votes"]) == (4, 3, 8)
    expected = agreement_summary(votes.answer.ratings, votes.answer.raters)
    assert answer["alpha"] == {"value": expected.alpha.value, "reason": None}
    # per pairable unit: a0 agree, a1 disagree, a2 all three agree
    assert answer["percent_agreement"] == {"value": pytest.approx(2 / 3), "reason": None}
    claim = report.claim
    assert (claim["n_units"], claim["n_pairable_units"], claim["n_votes"]) == (6, 4, 12)
    assert claim["label_counts"] == {"contradicted": 3, "not_supported": 2, "supported": 7}
    pair = next(p for p in claim["pairs"] if p["rater_a"] == f"user:{alice.pk}")
    assert pair["rater_b"] == f"user:{bob.pk}"
    assert pair["n"] == 4
    assert pair["observed_agreement"] == 0.75
    # four shared units over three labels: kappa is given, its interval flagged as not meaningful
    assert pair["kappa"] is not None
    assert pair["interval_reason"] == (
        "not meaningful on 4 shared units: the large-sample interval needs about 2k² = 18 "
        "for k = 3 labels"
    )
    # the test of kappa = 0 beside it, as statsmodels computes it from the pair's table
    # (alice on rows: contradicted, not_supported, supported)
    theirs = inter_rater.cohens_kappa(np.array([[1, 0, 0], [0, 0, 0], [0, 1, 2]]))
    assert pair["kappa"] == pytest.approx(theirs.kappa, abs=1e-12)
    assert pair["se0"] == pytest.approx(theirs.std_kappa0, rel=1e-9)
    assert pair["z"] == pytest.approx(theirs.z_value, rel=1e-9)
    assert pair["p_value"] == pytest.approx(theirs.pvalue_two_sided, rel=1e-9)
    assert claim["pairs_reason"] is None
    assert report.computed_at.tzinfo is not None


def test_a_single_rater_has_no_pair_and_the_report_says_why(project, items, cast_vote):
    alice = UserFactory()
    cast_vote(items[0], alice, "admissible")
    cast_vote(items[1], alice, "inadmissible")
    report = agreement_recompute(project_id=project.pk)
    assert (report.answer["pairs"], report.answer["pairs_reason"]) == ([], FEWER_THAN_TWO_RATERS)


def test_the_project_page_shows_the_flag_in_place_of_the_interval(project, voted, login):
    agreement_recompute(project_id=project.pk)
    page = login("manager").get(f"/p/{project.slug}/").content.decode()
    assert "not meaningful on 4 shared units" in page


def test_json_holds_no_nan(project, voted):
    report = agreement_recompute(project_id=project.pk)
    # allow_nan=False raises on NaN or infinity anywhere
    json.dumps({"answer": report.answer, "claim": report.claim}, allow_nan=False)


def test_undefined_statistics_are_null_with_a_reason(project, items, cast_vote):
    alice, bob = UserFactory(), UserFactory()
    for item in items[:3]:
        cast_vote(item, alice, "admissible")
        cast_vote(item, bob, "admissible")
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["alpha"] == {"value": None, "reason": NO_VARIATION}
    assert report.answer["percent_agreement"] == {"value": 1.0, "reason": None}
    assert report.answer["pairs"][0]["kappa"] is None
    assert report.answer["pairs"][0]["reason"] == NO_VARIATION
    # nobody labelled a claim
    assert report.claim["n_votes"] == 0
    assert report.claim["alpha"]["value"] is None


def test_cannot_decide_and_evidence_unavailable_are_values(project, items, cast_vote):
    alice, bob = UserFactory(), UserFactory()
    cast_vote(items[0], alice, CANNOT_DECIDE, claims=[("evidence_unavailable", "not_found")])
    cast_vote(items[0], bob, "evidence_unavailable", answer_reason="blocked")
    cast_vote(items[1], alice, "evidence_unavailable", answer_reason="blocked")
    cast_vote(items[1], bob, "evidence_unavailable", answer_reason="not_found")
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["label_counts"] == {
        CANNOT_DECIDE: 1,
        "evidence_unavailable:blocked": 2,
        "evidence_unavailable:not_found": 1,
    }
    assert report.answer["percent_agreement"]["value"] == 0.0
    assert report.claim["label_counts"] == {"evidence_unavailable:not_found": 1}


def test_only_the_current_revision_votes(project, items, cast_vote):
    alice, bob = UserFactory(), UserFactory()
    cast_vote(items[0], alice, "inadmissible")
    cast_vote(items[0], alice, "admissible")  # revision 2 replaces it
    cast_vote(items[0], bob, "admissible")
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["label_counts"] == {"admissible": 2}
    assert report.answer["n_votes"] == 2


def test_prior_without_answer_label_votes_on_claims_only(project, items, cast_vote, prior_vote):
    prior_vote(items[0], "expert", None, claims=["supported", None])
    cast_vote(items[0], UserFactory(), "admissible", claims=["supported", "supported"])
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["raters"] == [report.answer["raters"][0]]
    assert report.answer["raters"][0].startswith("user:")
    assert report.claim["raters"][0] == "prior:expert"
    assert report.claim["n_votes"] == 3


def test_second_run_on_the_same_votes_writes_nothing(project, voted):
    first = _content(agreement_recompute(project_id=project.pk))
    # when it runs again
    again = agreement_recompute(project_id=project.pk)
    # then the row is unchanged, down to computed_at
    assert _content(again) == first
    assert _content(AgreementReport.objects.get()) == first


def test_result_depends_only_on_the_votes_not_on_run_order(project, items, cast_vote, voted):
    alice, bob = voted
    # given a run for an earlier state, then a vote, then two runs (the late one "out of order")
    agreement_recompute(project_id=project.pk)
    cast_vote(items[5], alice, "abstained")
    cast_vote(items[5], bob, "abstained")
    after_second = _content(agreement_recompute(project_id=project.pk))
    after_late = _content(agreement_recompute(project_id=project.pk))
    assert after_late == after_second
    # then the stored figures equal a computation from scratch
    AgreementReport.objects.all().delete()
    fresh = agreement_recompute(project_id=project.pk)
    assert (fresh.input_sha256, fresh.answer, fresh.claim) == after_second[2:]


def test_votes_in_any_insertion_order_give_the_same_report(project, items, cast_vote):
    users = [UserFactory(), UserFactory()]
    plan = [
        (items[0], 0, "admissible"),
        (items[0], 1, "inadmissible"),
        (items[1], 0, "admissible"),
        (items[1], 1, "admissible"),
    ]
    for item, who, label in reversed(plan):
        cast_vote(item, users[who], label)
    reversed_report = agreement_recompute(project_id=project.pk)
    digest = votes_sha256(project_votes(project=project))
    assert reversed_report.input_sha256 == digest


def test_new_votes_change_the_report(project, items, cast_vote, voted):
    first = agreement_recompute(project_id=project.pk)
    first_content = _content(first)
    cast_vote(items[5], voted[0], "abstained")
    second = agreement_recompute(project_id=project.pk)
    assert second.pk == first.pk
    assert second.input_sha256 != first_content[2]
    assert second.computed_at > first_content[1]
    assert second.answer["n_votes"] == first_content[3]["n_votes"] + 1


def test_a_run_on_older_votes_never_overwrites_a_report_of_newer_ones(
    project, items, cast_vote, voted, monkeypatch
):
    """The votes are read outside the write; the report of a later read is kept."""
    from datetime import timedelta

    from django.utils import timezone

    from certification.services import agreement as agreement_module

    newer = agreement_recompute(project_id=project.pk)
    cast_vote(items[5], voted[0], "abstained")
    # A slow run that read the votes an hour before the stored report's read finishes now.
    earlier = newer.computed_at - timedelta(hours=1)
    monkeypatch.setattr(agreement_module.timezone, "now", lambda: earlier)
    assert timezone.now() == earlier
    with pytest.raises(SupersededInputs):
        agreement_recompute(project_id=project.pk)
    assert _content(AgreementReport.objects.get(project=project)) == _content(newer)
    monkeypatch.undo()
    fresh = agreement_recompute(project_id=project.pk)
    assert fresh.answer["n_votes"] == newer.answer["n_votes"] + 1


def test_a_superseded_run_keeps_the_change_marks_so_the_figure_stays_stale(
    project, items, cast_vote, voted, monkeypatch
):
    """A run on a lagging clock writes nothing and deletes no mark: never "current" unseen."""
    from datetime import timedelta

    from django.utils import timezone

    from certification.selectors import derived_freshness
    from certification.services.derived import INLINE_RUNS_MAX, derived_recompute
    from certification.tasks import DERIVED_COMPUTE
    from labeling.derived import derived_mark
    from labeling.models import DerivedKind

    def recompute():
        return derived_recompute(
            project_id=project.pk,
            kind=DerivedKind.AGREEMENT,
            compute=lambda pid: DERIVED_COMPUTE[DerivedKind.AGREEMENT](pid),
        )

    assert recompute() == "done"
    stored = AgreementReport.objects.get(project=project)
    cast_vote(items[5], voted[0], "abstained")
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    lagging = stored.computed_at - timedelta(seconds=2)
    monkeypatch.setattr(timezone, "now", lambda: lagging)
    runs = []
    compute = DERIVED_COMPUTE[DerivedKind.AGREEMENT]
    monkeypatch.setitem(
        DERIVED_COMPUTE, DerivedKind.AGREEMENT, lambda pid: runs.append(pid) or compute(pid)
    )
    recompute()
    # the superseded run schedules the next; run inline, they are bounded (they once recursed
    # until Python's recursion limit while the clock lagged)
    assert runs == [project.pk] * (1 + INLINE_RUNS_MAX)
    monkeypatch.undo()
    freshness = derived_freshness(project=project)["agreement"]
    assert not freshness.current and freshness.newer_changes == 1
    assert AgreementReport.objects.get(project=project).answer == stored.answer
    assert recompute() == "done"
    assert derived_freshness(project=project)["agreement"].current
    report = AgreementReport.objects.get(project=project)
    assert report.answer["n_votes"] == stored.answer["n_votes"] + 1


def test_project_without_votes_gets_an_empty_report(project):
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["n_units"] == 0
    assert report.answer["pairs"] == []


def test_missing_project_is_not_found(db):
    with pytest.raises(NotFound):
        agreement_recompute(project_id=987654)


def test_other_projects_votes_are_not_counted(project, items, cast_vote, import_records):
    from labeling.services import project_create
    from tests.conftest import native_record

    other = project_create(slug="other", name="Other")
    import_records([native_record("x1")], target=other)
    other_item = other.items.first()
    user = UserFactory()
    cast_vote(other_item, user, "admissible")
    cast_vote(items[0], user, "inadmissible")
    report = agreement_recompute(project_id=project.pk)
    assert report.answer["label_counts"] == {"inadmissible": 1}


def test_vote_selector_runs_one_statement_whatever_the_size(
    project, voted, django_assert_num_queries
):
    with django_assert_num_queries(1):
        project_votes(project=project)


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_runs_leave_one_row(project, voted):
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks and concurrent writers")
    barrier = threading.Barrier(4)
    errors = []

    def run():
        try:
            barrier.wait()
            agreement_recompute(project_id=project.pk)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    report = AgreementReport.objects.get(project=project)
    assert report.input_sha256 == votes_sha256(project_votes(project=project))


def test_alpha_uses_the_metric_of_the_declared_scale(project, voted, login):
    # given the claim labels declared ordinal, in the policy's order
    policy = LabelPolicy.objects.get(project=project)
    policy.claim_scale = "ordinal"
    policy.full_clean()
    policy.save()
    # when
    report = agreement_recompute(project_id=project.pk)
    # then claim alpha is the ordinal alpha of the krippendorff package over the ranks
    matrix = project_votes(project=project).claim
    rank = {label: float(i) for i, label in enumerate(policy.claim_labels)}
    data = np.array([[np.nan if v is None else rank[v] for v in row] for row in matrix.ratings]).T
    ordinal = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert report.claim["scale"] == "ordinal"
    assert report.claim["alpha"]["value"] == pytest.approx(ordinal, abs=1e-12)
    assert report.answer["scale"] == "nominal"
    # and the page and the API say which metric
    page = login("manager").get(f"/p/{project.slug}/").content.decode()
    assert 'data-scale="ordinal"' in page and "ordinal metric" in page


def test_a_numeric_scale_over_words_is_refused_naming_the_label(project):
    policy = LabelPolicy.objects.get(project=project)
    policy.answer_scale = "interval"
    with pytest.raises(ValidationError) as raised:
        policy.full_clean()
    first = policy.answer_labels[0]
    assert raised.value.message_dict["answer_scale"] == [
        f"label {first!r} is not a number, as the interval scale needs"
    ]


@pytest.fixture
def imported(items, prior_vote):
    """Three imported annotators over three items of two claims each; no vote made here."""
    a0, a2, a4 = items[0], items[2], items[4]
    prior_vote(a0, "p1", "admissible", claims=["supported", "contradicted"])
    prior_vote(a0, "p2", "admissible", claims=["supported", "not_supported"])
    prior_vote(a0, "p3", "inadmissible", claims=["contradicted", "not_supported"])
    prior_vote(a2, "p1", "inadmissible", claims=["not_supported", "supported"])
    prior_vote(a2, "p2", "inadmissible", claims=["contradicted", "supported"])
    prior_vote(a4, "p1", "admissible", claims=["supported", "not_supported"])
    prior_vote(a4, "p3", "abstained", claims=["supported", "contradicted"])


def _claim_alpha(project, order, level):
    """The krippendorff package's alpha of the claim votes, labels as their rank in ``order``."""
    matrix = project_votes(project=project).claim
    rank = {label: float(i) for i, label in enumerate(order)}
    data = np.array([[np.nan if v is None else rank[v] for v in row] for row in matrix.ratings]).T
    return krippendorff.alpha(reliability_data=data, level_of_measurement=level)


def test_a_scale_change_of_the_draft_recomputes_alpha_with_its_metric(
    project, imported, api, django_capture_on_commit_callbacks
):
    # given the figures of the imported votes under the draft, nominal
    policy = LabelPolicy.objects.get(project=project)
    first = agreement_recompute(project_id=project.pk)
    assert first.claim["scale"] == "nominal"
    nominal = _claim_alpha(project, policy.claim_labels, "nominal")
    assert first.claim["alpha"]["value"] == pytest.approx(nominal, abs=1e-12)
    client = api("manager")
    body = client.get(f"/api/projects/{project.slug}/policy/").json()
    skip = ("version", "frozen_at", "editable", "guideline_html")
    description = {k: v for k, v in body.items() if k not in skip}
    # when the manager declares the claim labels ordinal (the recomputation runs after commit)
    description["claim_scale"] = "ordinal"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.put(f"/api/projects/{project.slug}/policy/", description, format="json")
    assert response.status_code == 200, response.json()
    # then the same votes were recomputed with the ordinal metric over the policy's order
    report = AgreementReport.objects.get(project=project)
    ordinal = _claim_alpha(project, policy.claim_labels, "ordinal")
    assert report.claim["scale"] == "ordinal"
    assert report.claim["alpha"]["value"] == pytest.approx(ordinal, abs=1e-12)
    assert ordinal != pytest.approx(nominal, abs=1e-3)
    assert report.input_sha256 != first.input_sha256
    assert report.input_sha256 == votes_sha256(project_votes(project=project))
    assert report.answer == first.answer
