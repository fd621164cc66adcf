"""Derived results: staleness marks, coalesced recomputation, recovery, freshness shown.

Every write that changes an input of a derived result marks it stale in its own transaction
(``labeling.derived.derived_mark``); after the commit the mark is handed to
``certification.services.derived.derived_schedule``, which enqueues at most one recomputation
per (project, kind); the background engine's recovery pass (``labeling.engine.recover``)
catches marks whose message never arrived and leases whose worker died.
"""

from __future__ import annotations

import io
import logging
import random
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from certification import tasks as tasks_module
from certification.models import AgreementReport, DerivedResultState
from certification.selectors import derived_freshness
from certification.services import (
    agreement_recompute,
    audit_report_configure,
    calibration_spec_create,
    derived_schedule,
    level_to_json,
    votes_sha256,
)
from certification.services import derived as derived_service
from certification.stats.agreement import LevelCounts, agreement_summary_from_counts
from labeling import engine, in_process
from labeling.derived import derived_mark
from labeling.exceptions import InvalidInput
from labeling.importers.native import read_jsonl
from labeling.models import DerivedChange, DerivedKind, Evaluator, Item, ItemStatus, Role
from labeling.selectors import project_votes
from labeling.services import (
    adjudication_resolve,
    annotation_submit,
    evaluator_labels_import,
    item_claim_next,
    project_labelling_configure,
    project_labelling_start,
)
from tests.conftest import jsonl_bytes
from tests.factories import work_record
from tests.labeling.api.conftest import client_for, labels_body, labels_input

pytestmark = pytest.mark.django_db

__all__ = ["client_for"]  # the API tests' fixture, used here too

AGREEMENT, CALIBRATION, AUDIT = DerivedKind.AGREEMENT, DerivedKind.CALIBRATION, DerivedKind.AUDIT
RELIABILITY = DerivedKind.RELIABILITY
# A computation on another machine holds the lease (the SQLite rule "a lease whose process still
# runs on this host is not lapsed", labeling.engine, never applies to it).
ELSEWHERE = "another-host:4242:recompute-task"


def marks(project) -> Counter[str]:
    """The change rows of ``project`` still waiting, counted by kind."""
    return Counter(DerivedChange.objects.filter(project=project).values_list("kind", flat=True))


def recover(on_commit) -> list[tuple[int, str]]:
    """One recovery pass of the engine; the tasks it sends run (eagerly) once it commits.

    Returns the (project id, kind) of the derived results it sent again.
    """
    with on_commit(execute=True):
        report = engine.recover()
    ids = report.resent.get("derived", [])
    states = DerivedResultState.objects.filter(pk__in=ids)
    return sorted(states.values_list("project_id", "kind"))


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


@pytest.fixture
def started(project, import_records, manager):
    """Three questions (six items), overlap 2, labelling started; no change left waiting."""
    import_records([work_record(f"q{i}") for i in range(1, 4)])
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    DerivedChange.objects.filter(project=project).delete()
    return project


def _submit(project, user, answer):
    assignment = item_claim_next(project=project, actor=user)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=user,
        data=labels_input(assignment.item, answer=answer),
    )
    assignment.item.refresh_from_db()
    return assignment.item


def _resolve(project, item, adjudicator):
    return adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="admissible",
        claims=labels_input(item).claims,
        rationale="checked against the source",
    )


def _clean_answer(project) -> dict[str, Any]:
    """The answer level computed from scratch from the current votes (no stored state).

    Counted from the full vote matrix, so the figures equal the stored ones exactly; that the
    counts give the figures of ``agreement_summary`` (alpha by the ``krippendorff`` package) is
    tested in ``tests/certification/stats/test_agreement_counts.py``.
    """
    matrix = {m.level: m for m in project_votes(project=project).levels()}["answer"]
    counts = LevelCounts.from_ratings(matrix.ratings, matrix.raters)
    return level_to_json(agreement_summary_from_counts(counts, confidence=0.95))


# -- the marks: written in the writing transaction -----------------------------------------
def test_a_vote_marks_the_agreement_in_its_transaction(started, member):
    _submit(started, member(Role.ANNOTATOR), "admissible")
    assert marks(started) == {AGREEMENT: 1, RELIABILITY: 1}


