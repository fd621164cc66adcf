"""reliability_recompute: per-person figures from votes, resolutions and the queue, checked by hand.

Six items, two votes each (answer level):

=======  =====  =====  =====  =====================
item     alice  bob    carol  resolution
=======  =====  =====  =====  =====================
0        adm    adm           consensus adm
1        inadm  adm           adjudicated inadm
2        inadm         inadm  consensus inadm
3               adm    inadm  adjudicated inadm
4        adm    inadm         in the queue, open
5               adm    adm    consensus adm
=======  =====  =====  =====  =====================
"""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from django.utils import timezone
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from certification.models import ReliabilityReport
from certification.selectors import derived_freshness, item_posterior_get
from certification.services import reliability_recompute
from certification.services.derived import derived_recompute
from certification.stats.agreement import FEWER_THAN_TWO_UNITS, krippendorff_alpha_nominal
from certification.stats.reliability import NO_LABEL, NOT_IDENTIFIED, dawid_skene
from certification.tasks import DERIVED_COMPUTE
from labeling.derived import derived_mark
from labeling.exceptions import NotFound
from labeling.models import (
    DerivedKind,
    Disagreement,
    Item,
    LabelPolicy,
    Resolution,
    ResolutionStatus,
)
from labeling.selectors import project_votes
from labeling.services import item_claim_next, project_labelling_start
from labeling.services.gold import gold_reference_set
from tests.conftest import native_record
from tests.factories import UserFactory
from tests.labeling.services.test_gold import reference, submit

pytestmark = pytest.mark.django_db

ADM, INADM = "admissible", "inadmissible"


def _resolve(item, status, answer, adjudicator=None):
    policy = LabelPolicy.objects.filter(project=item.project).order_by("-version").first()
    resolution = Resolution.objects.create(
        item=item,
        number=1,
        status=status,
        policy=policy,
        answer_label=answer,
        adjudicator=adjudicator,
    )
    Item.objects.filter(pk=item.pk).update(resolution=resolution)
    return resolution


def _queue(item, closed_by=None):
    Disagreement.objects.create(
        item=item,
        opened_at=timezone.now(),
        answer_differs=True,
        claims_differ=False,
        closed_at=timezone.now() if closed_by else None,
        closed_by=closed_by,
    )


@pytest.fixture
def world(project, items, cast_vote):
    alice, bob, carol, judge = UserFactory(), UserFactory(), UserFactory(), UserFactory()
    votes = {
        0: {alice: ADM, bob: ADM},
        1: {alice: INADM, bob: ADM},
        2: {alice: INADM, carol: INADM},
        3: {bob: ADM, carol: INADM},
        4: {alice: ADM, bob: INADM},
        5: {bob: ADM, carol: ADM},
    }
    for index, row in votes.items():
        for user, label in row.items():
            cast_vote(items[index], user, label)
    _resolve(items[0], ResolutionStatus.CONSENSUS, ADM)
    _queue(items[1], _resolve(items[1], ResolutionStatus.ADJUDICATED, INADM, judge))
    _resolve(items[2], ResolutionStatus.CONSENSUS, INADM)
    _queue(items[3], _resolve(items[3], ResolutionStatus.ADJUDICATED, INADM, judge))
    _queue(items[4])
    _resolve(items[5], ResolutionStatus.CONSENSUS, ADM)
    return {"alice": alice, "bob": bob, "carol": carol}


def _person(report, user):
    return next(p for p in report.result["people"] if p["rater"] == f"user:{user.pk}")


