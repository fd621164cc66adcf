"""annotation_submit with ``based_on_revision``: no revision replaces another unseen.

Two sessions of one annotator (two tabs, two devices) load the form at the same revision; the
first to submit is saved, the second is refused with StaleVersion carrying the current labels.
"""

from __future__ import annotations

import dataclasses

import pytest

from labeling.exceptions import InvalidInput, StaleVersion
from labeling.models import Annotation, AnnotationRevision, Claim, Item
from labeling.services.annotations import annotation_submit
from tests.conftest import row_counts
from tests.factories import AssignmentFactory, start_labelling, work_record
from tests.labeling.services.test_annotation_revise import labels

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(project, import_records) -> Item:
    import_records([work_record()])
    start_labelling(project)
    return Item.objects.get(candidate__key="c0")


def submit(project, assignment, data, based_on):
    return annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=assignment.annotator,
        data=dataclasses.replace(data, based_on_revision=based_on),
    )


def test_a_revision_made_on_an_older_revision_is_refused_with_the_current_labels(project, item):
    # given revision 2, saved by the first session from revision 1
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item), 0)
    submit(project, assignment, labels(item, answer="inadmissible", comment="tab A"), 1)
    before = row_counts()
    # when the second session, which loaded revision 1 too, saves other labels
    with pytest.raises(StaleVersion) as refused:
        submit(project, assignment, labels(item, answer="abstained", comment="tab B"), 1)
    # then nothing is written, and the refusal says so and carries revision 2's labels
    assert row_counts() == before
    error = refused.value
    assert (error.code, error.field) == ("stale_version", "revision")
    assert error.message == (
        "another session changed this annotation: your labels were made on revision 1, the "
        "current one is revision 2; nothing was saved. Check the current labels and submit "
        "again"
    )
    claims = Claim.objects.filter(candidate=item.candidate).order_by("index")
    first, second = claims.values_list("pk", flat=True)
    current = error.data["current"]
    assert (error.data["based_on_revision"], error.data["current_revision"]) == (1, 2)
    assert (current["revision"], current["answer_label"], current["comment"]) == (
        2,
        "inadmissible",
        "tab A",
    )
    assert [(c["claim_id"], c["label"]) for c in current["claims"]] == [
        (first, "supported"),
        (second, "supported"),
    ]
    [quote] = current["claims"][0]["evidence"]
    assert (quote["quote"], quote["unit"]) == ("opened in 1932", "codepoint")
    annotation = Annotation.objects.get()
    assert (annotation.revision_count, annotation.current.comment) == (2, "tab A")


def test_two_first_submits_from_two_sessions_the_second_is_refused(project, item):
    # given two sessions that opened the fresh form (revision 0) and the first submitted
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item), 0)
    # when the second submits other labels, also made on revision 0
    with pytest.raises(StaleVersion) as refused:
        submit(project, assignment, labels(item, answer="inadmissible"), 0)
    # then revision 1 stays the only one
    assert refused.value.data["current_revision"] == 1
    assert refused.value.data["current"]["answer_label"] == "admissible"
    assert AnnotationRevision.objects.count() == 1


def test_the_same_labels_as_the_current_revision_are_accepted_whatever_the_base(project, item):
    # a retry of a submit whose answer was lost carries the old base and the saved content
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item), 0)
    annotation = submit(project, assignment, labels(item), 0)
    assert annotation.revision_count == 1


def test_a_revision_made_on_the_current_revision_is_saved(project, item):
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item), 0)
    annotation = submit(project, assignment, labels(item, answer="inadmissible"), 1)
    annotation = submit(project, assignment, labels(item, answer="abstained"), 2)
    assert (annotation.revision_count, annotation.current.answer_label) == (3, "abstained")


def test_a_first_submit_made_on_a_revision_that_does_not_exist_is_refused(project, item):
    assignment = AssignmentFactory(item=item)
    before = row_counts()
    with pytest.raises(StaleVersion) as refused:
        submit(project, assignment, labels(item), 3)
    assert refused.value.data == {"based_on_revision": 3, "current_revision": 0, "current": None}
    assert row_counts() == before


@pytest.mark.parametrize("bad", [-1, True, "1", 1.0, 2**63])
def test_a_malformed_revision_number_is_invalid_input_naming_revision(project, item, bad):
    assignment = AssignmentFactory(item=item)
    with pytest.raises(InvalidInput) as refused:
        submit(project, assignment, labels(item), bad)
    assert refused.value.field == "revision"
    assert not Annotation.objects.exists()