def test_a_consensus_marks_the_kinds_that_read_the_item(started, member):
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    first = _submit(started, a, "admissible")
    second = _submit(started, b, "admissible")
    assert first == second and second.status == ItemStatus.RESOLVED
    # two votes mark agreement and reliability, the consensus resolution reliability; not
    # calibration and audit: no spec, no audit reads the item
    assert marks(started) == {AGREEMENT: 2, RELIABILITY: 3}


def test_a_disagreement_marks_the_votes_and_an_adjudication_what_reads_it(started, member):
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    _submit(started, a, "admissible")
    item = _submit(started, b, "inadmissible")
    assert item.status == ItemStatus.DISAGREEMENT
    assert marks(started) == {AGREEMENT: 2, RELIABILITY: 2}
    _resolve(started, item, member(Role.ADJUDICATOR))
    assert marks(started) == {AGREEMENT: 2, RELIABILITY: 3}


def test_an_import_marks_every_kind(project, import_records):
    import_records([work_record("q1")])
    assert marks(project) == {AGREEMENT: 1, CALIBRATION: 1, AUDIT: 1, RELIABILITY: 1}


def test_evaluator_labels_mark_the_calibration_and_audits_that_read_them(started, manager):
    from tests.factories import make_spec

    def labels(candidate, version="v1", question="q1"):
        record = {"question": question, "candidate": candidate, "evaluator": "judge"}
        data = jsonl_bytes([{**record, "version": version, "label": "inadmissible", "score": 0.9}])
        return evaluator_labels_import(
            project=started, records=read_jsonl(io.BytesIO(data)), actor=manager, filename="e"
        )

    DerivedChange.objects.all().delete()
    # no spec names the evaluator, no audit is declared: nothing reads the labels
    assert labels("c0").created["evaluator_labels"] == 1
    assert marks(started) == {}
    # a spec scores by judge@v1: its labels are calibration inputs
    make_spec(started, thresholds=[0.5], score_field="evaluator:judge@v1")
    DerivedChange.objects.all().delete()
    assert labels("c1").created["evaluator_labels"] == 1
    assert marks(started) == {CALIBRATION: 1}
    # judge@v1's audit is declared: its labels are audit inputs; judge@v2's are neither
    audit_report_configure(
        project=started,
        evaluator=Evaluator.objects.get(project=started, version="v1"),
        actor=manager,
    )
    DerivedChange.objects.all().delete()
    assert labels("c0", version="v2").created["evaluator_labels"] == 1
    assert marks(started) == {}
    assert labels("c0", question="q2").created["evaluator_labels"] == 1
    assert marks(started) == {CALIBRATION: 1, AUDIT: 1}


def test_a_spec_and_an_audit_declaration_mark_their_kind(started, manager):
    from tests.factories import make_spec

    make_spec(started, thresholds=[0.5])
    assert marks(started) == {CALIBRATION: 1}
    evaluator = Evaluator.objects.create(project=started, name="judge", version="1")
    audit_report_configure(project=started, evaluator=evaluator, actor=manager)
    assert marks(started) == {CALIBRATION: 1, AUDIT: 1}


def test_a_rolled_back_write_marks_nothing(started, member):
    user = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=started, actor=user)
    bad = labels_input(assignment.item, answer="no-such-label")
    with pytest.raises(InvalidInput):
        annotation_submit(project=started, assignment_id=assignment.pk, actor=user, data=bad)
    assert marks(started) == {}
    # and a vote written inside a transaction that rolls back leaves no mark either
    with pytest.raises(RuntimeError), transaction.atomic():
        _submit(started, member(Role.ANNOTATOR), "admissible")
        assert marks(started) == {AGREEMENT: 1, RELIABILITY: 1}
        raise RuntimeError("abort")
    assert marks(started) == {}


def test_a_spec_refused_marks_nothing(started, manager):
    with pytest.raises(InvalidInput):
        calibration_spec_create(project=started, actor=manager, name="", loss="x")
    assert marks(started) == {}


# -- coalescing -------------------------------------------------------------------------------
@pytest.fixture
def sent(monkeypatch):
    """Record the enqueued (project, kind) pairs instead of sending them to a broker."""
    calls: list[tuple[int, str]] = []
    monkeypatch.setattr(
        derived_service, "_enqueue", lambda project_id, kind, **kw: calls.append((project_id, kind))
    )
    return calls


