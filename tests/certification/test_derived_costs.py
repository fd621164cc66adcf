"""Derived results that read the whole project run only when their inputs changed, spaced by cost.

Issue 33: a resolution marks the calibration runs only when the item lies in a partition a spec
reads, the audits only when an audited evaluator labelled it (``labeling.derived.
derived_mark_touched`` with the tests ``certification.apps`` registers); a kind's next start
waits max(interval, (1 - share) / share x its last duration) after its last computation
(``certification.services.derived._spacing``), except a manager's explicit request; the audit
recomputation never overwrites figures of inputs read after its own.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from certification.models import AuditReport, DerivedResultState
from certification.services import audit as audit_service
from certification.services import audit_report_configure, audit_report_recompute
from certification.services import derived as derived_service
from certification.services.derived import (
    SupersededInputs,
    derived_recompute,
    derived_recompute_request,
    derived_schedule,
    spacing_gap,
)
from certification.tasks import DERIVED_COMPUTE
from labeling import engine
from labeling.models import DerivedChange, DerivedKind, Item, ItemStatus, Question, Role
from labeling.services import (
    AnnotationInput,
    adjudication_resolve,
    annotation_submit,
    item_claim_next,
    project_labelling_configure,
    project_labelling_start,
)
from tests.certification.audit_helpers import audited_project
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec, work_record
from tests.factories import calibration_record as rec
from tests.labeling.api.conftest import labels_input

pytestmark = pytest.mark.django_db

AGREEMENT, CALIBRATION = DerivedKind.AGREEMENT, DerivedKind.CALIBRATION
AUDIT, RELIABILITY = DerivedKind.AUDIT, DerivedKind.RELIABILITY
DISPUTED = ("admissible", "inadmissible")


def marks(project: Any) -> Counter[str]:
    """The change rows of ``project`` still waiting, counted by kind."""
    return Counter(DerivedChange.objects.filter(project=project).values_list("kind", flat=True))


def clear(project: Any) -> None:
    DerivedChange.objects.filter(project=project).delete()


def _disputed(external_id: str, evaluator: tuple[str, str, float] | None = None) -> dict:
    return rec(
        external_id,
        [cand("a", score=1.0, labels=DISPUTED, selected=True, evaluator=evaluator)],
    )


@pytest.fixture
def split(project: Any) -> dict[str, Item]:
    """One disputed item in the calibration partition, two in dev; judge@v1 scored two."""
    calibration_project(
        project,
        {
            "calibration": [_disputed("cal", ("judge", "v1", 0.2))],
            "dev": [_disputed("dev"), _disputed("judged", ("judge", "v1", 0.3))],
        },
    )
    clear(project)
    items = {
        item.candidate.question.external_id: item
        for item in Item.objects.filter(project=project).select_related("candidate__question")
    }
    assert {item.status for item in items.values()} == {ItemStatus.DISAGREEMENT}
    return items


def _adjudicate(project: Any, item: Item, adjudicator: Any) -> None:
    item.refresh_from_db()
    adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="inadmissible",
        claims=[],
        rationale="checked",
    )


# -- which write marks which kind --------------------------------------------------------------
def test_without_a_spec_a_resolution_marks_no_calibration(project, split, member):
    _adjudicate(project, split["cal"], member(Role.ADJUDICATOR))
    assert marks(project) == {RELIABILITY: 1}


def test_a_resolution_marks_calibration_only_inside_a_partition_a_spec_reads(
    project, split, member
):
    make_spec(project, thresholds=[0.5])  # calibrates on the calibration partition
    clear(project)
    adjudicator = member(Role.ADJUDICATOR)
    # outside every partition the spec reads (calibration, and the held-out test): no mark
    _adjudicate(project, split["dev"], adjudicator)
    assert marks(project) == {RELIABILITY: 1}
    # inside it: marked
    clear(project)
    _adjudicate(project, split["cal"], adjudicator)
    assert marks(project) == {CALIBRATION: 1, RELIABILITY: 1}


def test_a_spec_on_the_dev_partition_reads_dev_resolutions(project, split, member):
    make_spec(project, thresholds=[0.5], partition="dev")
    clear(project)
    _adjudicate(project, split["dev"], member(Role.ADJUDICATOR))
    assert marks(project) == {CALIBRATION: 1, RELIABILITY: 1}


def test_a_resolution_marks_the_audits_only_of_an_item_an_audited_evaluator_labelled(
    project, split, member
):
    manager, adjudicator = member(Role.MANAGER), member(Role.ADJUDICATOR)
    # no audit declared: the judged item marks no audit
    _adjudicate(project, split["judged"], adjudicator)
    assert marks(project) == {RELIABILITY: 1}
    judge = split["judged"].candidate.evaluator_labels.get().evaluator
    audit_report_configure(project=project, evaluator=judge, actor=manager, score_threshold=0.5)
    clear(project)
    # an item the audited evaluator did not label: no audit mark
    _adjudicate(project, split["dev"], adjudicator)
    assert marks(project) == {RELIABILITY: 1}
    # one it labelled (in the calibration partition; no spec: no calibration mark)
    clear(project)
    _adjudicate(project, split["cal"], adjudicator)
    assert marks(project) == {AUDIT: 1, RELIABILITY: 1}


def test_a_vote_does_not_mark_calibration_its_consensus_does(project, import_records, member):
    import_records([work_record("q1")])
    Question.objects.filter(project=project).update(partition="calibration")
    manager = member(Role.MANAGER)
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    make_spec(project, thresholds=[0.5])
    clear(project)

    def vote() -> Item:
        user = member(Role.ANNOTATOR)
        assignment = item_claim_next(project=project, actor=user)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=user,
            data=labels_input(assignment.item),
        )
        assignment.item.refresh_from_db()
        return assignment.item

    assert vote().status == ItemStatus.OPEN
    assert marks(project) == {AGREEMENT: 1, RELIABILITY: 1}
    assert vote().status == ItemStatus.RESOLVED
    assert marks(project) == {AGREEMENT: 2, CALIBRATION: 1, RELIABILITY: 3}


# -- cost-bounded spacing ----------------------------------------------------------------------
@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, float]]:
    """Record each enqueued (kind, countdown) instead of sending it."""
    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(
        derived_service,
        "_enqueue",
        lambda project_id, kind, *, countdown: calls.append((kind, countdown)),
    )
    return calls


def _computed(project: Any, kind: str, *, ago: float, duration: float | None) -> Any:
    return DerivedResultState.objects.create(
        project=project,
        kind=kind,
        computed_at=timezone.now() - timedelta(seconds=ago),
        duration_seconds=duration,
    )


def test_the_gap_grows_with_the_measured_duration(settings):
    settings.CERTLABEL_DERIVED_INTERVAL = 5.0
    settings.CERTLABEL_DERIVED_MAX_SHARE = 0.1
    assert spacing_gap(None) == 5.0
    assert spacing_gap(0.2) == 5.0  # cheap: the interval
    assert spacing_gap(3.0) == pytest.approx(27.0)  # 3 s of every 30 s: a tenth of a worker
    settings.CERTLABEL_DERIVED_MAX_SHARE = 0.5
    assert spacing_gap(30.0) == pytest.approx(30.0)
    settings.CERTLABEL_DERIVED_MAX_SHARE = 1.0  # the interval alone
    assert spacing_gap(30.0) == 5.0


def test_spacing_grows_with_the_measured_duration(project, settings, sent):
    settings.CERTLABEL_DERIVED_INTERVAL = 5.0
    settings.CERTLABEL_DERIVED_MAX_SHARE = 0.1
    _computed(project, AGREEMENT, ago=0, duration=0.1)
    _computed(project, CALIBRATION, ago=0, duration=3.0)
    _computed(project, AUDIT, ago=20, duration=3.0)
    _computed(project, RELIABILITY, ago=40, duration=3.0)
    before = timezone.now()
    for kind in (AGREEMENT, CALIBRATION, AUDIT, RELIABILITY):
        assert derived_schedule(project_id=project.pk, kind=kind)
    countdown = dict(sent)
    assert 4.0 < countdown[AGREEMENT] <= 5.0  # cheap: the interval
    assert 26.0 < countdown[CALIBRATION] <= 27.0  # 3 s: 9 x 3 s after it ended
    assert 6.0 < countdown[AUDIT] <= 7.0  # the rest of the 27 s
    assert countdown[RELIABILITY] == 0.0  # quiet for longer than the gap: at once
    # the held task's state says when it is due, not when it was sent
    state = DerivedResultState.objects.get(project=project, kind=CALIBRATION)
    assert state.enqueued_at >= before + timedelta(seconds=26)


def test_a_held_task_is_not_taken_for_a_lost_one_before_it_is_due(
    project, settings, sent, django_capture_on_commit_callbacks
):
    settings.CERTLABEL_DERIVED_INTERVAL = 5.0
    _computed(project, CALIBRATION, ago=0, duration=10.0)  # gap 90 s, beyond the 30 s lapse
    DerivedChange.objects.create(project=project, kind=CALIBRATION)
    assert derived_schedule(project_id=project.pk, kind=CALIBRATION)
    assert sent[0][1] > engine.lapse().total_seconds()
    due = DerivedResultState.objects.get(project=project, kind=CALIBRATION).enqueued_at
    # a recovery pass a lapse later leaves it alone (it is not due yet)
    with django_capture_on_commit_callbacks(execute=True):
        report = engine.recover(now=timezone.now() + engine.lapse() + timedelta(seconds=1))
    assert report.resent.get("derived", []) == []
    # one a lapse after it was due sends it again, still held for the rest of the gap
    with django_capture_on_commit_callbacks(execute=True):
        report = engine.recover(now=due + engine.lapse() + timedelta(seconds=1))
    assert len(report.resent.get("derived", [])) == 1
    assert len(sent) == 2 and sent[1][1] > 0


def test_the_measured_duration_is_stored(project):
    DerivedChange.objects.create(project=project, kind=AGREEMENT)
    outcome = derived_recompute(
        project_id=project.pk, kind=AGREEMENT, compute=lambda project_id: time.sleep(0.05)
    )
    assert outcome == "done"
    state = DerivedResultState.objects.get(project=project, kind=AGREEMENT)
    assert state.duration_seconds >= 0.05 and state.computed_at is not None


def test_a_task_without_a_change_left_computes_nothing(project):
    _computed(project, CALIBRATION, ago=1, duration=2.0)
    ran: list[int] = []
    outcome = derived_recompute(project_id=project.pk, kind=CALIBRATION, compute=ran.append)
    assert (outcome, ran) == ("current", [])
    state = DerivedResultState.objects.get(project=project, kind=CALIBRATION)
    assert state.lease_owner == "" and state.duration_seconds == 2.0


def test_an_explicit_request_bypasses_the_spacing(
    project, member, settings, sent, django_capture_on_commit_callbacks
):
    settings.CERTLABEL_DERIVED_INTERVAL = 5.0
    _computed(project, CALIBRATION, ago=0, duration=3.0)
    # a change's recomputation is held for the gap...
    DerivedChange.objects.create(project=project, kind=CALIBRATION)
    assert derived_schedule(project_id=project.pk, kind=CALIBRATION)
    assert sent[-1][1] > 26.0
    # ...a manager's request is sent at once, the held task notwithstanding
    manager = member(Role.MANAGER)
    with django_capture_on_commit_callbacks(execute=True):
        derived_recompute_request(project=project, kind=CALIBRATION, actor=manager)
    assert sent[1:] == [(CALIBRATION, 0.0)]
    # and with nothing held, a request sends one task, at once
    DerivedResultState.objects.filter(project=project).update(enqueued_at=None)
    with django_capture_on_commit_callbacks(execute=True):
        derived_recompute_request(project=project, kind=AUDIT, actor=manager)
        derived_recompute_request(project=project, kind=CALIBRATION, actor=manager)
    assert sent[2:] == [(AUDIT, 0.0), (CALIBRATION, 0.0)]


# -- the audit's stale-write guard -------------------------------------------------------------
@pytest.fixture
def audit_changed(project, member) -> AuditReport:
    """A declared audit whose inputs changed since (q3/c0 labelled), not recomputed yet."""
    project, judge, _ = audited_project(project)
    report = audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))
    annotator = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=project, actor=annotator)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=annotator,
        data=AnnotationInput(answer_label="inadmissible", claims=()),
    )
    return report


def _newer_figures_stored_meanwhile(monkeypatch) -> None:
    """While the recomputation computes, another one that read later stores its figures."""
    real = audit_service.audit_result_compute

    def compute_then_overtaken(report, rows, design=None):
        result = real(report, rows, design)
        AuditReport.objects.filter(pk=report.pk).update(
            computed_at=timezone.now(), result={"newer": True}
        )
        return result

    monkeypatch.setattr(audit_service, "audit_result_compute", compute_then_overtaken)


def test_the_audit_recomputation_never_overwrites_newer_figures(audit_changed, monkeypatch):
    _newer_figures_stored_meanwhile(monkeypatch)
    with pytest.raises(SupersededInputs):
        audit_report_recompute(report_id=audit_changed.pk, background=True)
    stored = AuditReport.objects.get(pk=audit_changed.pk)
    assert stored.result == {"newer": True}
    assert stored.input_sha256 == audit_changed.input_sha256


def test_a_superseded_audit_recomputation_keeps_its_marks(
    project, audit_changed, monkeypatch, sent
):
    waiting = DerivedChange.objects.filter(project=project, kind=AUDIT)
    assert waiting.exists()
    _newer_figures_stored_meanwhile(monkeypatch)
    outcome = derived_recompute(
        project_id=project.pk, kind=AUDIT, compute=DERIVED_COMPUTE[DerivedKind.AUDIT]
    )
    assert outcome == "done"
    assert waiting.exists()  # the next recomputation covers them: it is scheduled
    assert sent == [(AUDIT, 0.0)]
    assert AuditReport.objects.get(pk=audit_changed.pk).result == {"newer": True}


def test_a_redeclared_audit_is_not_overwritten_with_the_old_declaration(audit_changed, monkeypatch):
    real = audit_service.audit_result_compute

    def compute_then_redeclared(report, rows, design=None):
        result = real(report, rows, design)
        AuditReport.objects.filter(pk=report.pk).update(
            configured_at=timezone.now() + timedelta(seconds=1), human_positive=["admissible"]
        )
        return result

    monkeypatch.setattr(audit_service, "audit_result_compute", compute_then_redeclared)
    with pytest.raises(SupersededInputs):
        audit_report_recompute(report_id=audit_changed.pk, background=True)
    assert AuditReport.objects.get(pk=audit_changed.pk).input_sha256 == audit_changed.input_sha256


def test_without_a_newer_report_the_audit_recomputation_writes(audit_changed):
    report = audit_report_recompute(report_id=audit_changed.pk, background=True)
    stored = AuditReport.objects.get(pk=audit_changed.pk)
    assert stored.input_sha256 == report.input_sha256 != audit_changed.input_sha256
    assert stored.result["n_pending"] == 0
    assert stored.computed_at <= timezone.now()
