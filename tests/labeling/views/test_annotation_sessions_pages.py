"""Two sessions of one annotator on the labelling page: the later submit is told, not saved.

Each session is its own Django test client logged in as the same annotator; the page carries
the revision its labels are made on in a hidden field.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from labeling.models import Annotation, AnnotationRevision
from tests.labeling.views.conftest import claim_next, form_url, labels_post

pytestmark = pytest.mark.django_db


def session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def based_on(content: str) -> str:
    match = re.search(r'<input type="hidden" name="revision" value="(\d*)">', content)
    assert match, "the form carries no revision"
    return match.group(1)


def test_the_form_carries_the_revision_it_shows(started, annotator):
    tab = session(annotator)
    assignment = claim_next(started, annotator)
    assert based_on(tab.get(form_url(assignment)).content.decode()) == "0"
    tab.post(form_url(assignment), labels_post(assignment.item, revision="0"))
    assert based_on(tab.get(form_url(assignment)).content.decode()) == "1"


def test_two_sessions_submitting_at_once_the_second_gets_409_with_the_saved_labels(
    started, annotator
):
    # given two sessions of one annotator that both opened the fresh form
    first, second = session(annotator), session(annotator)
    assignment = claim_next(started, annotator)
    revision_a = based_on(first.get(form_url(assignment)).content.decode())
    revision_b = based_on(second.get(form_url(assignment)).content.decode())
    assert revision_a == revision_b == "0"
    # when the first saves "admissible", then the second saves "inadmissible"
    saved = first.post(
        form_url(assignment), labels_post(assignment.item, revision=revision_a, comment="TAB-A")
    )
    refused = second.post(
        form_url(assignment),
        labels_post(assignment.item, answer="inadmissible", revision=revision_b, comment="TAB-B"),
    )

    # then the first is saved and the second is told, with what is saved now shown
    assert saved.status_code == 302
    assert refused.status_code == 409
    content = refused.content.decode()
    assert "Another session changed this annotation since you opened it" in content
    assert "your labels were not saved" in content
    assert "Saved now: revision 1" in content
    assert '<p class="saved-answer">Answer: <strong>admissible</strong></p>' in content
    assert '<p class="saved-comment">Comment: TAB-A</p>' in content
    assert content.count('class="saved-claim"') == 2
    assert "“opened in 1932”" in content
    # the second session's input is kept in the form, now based on revision 1
    assert 'value="inadmissible" checked' in content
    assert "TAB-B</textarea>" in content
    assert based_on(content) == "1"
    # and nothing was overwritten
    annotation = Annotation.objects.get(assignment=assignment)
    assert (annotation.revision_count, annotation.current.answer_label) == (1, "admissible")
    assert AnnotationRevision.objects.count() == 1

    # when the second session saves again from the conflict page (now knowingly)
    again = second.post(
        form_url(assignment),
        labels_post(assignment.item, answer="inadmissible", revision=based_on(content)),
    )

    # then it is revision 2
    assert again.status_code == 302
    annotation.refresh_from_db()
    assert (annotation.revision_count, annotation.current.answer_label) == (2, "inadmissible")


def test_a_revision_from_a_stale_tab_is_refused(started, annotator):
    # given revision 1, opened for revising in two tabs, and revised in the first
    tab_a, tab_b = session(annotator), session(annotator)
    assignment = claim_next(started, annotator)
    tab_a.post(form_url(assignment), labels_post(assignment.item, revision="0"))
    base = based_on(tab_a.get(form_url(assignment)).content.decode())
    assert base == based_on(tab_b.get(form_url(assignment)).content.decode()) == "1"
    assert (
        tab_a.post(
            form_url(assignment), labels_post(assignment.item, revision=base, comment="A")
        ).status_code
        == 302
    )
    # when the second tab saves its own revision made on revision 1
    refused = tab_b.post(
        form_url(assignment), labels_post(assignment.item, revision=base, comment="B")
    )
    # then 409, revision 2 ("A") is shown and stays current
    assert refused.status_code == 409
    assert "Saved now: revision 2" in refused.content.decode()
    assert Annotation.objects.get(assignment=assignment).current.comment == "A"


def test_a_malformed_revision_is_400_naming_the_field(started, annotator):
    tab = session(annotator)
    assignment = claim_next(started, annotator)
    response = tab.post(form_url(assignment), labels_post(assignment.item, revision="one"))
    assert response.status_code == 400
    assert "revision: &#x27;one&#x27; is not an integer" in response.content.decode()
    assert not Annotation.objects.exists()