def test_many_marks_enqueue_one_task_until_it_starts(started, sent):
    for _ in range(25):
        derived_schedule(project_id=started.pk, kind=AGREEMENT)
    assert sent == [(started.pk, AGREEMENT)]
    # the task starts: it clears the queued slot and holds the running one
    state = DerivedResultState.objects.get(project=started, kind=AGREEMENT)
    assert state.enqueued_at is not None and state.lease_owner == ""
    DerivedResultState.objects.filter(pk=state.pk).update(
        enqueued_at=None, lease_owner=ELSEWHERE, heartbeat_at=timezone.now()
    )
    # changes during the run queue exactly one more
    for _ in range(25):
        derived_schedule(project_id=started.pk, kind=AGREEMENT)
    assert sent == [(started.pk, AGREEMENT)] * 2


def test_a_second_task_while_one_runs_is_busy_and_keeps_the_rows(started, member):
    _submit(started, member(Role.ANNOTATOR), "admissible")
    DerivedResultState.objects.create(
        project=started, kind=AGREEMENT, lease_owner=ELSEWHERE, heartbeat_at=timezone.now()
    )
    outcome = derived_service.derived_recompute(
        project_id=started.pk,
        kind=AGREEMENT,
        compute=lambda pid: agreement_recompute(project_id=pid),
    )
    assert outcome == "busy"
    state = DerivedResultState.objects.get(project=started, kind=AGREEMENT)
    assert state.lease_owner == ELSEWHERE and state.enqueued_at is None
    assert marks(started) == {AGREEMENT: 1, RELIABILITY: 1}
    assert not AgreementReport.objects.filter(project=started).exists()


