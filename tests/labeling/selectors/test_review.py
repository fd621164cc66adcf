"""Review selectors: the disagreement queue, the side-by-side view, progress, the labelling form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from labeling.exceptions import InvalidInput, NotFound, PermissionDenied
from labeling.models import (
    Annotation,
    Assignment,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    PriorAnnotation,
    Question,
    Role,
    SourceVersion,
)
from labeling.selectors.adjudication import adjudication_view, disagreement_queue
from labeling.selectors.review import labelling_form_view, project_progress
from labeling.services import membership_set
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.conftest import row_counts
from tests.factories import (
    WORK_SOURCE,
    AssignmentFactory,
    UserFactory,
    start_labelling,
    utf16_span,
    work_record,
)

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def item_of(question: str, candidate: str) -> Item:
    return Item.objects.get(candidate__question__external_id=question, candidate__key=candidate)


def payload(
    item: Item, answer: str = "admissible", labels: tuple[str, ...] | None = None, comment=""
):
    claims = list(Claim.objects.filter(candidate=item.candidate).order_by("index"))
    labels = labels or ("not_supported",) * len(claims)
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    out = []
    for claim, label in zip(claims, labels, strict=True):
        evidence = ()
        if label in ("supported", "contradicted"):
            start, end = utf16_span(version.text, "opened in 1932")
            evidence = (EvidenceInput(version.pk, start, end, "opened in 1932"),)
        out.append(ClaimInput(claim.pk, label, evidence=evidence))
    return AnnotationInput(answer, claims=tuple(out), comment=comment)


def vote(project, item, data, slot=None, annotator=None):
    extra = {"slot": slot} if slot else {}
    if annotator is not None:
        extra["annotator"] = annotator
    assignment = AssignmentFactory(item=item, **extra)
    annotation_submit(
        project=project, assignment_id=assignment.pk, actor=assignment.annotator, data=data
    )
    return assignment


@pytest.fixture
def queue(project, import_records):
    """q1/c0: answers differ; q1/c1: a claim differs; q2/c0: both; q2/c1 consensus."""
    import_records([work_record("q1"), work_record("q2")])
    start_labelling(project)
    a, b, c, d = item_of("q1", "c0"), item_of("q1", "c1"), item_of("q2", "c0"), item_of("q2", "c1")
    vote(project, a, payload(a))
    vote(project, a, payload(a, answer="inadmissible"))
    vote(project, b, payload(b, labels=("not_supported",)))
    vote(project, b, payload(b, labels=("contradicted",)))
    vote(project, c, payload(c))
    vote(project, c, payload(c, answer="inadmissible", labels=("supported", "not_supported")))
    vote(project, d, payload(d))
    vote(project, d, payload(d))
    return a, b, c, d


# -- disagreement queue ------------------------------------------------------------------------


def test_the_queue_holds_the_disputed_items_oldest_first(project, queue):
    a, b, c, d = queue
    Disagreement.objects.filter(item=c).update(opened_at=timezone.now() - timedelta(hours=5))
    items = list(disagreement_queue(project=project, filters={}))
    assert [i.pk for i in items] == [c.pk, a.pk, b.pk]
    first = items[0]
    assert (first.answer_differs, first.claims_differ) == (True, True)
    assert first.opened_at < items[1].opened_at


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"level": "answer"}, ["a", "c"]),
        ({"level": "claim"}, ["b", "c"]),
        ({"level": ""}, ["a", "b", "c"]),
        ({"partition": "unassigned"}, ["b"]),
        ({"partition": "calibration"}, ["a", "c"]),
        ({"partition": "test"}, []),
        ({"min_age_hours": 3}, ["c"]),
        ({"min_age_hours": "0"}, ["a", "b", "c"]),
        ({"min_age_hours": "3", "level": "claim"}, ["c"]),
    ],
)
def test_the_queue_filters_by_partition_level_and_age(project, queue, filters, expected):
    a, b, c, _ = queue
    names = {a.pk: "a", b.pk: "b", c.pk: "c"}
    # q1/c1 stays unpartitioned; q1/c0 and q2 are calibration (set directly for the test)
    Question.objects.filter(external_id="q2").update(partition="calibration")
    Question.objects.filter(external_id="q1").update(partition="calibration")
    b_question = Question.objects.create(
        project=project, external_id="qb", text="t", fingerprint="0" * 64
    )
    b.candidate.question = b_question
    b.candidate.save(update_fields=["question"])
    Disagreement.objects.filter(item=c).update(opened_at=timezone.now() - timedelta(hours=5))
    got = sorted(names[i.pk] for i in disagreement_queue(project=project, filters=filters))
    assert got == expected


@pytest.mark.parametrize(
    "filters", [{"level": "items"}, {"min_age_hours": "soon"}, {"min_age_hours": -1}]
)
def test_bad_queue_filters_are_refused(project, queue, filters):
    with pytest.raises(InvalidInput):
        list(disagreement_queue(project=project, filters=filters))


def test_the_queue_leaves_out_an_actors_own_items_unless_self_adjudication_is_allowed(
    project, queue
):
    a, b, c, _ = queue
    annotator = Assignment.objects.filter(item=a).first().annotator
    membership_set(project=project, user=annotator, role=Role.ADJUDICATOR)
    mine = {i.pk for i in disagreement_queue(project=project, actor=annotator)}
    assert mine == {b.pk, c.pk}
    project.allow_self_adjudication = True
    assert {i.pk for i in disagreement_queue(project=project, actor=annotator)} == {
        a.pk,
        b.pk,
        c.pk,
    }


def test_the_queue_is_one_query_and_of_one_project(project, queue, import_records):
    with CaptureQueriesContext(connection) as ctx:
        items = list(disagreement_queue(project=project, filters={"level": "answer"}))
        [i.candidate.question.text for i in items]
    assert len(ctx.captured_queries) == 1
    assert all(i.project_id == project.pk for i in items)


# -- side-by-side view ---------------------------------------------------------------------------


@pytest.fixture
def adjudicator(member):
    return member(Role.ADJUDICATOR)


def test_annotators_are_pseudonyms_by_slot_then_prior_annotators(
    project, import_records, adjudicator
):
    # given an item with one imported prior vote and overlap 3: two live annotators, the
    # slot-2 one submitting first
    record = work_record()
    record["candidates"][1]["prior_annotations"] = [
        {
            "annotator": "dataset-annotator-7",
            "answer_label": "abstained",
            "claim_labels": [{"claim": 0, "label": "not_supported"}],
            "spans": [
                {
                    "start": 0,
                    "end": 9,
                    "quote": "It opened",
                    "labels": ["odd"],
                    "note": "Alice says hi",
                }
            ],
        }
    ]
    import_records([record])
    start_labelling(project, overlap=3)
    item = item_of("q1", "c1")
    second = vote(project, item, payload(item, answer="inadmissible", comment="late"), slot=2)
    first = vote(project, item, payload(item, answer="admissible"), slot=1)
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    # when an adjudicator opens it
    view = adjudication_view(project=project, item_id=item.pk, actor=adjudicator)
    # then Annotator 1 holds slot 1, Annotator 2 slot 2, Annotator 3 the imported vote
    columns = view.annotators
    assert [c.pseudonym for c in columns] == ["Annotator 1", "Annotator 2", "Annotator 3"]
    assert [c.vote.answer_label for c in columns] == ["admissible", "inadmissible", "abstained"]
    assert [c.imported for c in columns] == [False, False, True]
    assert columns[1].vote.comment == "late"
    assert columns[2].flags[0].quote == "It opened" and columns[2].flags[0].labels == ("odd",)
    # the answer level differs; the claim does not (all not_supported)
    assert view.diff.answer_differs and not view.diff.claims
    assert view.version == item.version and view.can_adjudicate
    assert [s.text for s in view.sources] == [SourceVersion.objects.get().text]
    # the imported annotator's note is shown beside their vote, as the dataset gave it
    assert columns[2].flags[0].note == "Alice says hi"
    # no identity anywhere: no username, no dataset annotator id
    text = repr(view)
    for secret in (first.annotator.username, second.annotator.username, "dataset-annotator-7"):
        assert secret not in text


def test_differing_claims_are_marked(project, queue, adjudicator):
    _, b, c, _ = queue
    view = adjudication_view(project=project, item_id=c.pk, actor=adjudicator)
    second = Claim.objects.get(candidate=c.candidate, index=1)
    first = Claim.objects.get(candidate=c.candidate, index=0)
    # c: claim 0 not_supported vs supported; claim 1 not_supported vs not_supported
    assert view.differing_claim_ids == {first.pk}
    assert second.pk not in view.differing_claim_ids


def test_opening_the_view_writes_nothing(project, queue, adjudicator):
    a, *_ = queue
    before = row_counts()
    version = Item.objects.get(pk=a.pk).version
    with CaptureQueriesContext(connection) as ctx:
        adjudication_view(project=project, item_id=a.pk, actor=adjudicator)
    statements = [q["sql"].lstrip().upper() for q in ctx.captured_queries]
    assert not [s for s in statements if s.startswith(WRITES)]
    assert len(statements) <= 12
    assert row_counts() == before
    assert Item.objects.get(pk=a.pk).version == version


def test_the_view_refuses_annotators_outsiders_open_items_and_own_items(project, queue, member):
    a, *_ = queue
    with pytest.raises(PermissionDenied):
        adjudication_view(project=project, item_id=a.pk, actor=member(Role.ANNOTATOR))
    with pytest.raises(NotFound):
        adjudication_view(project=project, item_id=a.pk, actor=UserFactory())
    manager = member(Role.MANAGER)
    open_item = Item.objects.create(project=project, candidate=_spare_candidate(a))
    with pytest.raises(NotFound):
        adjudication_view(project=project, item_id=open_item.pk, actor=manager)
    own = Assignment.objects.filter(item=a).first().annotator
    membership_set(project=project, user=own, role=Role.ADJUDICATOR)
    with pytest.raises(PermissionDenied):
        adjudication_view(project=project, item_id=a.pk, actor=own)


def _spare_candidate(item: Item):
    from labeling.models import CandidateAnswer

    return CandidateAnswer.objects.create(
        question=item.candidate.question,
        key="spare",
        text="x",
        sample_index=99,
        fingerprint="0" * 64,
    )


def test_a_resolved_item_shows_its_decision_history(project, queue, adjudicator):
    a, *_ = queue
    adjudication_mark_unresolved(
        project=project,
        item_id=a.pk,
        actor=adjudicator,
        expected_version=Item.objects.get(pk=a.pk).version,
        reason="ambiguous_guideline",
    )
    view = adjudication_view(project=project, item_id=a.pk, actor=adjudicator)
    assert view.status == ItemStatus.RESOLVED
    assert view.resolution.status == "unresolved"
    assert [r.number for r in view.history] == [1]
    assert view.can_adjudicate  # a correction is possible


# -- progress -----------------------------------------------------------------------------------


def test_progress_counts_items_by_state(project, queue, adjudicator, import_records):
    a, b, c, d = queue
    # one more question: one item leased, one untouched
    import_records([work_record("q3")])
    Item.objects.filter(candidate__question__external_id="q3").update(overlap=2)
    AssignmentFactory(item=item_of("q3", "c0"))
    adjudication_resolve(
        project=project,
        item_id=a.pk,
        actor=adjudicator,
        expected_version=Item.objects.get(pk=a.pk).version,
        answer_label="admissible",
        claims=payload(a).claims,
        rationale="x",
    )
    adjudication_mark_unresolved(
        project=project,
        item_id=b.pk,
        actor=adjudicator,
        expected_version=Item.objects.get(pk=b.pk).version,
        reason="other",
        rationale="typo in the source",
    )
    with CaptureQueriesContext(connection) as ctx:
        progress = project_progress(project=project)
    assert len(ctx.captured_queries) == 1
    assert progress.total == 6
    assert (progress.open_untouched, progress.in_progress) == (1, 1)
    assert progress.awaiting_adjudication == 1
    assert (progress.resolved_consensus, progress.resolved_adjudicated, progress.unresolved) == (
        1,
        1,
        1,
    )


# -- labelling form -------------------------------------------------------------------------------


@pytest.fixture
def form_item(project, import_records) -> Item:
    import_records([work_record()])
    start_labelling(project)
    return item_of("q1", "c0")


def test_the_form_shows_question_answer_claims_and_pinned_sources_only(project, form_item):
    # given another annotator's submitted labels on the same item
    other = vote(
        project, form_item, payload(form_item, answer="inadmissible", comment="secret-note")
    )
    assignment = AssignmentFactory(item=form_item)
    # when the form is read for the second annotator
    view = labelling_form_view(project=project, assignment=assignment)
    # then it has the question, the answer, the claims and the pinned sources in full
    assert view.question_text == form_item.candidate.question.text
    assert view.candidate_text == form_item.candidate.text
    assert [c.text for c in view.claims] == ["It opened in 1932.", "It spans the harbour."]
    version = SourceVersion.objects.get()
    assert [(s.id, s.text, s.sha256) for s in view.sources] == [
        (version.pk, version.text, version.sha256)
    ]
    assert "cannot_decide" == view.policy.cannot_decide
    assert "supported" in view.policy.claim_labels
    assert view.current is None and view.editable
    # and nothing of anyone else, nor question metadata, nor the generator
    text = repr(view)
    for secret in (
        "secret-note",
        other.annotator.username,
        "opened 1932; spans",
        "model-a",
    ):
        assert secret not in text


def test_the_form_shows_the_actors_current_revision_and_writes_nothing(project, form_item):
    assignment = vote(project, form_item, payload(form_item, comment="mine"))
    assignment.refresh_from_db()
    before = row_counts()
    with CaptureQueriesContext(connection) as ctx:
        view = labelling_form_view(project=project, assignment=assignment)
    statements = [q["sql"].lstrip().upper() for q in ctx.captured_queries]
    assert not [s for s in statements if s.startswith(WRITES)]
    assert len(statements) <= 8
    assert row_counts() == before
    assert view.current.comment == "mine" and view.current.revision == 1
    assert view.current.slot is None
    assert view.editable


def test_the_form_of_an_expired_assignment_is_read_only(project, form_item):
    assignment = AssignmentFactory(item=form_item, status="expired", ended_at=timezone.now())
    assert labelling_form_view(project=project, assignment=assignment).editable is False


@pytest.mark.parametrize("age", [1e9, "1e12", 6.9e307, float("inf"), float("nan")])
def test_an_age_past_the_bound_is_refused_naming_the_filter(project, queue, age):
    # timedelta(hours=1e9) raised OverflowError (a 500) before the bound
    with pytest.raises(InvalidInput) as refused:
        list(disagreement_queue(project=project, filters={"min_age_hours": age}))
    assert refused.value.field == "min_age_hours"


# -- live votes ----------------------------------------------------------------------------------


def _orm_live_votes(item_ids):
    """The live votes read through the ORM, as a reference for the plain-SQL read."""
    out = {pk: [] for pk in item_ids}
    annotations = (
        Annotation.objects.filter(item_id__in=item_ids, assignment__status="submitted")
        .select_related("current", "assignment")
        .order_by("item_id", "assignment__slot", "assignment_id")
    )
    for n in annotations:
        r = n.current
        claims = [
            (
                cl.claim_id,
                cl.label,
                cl.reason,
                cl.boundary_error,
                [
                    (e.source_version_id, e.start, e.end, e.quote)
                    for e in cl.evidence.order_by("source_version_id", "start", "end")
                ],
            )
            for cl in r.claim_labels.order_by("claim__index")
        ]
        out[n.item_id].append(
            (n.pk, n.assignment.slot, r.answer_label, r.answer_reason, r.comment, r.number)
            + (n.assignment.submitted_at, claims)
        )
    return out


def _projected(votes):
    return {
        pk: [
            (v.ref, v.slot, v.answer_label, v.answer_reason, v.comment, v.revision)
            + (
                v.submitted_at,
                [
                    (
                        claim_id,
                        c.label,
                        c.reason,
                        c.boundary_error,
                        [(s.source_version_id, s.start, s.end, s.quote) for s in c.evidence],
                    )
                    for claim_id, c in v.claims.items()
                ],
            )
            for v in item_votes_
        ]
        for pk, item_votes_ in votes.items()
    }


@pytest.mark.parametrize("chunk", [1, 2000])
def test_live_votes_match_the_orm_read(project, queue, monkeypatch, chunk):
    # given the queue's items, with evidence on the supported and contradicted claims
    from labeling.selectors import vote_reads

    a, b, c, d = queue
    monkeypatch.setattr(vote_reads, "VOTE_CHUNK", chunk)
    ids = [a.pk, b.pk, c.pk, d.pk, 10**9]
    # when the votes are read, in one chunk or one id per statement
    votes = vote_reads.item_votes(item_ids=ids, prior_item_ids=[])
    # then they are the ORM's, in its order, with aware submission times
    assert _projected(votes) == _orm_live_votes(ids)
    assert sum(len(v) for v in votes.values()) == 8 and votes[10**9] == []
    assert all(v.submitted_at.tzinfo is not None for vs in votes.values() for v in vs)
    assert any(c.evidence for vs in votes.values() for v in vs for c in v.claims.values()), (
        "the fixture cites evidence"
    )


# -- prior votes ---------------------------------------------------------------------------------


def _orm_prior_votes(item_ids):
    """The prior votes read through the ORM, as a reference for the plain-SQL read."""
    out = {pk: [] for pk in item_ids}
    priors = (
        PriorAnnotation.objects.filter(
            candidate__item__in=item_ids,
            candidate__item__prior_votes__gt=0,
            answer_label__isnull=False,
        )
        .exclude(answer_label="")
        .select_related("candidate__item")
        .order_by("candidate_id", "pk")
    )
    for p in priors:
        claims = [
            (
                cl.claim_id,
                cl.label,
                cl.reason,
                [
                    (e.source_version_id, e.start, e.end, e.quote)
                    for e in cl.evidence.filter(end__gt=F("start")).order_by(
                        "source_version_id", "start", "end"
                    )
                ],
            )
            for cl in p.claim_labels.order_by("pk")
        ]
        out[p.candidate.item.pk].append(
            (p.pk, p.answer_label, p.answer_reason, p.origin == "automatic", claims)
        )
    return out


def _prior_projected(votes):
    return {
        pk: [
            (
                v.ref,
                v.answer_label,
                v.answer_reason,
                v.automatic,
                [
                    (
                        claim_id,
                        c.label,
                        c.reason,
                        [(s.source_version_id, s.start, s.end, s.quote) for s in c.evidence],
                    )
                    for claim_id, c in v.claims.items()
                ],
            )
            for v in vs
            if not v.live
        ]
        for pk, vs in votes.items()
    }


def _evidence(source: str, start: int, end: int) -> dict:
    return {"source": source, "start": start, "end": end, "quote": WORK_SOURCE[start:end]}


@pytest.mark.parametrize("chunk", [1, 2000])
def test_prior_votes_match_the_orm_read(project, import_records, monkeypatch, chunk):
    # given imported votes: with evidence (one span empty), automatic, without an answer label
    # (no vote), and an item that no longer counts its prior votes
    from labeling.selectors import vote_reads

    q1, q2 = work_record("q1"), work_record("q2")
    q1["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "ds-a",
            "answer_label": "admissible",
            "claim_labels": [
                {
                    "claim": 0,
                    "label": "supported",
                    "evidence": [_evidence("doc-q1", 11, 25), _evidence("doc-q1", 0, 10)],
                },
                {"claim": 1, "label": "supported", "evidence": [_evidence("doc-q1", 5, 5)]},
            ],
        },
        {
            "annotator": "judge",
            "origin": "automatic",
            "answer_label": "inadmissible",
            "claim_labels": [{"claim": 1, "label": "contradicted"}],
        },
        {"annotator": "ds-c", "claim_labels": [{"claim": 0, "label": "supported"}]},
    ]
    q1["candidates"][1]["prior_annotations"] = [
        {"annotator": "ds-a", "answer_label": "inadmissible", "claim_labels": []}
    ]
    q2["candidates"][0]["prior_annotations"] = [
        {"annotator": "ds-a", "answer_label": "admissible", "claim_labels": []}
    ]
    import_records([q1, q2])
    Item.objects.filter(candidate__question__project=project).update(prior_votes=2)
    Item.objects.filter(candidate__question__external_id="q2").update(prior_votes=0)
    ids = [*Item.objects.order_by("pk").values_list("pk", flat=True), 10**9]
    monkeypatch.setattr(vote_reads, "VOTE_CHUNK", chunk)
    # when the votes are read, in one chunk or one id per statement
    votes = vote_reads.item_votes(item_ids=ids)
    # then the prior votes are the ORM's, in its order, empty spans left out
    assert _prior_projected(votes) == _orm_prior_votes(ids)
    c0 = Item.objects.get(candidate__question__external_id="q1", candidate__key="c0")
    assert [(v.answer_label, v.automatic) for v in votes[c0.pk]] == [
        ("admissible", False),
        ("inadmissible", True),
    ]
    first = votes[c0.pk][0].claims
    assert [(s.start, s.end) for s in next(iter(first.values())).evidence] == [(0, 10), (11, 25)]
    assert [c.evidence for c in first.values()][1] == ()
    assert sum(len(v) for v in votes.values()) == 3 and votes[10**9] == []