def _ci(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return pytest.approx(ci.low), pytest.approx(ci.high)


def _check(rate, k, n):
    assert (rate["numerator"], rate["denominator"]) == (k, n)
    assert rate["estimate"] == pytest.approx(k / n)
    assert (rate["lower"], rate["upper"]) == _ci(k, n)


def test_rates_against_resolutions_the_queue_and_the_adjudicator(project, world):
    report = reliability_recompute(project_id=project.pk)
    expected = {
        # (accuracy k/n, disputed k/n, sided with k/n, queued k/n)
        "alice": ((3, 3), (2, 4), (1, 1), (2, 4)),
        "bob": ((2, 4), (3, 5), (0, 2), (3, 5)),
        "carol": ((3, 3), (1, 3), (1, 1), (1, 3)),
    }
    for name, (accuracy, disputed, sided, queued) in expected.items():
        person = _person(report, world[name])
        answer = person["levels"]["answer"]
        _check(answer["resolutions"]["accuracy"], *accuracy)
        _check(answer["disputed"], *disputed)
        _check(answer["sided_with"], *sided)
        _check(person["queued"], *queued)
        assert answer["gold"] is None  # no gold item: kept apart, not mixed in
    bob = _person(report, world["bob"])["levels"]["answer"]["resolutions"]
    # rows: reference, columns: bob's label (items 0, 1, 3, 5)
    assert bob["labels"] == [ADM, INADM]
    assert bob["confusion"] == [[2, 0], [2, 0]]
    _check(bob["per_label"][ADM], 2, 2)
    _check(bob["per_label"][INADM], 0, 2)
    refs, votes = [ADM, INADM, INADM, ADM], [ADM, ADM, ADM, ADM]
    assert bob["kappa"]["value"] == pytest.approx(cohen_kappa_score(refs, votes))
    json.dumps(report.result, allow_nan=False)


def test_the_threshold_flag_and_alpha_without_the_flagged(project, world):
    # bob's accuracy 2/4 has the exact upper bound 0.932: below a threshold of 0.95
    LabelPolicy.objects.filter(project=project).update(qualification_threshold=0.95)
    report = reliability_recompute(project_id=project.pk)
    assert report.result["threshold"] == 0.95
    flags = {n: _person(report, u)["flags"]["below_threshold"] for n, u in world.items()}
    assert flags == {"alice": [], "bob": ["answer"], "carol": []}
    votes = project_votes(project=project).answer
    codes = {ADM: 0, INADM: 1}
    data = np.array([[np.nan if v is None else codes[v] for v in row] for row in votes.ratings]).T
    keep = [i for i, r in enumerate(votes.raters) if r != f"user:{world['bob'].pk}"]
    alpha = report.result["alpha"]["answer"]
    assert alpha["left_out"] == [f"user:{world['bob'].pk}"]
    assert alpha["all"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    )
    # without bob, alice and carol share one item only: alpha is undefined (the
    # existing, checked module says why) and shown so, never as a number
    without = krippendorff_alpha_nominal([[row[i] for i in keep] for row in votes.ratings])
    assert alpha["without_flagged"] == {"value": None, "reason": without.reason}
    assert without.reason == FEWER_THAN_TWO_UNITS
    # no label changed: the votes are those of the selector, unchanged
    assert project_votes(project=project).answer == votes


def test_the_stored_model_estimate_is_the_dawid_skene_fit_of_the_votes(project, world, items):
    report = reliability_recompute(project_id=project.pk)
    votes = project_votes(project=project).answer
    fit = dawid_skene([list(r) for r in votes.ratings], votes.raters, votes.units)
    stored = report.result["dawid_skene"]["answer"]
    assert stored["labels"] == list(fit.labels) and stored["reason"] is None
    assert (stored["iterations"], stored["converged"]) == (fit.iterations, True)
    assert stored["change"] == fit.change < stored["tol"] == fit.tol
    for unit, row in zip(fit.units, fit.posteriors, strict=True):
        assert stored["posteriors"][str(unit)] == pytest.approx(list(row))
    assert report.result["assumptions"][2].startswith("annotators answer independently")
    # the adjudication page's view of one item: labels by probability, no rater in it
    posterior = item_posterior_get(project=project, item_id=items[4].pk, claim_ids=())
    assert [label for label, _ in posterior.answer] == sorted(
        fit.labels,
        key=lambda lab: -fit.posteriors[fit.units.index(items[4].pk)][fit.labels.index(lab)],
    )
    assert sum(p for _, p in posterior.answer) == pytest.approx(1.0)


def test_recomputing_unchanged_inputs_writes_nothing(project, world):
    first = reliability_recompute(project_id=project.pk)
    again = reliability_recompute(project_id=project.pk)
    assert ReliabilityReport.objects.count() == 1
    assert (again.computed_at, again.input_sha256) == (first.computed_at, first.input_sha256)


def test_a_project_without_votes_has_an_empty_report_and_a_missing_one_is_not_found(project):
    report = reliability_recompute(project_id=project.pk)
    assert report.result["people"] == []
    undefined = {"reason": NO_LABEL}
    assert report.result["dawid_skene"] == {"answer": undefined, "claim": undefined}
    with pytest.raises(NotFound):
        reliability_recompute(project_id=project.pk + 999)


def test_a_new_change_leaves_the_stored_figures_stale_until_recomputed(
    project, world, items, cast_vote
):
    derived_mark(project_id=project.pk, kinds=[DerivedKind.RELIABILITY])
    derived_recompute(
        project_id=project.pk,
        kind=DerivedKind.RELIABILITY,
        compute=DERIVED_COMPUTE[DerivedKind.RELIABILITY],
    )
    assert derived_freshness(project=project)[DerivedKind.RELIABILITY].current
    stored = ReliabilityReport.objects.get(project=project).input_sha256
    # a vote written through the tables marks nothing by itself; the service path is tested
    # in test_derived_results (every vote marks agreement and reliability)
    derived_mark(project_id=project.pk, kinds=[DerivedKind.RELIABILITY])
    cast_vote(items[4], UserFactory(), ADM)
    freshness = derived_freshness(project=project)[DerivedKind.RELIABILITY]
    assert (freshness.current, freshness.newer_changes) == (False, 1)
    assert ReliabilityReport.objects.get(project=project).input_sha256 == stored


def test_accuracy_on_gold_items_is_kept_apart_from_accuracy_against_resolutions(
    project, member, import_records, django_capture_on_commit_callbacks
):
    # given two gold items (reference: admissible, every claim not_supported), served first
    import_records([native_record("g1"), native_record("g2")])
    manager = member("manager")
    gold_ids = sorted(Item.objects.filter(project=project).values_list("pk", flat=True))[:2]
    for item_id in gold_ids:
        gold_reference_set(project=project, item_id=item_id, actor=manager, data=reference(item_id))
    LabelPolicy.objects.filter(project=project).update(gold_rate=1.0)
    project_labelling_start(project=project, actor=manager)
    right, wrong = member("annotator"), member("annotator")
    for annotator, answer in ((right, ADM), (wrong, INADM)):
        for _ in gold_ids:
            assignment = item_claim_next(project=project, actor=annotator)
            assert assignment.gold
            with django_capture_on_commit_callbacks(execute=True):
                submit(project, assignment, annotator, answer=answer)
    # then the background recomputation ran (gold work marks reliability) and is current
    assert derived_freshness(project=project)[DerivedKind.RELIABILITY].current
    report = ReliabilityReport.objects.get(project=project)
    good = _person(report, right)["levels"]
    bad = _person(report, wrong)["levels"]
    _check(good["answer"]["gold"]["accuracy"], 2, 2)
    _check(bad["answer"]["gold"]["accuracy"], 0, 2)
    n_claims = good["claim"]["gold"]["accuracy"]["denominator"]
    _check(good["claim"]["gold"]["accuracy"], n_claims, n_claims)  # claims all not_supported
    # gold work is no vote: nothing against resolutions, no dispute, no model estimate
    assert good["answer"]["resolutions"] is None and good["answer"]["n_labels"] == 0
    assert report.result["dawid_skene"]["answer"] == {"reason": NO_LABEL}


def test_one_annotators_votes_give_no_model_estimate_and_say_why(project, items, cast_vote):
    # given votes of one annotator only: the latent-class model is not identified
    alice = UserFactory()
    for index, label in enumerate((ADM, INADM, ADM)):
        cast_vote(items[index], alice, label)
    report = reliability_recompute(project_id=project.pk)
    assert report.result["dawid_skene"]["answer"] == {"reason": NOT_IDENTIFIED}