def test_a_broker_failure_is_logged_never_raised_and_the_mark_stays(
    started, member, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    def down(project_id, kind, **kw):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(derived_service, "_enqueue", down)
    monkeypatch.setattr(derived_service, "_broker_down_until", 0.0)  # restored afterwards
    with django_capture_on_commit_callbacks(execute=True):
        _submit(started, member(Role.ANNOTATOR), "admissible")
    assert "derived.enqueue_failed" in caplog.text
    # and for a moment this process does not try the broker again (one failure per outage)
    caplog.clear()
    assert derived_schedule(project_id=started.pk, kind=AGREEMENT) is False
    assert "derived.enqueue_skipped" in caplog.text
    assert marks(started) == {AGREEMENT: 1, RELIABILITY: 1}
    state = DerivedResultState.objects.get(project=started, kind=AGREEMENT)
    assert state.enqueued_at is None  # free again: the recovery pass may schedule it


def test_eager_mode_runs_one_recomputation_per_kind_per_request(
    started, member, client_for, caplog, django_capture_on_commit_callbacks
):
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    _submit(started, a, "admissible")
    # when the second vote is submitted through the API (one request: a vote and a consensus)
    assignment = item_claim_next(project=started, actor=b)
    caplog.clear()
    with caplog.at_level(logging.INFO), django_capture_on_commit_callbacks(execute=True):
        response = client_for(b).put(
            f"/api/projects/study/assignments/{assignment.pk}/annotation/",
            labels_body(assignment.item),
            format="json",
        )
    assert response.status_code == 200
    runs = Counter(r.kind for r in caplog.records if r.getMessage() == "derived.recomputed")
    assert runs == {AGREEMENT: 1, RELIABILITY: 1}  # no spec, no audit reads the resolved item
    assert marks(started) == {}
    report = AgreementReport.objects.get(project=started)
    assert report.answer["n_votes"] == 2  # both votes, the first one never recomputed alone


# -- the recovery pass --------------------------------------------------------------------------
def test_the_recovery_picks_up_a_mark_whose_task_was_lost(
    started, member, django_capture_on_commit_callbacks
):
    # given votes whose after-commit enqueue never happened (the callbacks are not run)
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    _submit(started, a, "admissible")
    _submit(started, b, "admissible")
    top = DerivedChange.objects.filter(project=started, kind=AGREEMENT).latest("pk").pk
    assert not AgreementReport.objects.filter(project=started).exists()
    assert not DerivedResultState.objects.filter(project=started).exists()
    # when the recovery pass runs (eager Celery: the recomputation runs here); it creates the
    # missing state rows first
    enqueued = recover(django_capture_on_commit_callbacks)
    # then every kind was recomputed and covers the changes
    assert enqueued == [(started.pk, k) for k in (AGREEMENT, RELIABILITY)]
    assert marks(started) == {}
    state = DerivedResultState.objects.get(project=started, kind=AGREEMENT)
    assert state.covered_generation == top
    assert (state.enqueued_at, state.lease_owner) == (None, "")
    assert AgreementReport.objects.get(project=started).answer["n_votes"] == 2
    # and a second pass finds nothing to do
    assert recover(django_capture_on_commit_callbacks) == []


def test_the_recovery_re_enqueues_a_state_queued_too_long(
    started, member, sent, django_capture_on_commit_callbacks
):
    _submit(started, member(Role.ANNOTATOR), "admissible")
    long_ago = timezone.now() - engine.lapse() - timedelta(seconds=1)
    DerivedResultState.objects.create(project=started, kind=AGREEMENT, enqueued_at=long_ago)
    # (the vote's reliability mark is recently queued: left alone)
    DerivedResultState.objects.create(project=started, kind=RELIABILITY, enqueued_at=timezone.now())
    assert recover(django_capture_on_commit_callbacks) == [(started.pk, AGREEMENT)]
    assert sent == [(started.pk, AGREEMENT)]


def test_the_recovery_leaves_a_recently_queued_or_running_state_alone(
    started, member, sent, django_capture_on_commit_callbacks
):
    _submit(started, member(Role.ANNOTATOR), "admissible")
    for kind in (AGREEMENT, RELIABILITY):  # the two kinds a vote marks
        DerivedResultState.objects.create(project=started, kind=kind, enqueued_at=timezone.now())
    assert recover(django_capture_on_commit_callbacks) == []
    DerivedResultState.objects.filter(project=started).update(
        enqueued_at=None, lease_owner=ELSEWHERE, heartbeat_at=timezone.now()
    )
    assert recover(django_capture_on_commit_callbacks) == []
    fresh = derived_freshness(project=started)[AGREEMENT]
    assert fresh.running and not fresh.worker_lost
    # a lease whose heartbeat is older than the lapse is a dead worker's: scheduled again
    DerivedResultState.objects.filter(project=started).update(
        heartbeat_at=timezone.now() - engine.lapse() - timedelta(seconds=1)
    )
    fresh = derived_freshness(project=started)[AGREEMENT]
    assert fresh.running and fresh.worker_lost
    assert fresh.as_json()["worker_lost"] is True
    assert recover(django_capture_on_commit_callbacks) == [
        (started.pk, AGREEMENT),
        (started.pk, RELIABILITY),
    ]
    assert sent == [(started.pk, AGREEMENT), (started.pk, RELIABILITY)]
    # the dead worker's lease is freed
    assert set(
        DerivedResultState.objects.filter(project=started).values_list("lease_owner", flat=True)
    ) == {""}


def test_a_late_committed_change_with_a_smaller_id_is_not_counted_as_covered(
    started, member, django_capture_on_commit_callbacks
):
    # the recomputation deletes exactly the rows it read; a row it did not see stays
    _submit(started, member(Role.ANNOTATOR), "admissible")
    recover(django_capture_on_commit_callbacks)
    assert marks(started) == {}
    derived_mark(project_id=started.pk, kinds=[AGREEMENT])
    fresh = derived_freshness(project=started)[AGREEMENT]
    assert (fresh.current, fresh.newer_changes) == (False, 1)


# -- the reproduction: 3 consensus items, then 3 disagreeing ones --------------------------------
def _api_vote(client, project, user, answer, on_commit):
    next_response = client.post("/api/projects/study/assignments/next/", format="json")
    assert next_response.status_code == 200, next_response.content
    assignment_id = next_response.json()["assignment_id"]
    item = Item.objects.get(assignments__pk=assignment_id)
    with on_commit(execute=True):
        response = client.put(
            f"/api/projects/study/assignments/{assignment_id}/annotation/",
            labels_body(item, answer=answer),
            format="json",
        )
    assert response.status_code == 200, response.content
    item.refresh_from_db()
    return item


def test_three_consensus_then_three_disagreements_show_six_units(
    started, member, client_for, login, django_capture_on_commit_callbacks
):
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    ca, cb = client_for(a), client_for(b)
    statuses = []
    for index in range(6):
        answer_b = "admissible" if index < 3 else "inadmissible"
        first = _api_vote(ca, started, a, "admissible", django_capture_on_commit_callbacks)
        second = _api_vote(cb, started, b, answer_b, django_capture_on_commit_callbacks)
        assert first == second
        statuses.append(second.status)
    assert statuses == [ItemStatus.RESOLVED] * 3 + [ItemStatus.DISAGREEMENT] * 3
    # then the API shows the agreement over the six units, and says it is current
    body = client_for(member(Role.MANAGER)).get("/api/projects/study/agreement/").json()
    answer = body["levels"][0]
    assert (answer["n_units"], answer["n_pairable_units"], answer["n_votes"]) == (6, 6, 12)
    assert answer["percent_agreement"]["value"] == 0.5
    assert answer["alpha"]["value"] != 1.0
    clean = _clean_answer(started)
    assert (answer["alpha"], answer["fleiss_kappa"]) == (clean["alpha"], clean["fleiss_kappa"])
    assert body["freshness"]["current"] is True
    assert body["freshness"]["newer_changes"] == 0
    # and the dashboard too
    html = login(Role.MANAGER).get("/p/study/").content.decode()
    assert 'data-kind="agreement" data-current="yes"' in html
    assert "Current: covers every change up to" in html
    assert "as they are now" in html


def test_without_a_worker_the_figures_say_they_are_stale(
    started, member, client_for, login, django_capture_on_commit_callbacks
):
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    # three consensus items, recomputed after each request
    for _ in range(3):
        _api_vote(client_for(a), started, a, "admissible", django_capture_on_commit_callbacks)
        _api_vote(client_for(b), started, b, "admissible", django_capture_on_commit_callbacks)
    report = AgreementReport.objects.get(project=started)
    assert report.answer["n_units"] == 3
    assert report.answer["percent_agreement"] == {"value": 1.0, "reason": None}

    # then three disagreeing ones whose recomputation never runs (no worker, lost messages)
    def no_commit_hooks(execute=True):
        return transaction.atomic()

    for _ in range(3):
        _api_vote(client_for(a), started, a, "admissible", no_commit_hooks)
        _api_vote(client_for(b), started, b, "inadmissible", no_commit_hooks)
    body = client_for(member(Role.MANAGER)).get("/api/projects/study/agreement/").json()
    # the stored figures still cover three units, and the answer says so
    assert body["levels"][0]["n_units"] == 3
    assert body["freshness"]["current"] is False
    assert body["freshness"]["newer_changes"] == 6
    html = login(Role.MANAGER).get("/p/study/").content.decode()
    assert 'data-kind="agreement" data-current="no"' in html
    assert "Stale — 6 newer changes" in html
    assert "as they were then: newer votes are not counted yet" in html
    assert "as they are now" not in html
    # once the recovery pass runs, the figures are current over six units
    recover(django_capture_on_commit_callbacks)
    body = client_for(member(Role.MANAGER)).get("/api/projects/study/agreement/").json()
    assert body["levels"][0]["n_units"] == 6
    assert body["freshness"]["current"] is True


# -- freshness in the pages and the API, manual recomputation ----------------------------------
@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("agreement", AGREEMENT),
        ("calibration", CALIBRATION),
        ("audits", AUDIT),
        ("reliability", RELIABILITY),
    ],
)
def test_managers_request_a_recomputation_through_the_api(
    started, api, path, kind, django_capture_on_commit_callbacks
):
    url = f"/api/projects/study/{path}/recompute/"
    assert api(Role.ANNOTATOR).post(url).status_code == 403
    assert api(Role.ADJUDICATOR).post(url).status_code == 403
    assert marks(started) == {}
    with django_capture_on_commit_callbacks(execute=True):
        response = api(Role.MANAGER).post(url)
    assert response.status_code == 202
    body = response.json()
    # answered before the commit: the request is recorded as one newer change
    assert (body["kind"], body["current"], body["newer_changes"]) == (kind, False, 1)
    # and after the commit it ran (eager Celery) and the result is current
    assert marks(started) == {}
    fresh = api(Role.MANAGER).get("/api/projects/study/derived/").json()
    assert {f["kind"]: f["current"] for f in fresh} == {
        AGREEMENT: True,
        CALIBRATION: True,
        AUDIT: True,
        RELIABILITY: True,
    }
    state = DerivedResultState.objects.get(project=started, kind=kind)
    assert state.computed_at is not None


def test_the_recompute_service_refuses_other_roles_and_unknown_kinds(started, member):
    from certification.services import derived_recompute_request
    from labeling.exceptions import PermissionDenied

    for role in (Role.ANNOTATOR, Role.ADJUDICATOR):
        with pytest.raises(PermissionDenied):
            derived_recompute_request(project=started, kind=AGREEMENT, actor=member(role))
    with pytest.raises(InvalidInput) as caught:
        derived_recompute_request(project=started, kind="nonsense", actor=member(Role.MANAGER))
    assert caught.value.field == "kind"
    assert marks(started) == {}


@pytest.mark.parametrize(
    ("page", "button"),
    [
        ("/p/study/", "/p/study/certification/agreement/recompute/"),
        ("/p/study/certification/", "/p/study/certification/calibration/recompute/"),
        ("/p/study/certification/audits/", "/p/study/certification/audits/recompute/"),
    ],
)
def test_pages_show_freshness_and_a_recompute_button_to_managers(
    started, member, login, page, button, client, django_capture_on_commit_callbacks
):
    _submit(started, member(Role.ANNOTATOR), "admissible")
    adjudicator_html = login(Role.ADJUDICATOR).get(page).content.decode()
    client.logout()
    html = login(Role.MANAGER).get(page).content.decode()
    assert 'class="freshness"' in html and 'class="freshness"' in adjudicator_html
    assert f'action="{button}"' in html
    assert f'action="{button}"' not in adjudicator_html
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(button, {"next": page})
    assert (response.status_code, response["Location"]) == (302, page)
    html = client.get(page).content.decode()
    assert "Recomputation of the" in html
    assert 'data-current="yes"' in html


def test_the_page_button_refuses_an_adjudicator(started, login):
    response = login(Role.ADJUDICATOR).post("/p/study/certification/agreement/recompute/")
    assert response.status_code == 403
    assert marks(started) == {}


# -- property: after any mix of votes, disagreements and resolutions the stored agreement equals
# -- a clean recomputation once the queue is drained ------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_stored_agreement_equals_a_clean_recomputation_after_any_mix(
    seed, project, import_records, member, django_capture_on_commit_callbacks
):
    rng = random.Random(seed)
    import_records([work_record(f"q{i}") for i in range(1, 5)])
    manager = member(Role.MANAGER)
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    annotators = [member(Role.ANNOTATOR) for _ in range(3)]
    adjudicator = member(Role.ADJUDICATOR)
    labels = ["admissible", "inadmissible", "abstained"]
    for _ in range(rng.randint(6, 16)):
        user = rng.choice(annotators)
        deliver = rng.random() < 0.5  # half the after-commit enqueues are lost
        action = rng.random()
        if action < 0.8:
            try:
                assignment = item_claim_next(project=project, actor=user)
            except Exception:  # no work left for this annotator
                continue
            if assignment is None:
                continue
            data = labels_input(assignment.item, answer=rng.choice(labels))
            if deliver:
                with django_capture_on_commit_callbacks(execute=True):
                    annotation_submit(
                        project=project, assignment_id=assignment.pk, actor=user, data=data
                    )
            else:
                annotation_submit(
                    project=project, assignment_id=assignment.pk, actor=user, data=data
                )
        else:
            queued = Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).first()
            if queued is None:
                continue
            if deliver:
                with django_capture_on_commit_callbacks(execute=True):
                    _resolve(project, queued, adjudicator)
            else:
                _resolve(project, queued, adjudicator)
    # when the queue is drained (the recovery pass, then the tasks it sent, eagerly)
    recover(django_capture_on_commit_callbacks)
    # then the stored figures are those of a clean recomputation from scratch
    assert marks(project) == {}
    assert all(f.current for f in derived_freshness(project=project).values())
    votes = project_votes(project=project)
    if not any(m.ratings for m in votes.levels()):
        return
    report = AgreementReport.objects.get(project=project)
    assert report.input_sha256 == votes_sha256(votes)
    assert report.answer == _clean_answer(project)


def test_recomputations_of_a_kind_are_spaced_by_the_interval(started, monkeypatch, settings):
    settings.CERTLABEL_DERIVED_INTERVAL = 5.0
    calls = []
    monkeypatch.setattr(
        derived_service, "_enqueue", lambda pid, kind, **options: calls.append((kind, options))
    )
    just_now = timezone.now()
    DerivedResultState.objects.create(project=started, kind=CALIBRATION, computed_at=just_now)
    DerivedResultState.objects.create(
        project=started, kind=AGREEMENT, computed_at=just_now - timedelta(seconds=2)
    )
    DerivedResultState.objects.create(
        project=started, kind=AUDIT, computed_at=just_now - timedelta(seconds=60)
    )
    for kind in (CALIBRATION, AGREEMENT, AUDIT):
        derived_schedule(project_id=started.pk, kind=kind)
    countdown = {kind: options["countdown"] for kind, options in calls}
    assert 4.0 < countdown[CALIBRATION] <= 5.0
    assert 2.0 < countdown[AGREEMENT] <= 3.0
    assert countdown[AUDIT] == 0.0  # after a quiet spell: at once
    # interval 0: never held
    settings.CERTLABEL_DERIVED_INTERVAL = 0
    DerivedResultState.objects.filter(project=started).update(enqueued_at=None)
    calls.clear()
    derived_schedule(project_id=started.pk, kind=CALIBRATION)
    assert calls == [(CALIBRATION, {"countdown": 0.0})]


@pytest.mark.django_db(transaction=True)
def test_in_process_mode_recomputes_on_the_background_thread_not_in_the_request(
    started, member, settings, monkeypatch, request
):
    # A web process of the embedded default: tasks in-process, its background thread started
    # (labeling.wsgi does it; the tests never load it, so they compute inline).
    runner = in_process.InProcessRunner()
    monkeypatch.setattr(in_process, "_runner", runner)
    in_process.start()
    request.addfinalizer(runner.stop)  # no thread outlives the test
    assert in_process.running()
    ran: list[str] = []
    real = tasks_module.DERIVED_COMPUTE[AGREEMENT]

    def recorded(project_id):
        ran.append(threading.current_thread().name)
        return real(project_id)

    monkeypatch.setitem(tasks_module.DERIVED_COMPUTE, AGREEMENT, recorded)
    # Agreement was just computed: the next recomputation is held for the interval (2 s).
    settings.CERTLABEL_DERIVED_INTERVAL = 2.0
    DerivedResultState.objects.update_or_create(
        project=started, kind=AGREEMENT, defaults={"computed_at": timezone.now()}
    )
    _submit(started, member(Role.ANNOTATOR), "admissible")
    # The submit returned with its change marked, queued on the thread, not computed.
    freshness = derived_freshness(project=started)["agreement"]
    assert not freshness.current and freshness.queued and not ran
    deadline = time.monotonic() + 20
    while not derived_freshness(project=started)["agreement"].current:
        assert time.monotonic() < deadline, "agreement not recomputed in the background"
        time.sleep(0.05)
    assert ran == ["certlabel-in-process"]
    assert AgreementReport.objects.get(project=started).answer["n_votes"] == 1
    # the engine's recovery pass is the thread's periodic work
    assert runner.pending() == 1
    assert "work-recover" in in_process._periodic


def test_without_the_thread_started_the_recomputation_runs_inline(
    started, member, monkeypatch, django_capture_on_commit_callbacks
):
    # a management command or a test: no web process started the thread
    monkeypatch.setattr(in_process, "_runner", in_process.InProcessRunner())
    assert not in_process.running()
    with django_capture_on_commit_callbacks(execute=True):
        _submit(started, member(Role.ANNOTATOR), "admissible")
    assert derived_freshness(project=started)["agreement"].current
