"""The labelling workbench page: progress figures, the guideline (rendered, sanitised, its
version), label definitions as hints, sources numbered and headed by URI or first words,
reasons in words, and the "Revise previous" link."""

from __future__ import annotations

from django.urls import reverse

from labeling.models import Assignment, AssignmentStatus, ItemStatus, LabelPolicy
from labeling.selectors.policies import LabelChoice
from labeling.views.labels import label_options
from tests.factories import WORK_SOURCE, start_labelling, work_record
from tests.labeling.views.conftest import claim_next, form_url, labels_post


def test_progress_counts_done_left_and_skipped_for_this_annotator(client, started, annotator):
    client.force_login(annotator)
    first = claim_next(started, annotator)
    client.post(form_url(first), labels_post(first.item))  # done: 1; claims the next
    second = first.__class__.objects.get(annotator=annotator, status="leased")
    client.post(
        f"/p/study/annotate/{second.pk}/skip/", {"reason": "other", "note": ""}
    )  # skipped: 1; claims the third
    third = first.__class__.objects.get(annotator=annotator, status="leased")

    content = client.get(form_url(third)).content.decode()

    # 4 items: 1 done, 1 skipped, the one held now and one more never taken
    assert '<strong id="progress-done">1</strong>' in content
    assert '<span id="progress-skipped">1</span>' in content
    assert '<span id="progress-left">2</span>' in content
    assert '<progress id="progress-bar" value="1" max="4"' in content


def test_the_guideline_is_rendered_sanitised_with_its_version(
    client, project, import_records, member
):
    policy = LabelPolicy.objects.get(project=project)
    policy.guideline = (
        "## Citing\n\n*Supported* needs a span.\n\n<script>alert(1)</script>"
        "[x](javascript:alert(1))"
    )
    policy.save()
    import_records([work_record("q1")])
    started = start_labelling(project, overlap=2)
    annotator = member("annotator")
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    content = client.get(form_url(assignment)).content.decode()

    panel = content[content.index('id="guideline-panel"') :]
    panel = panel[: panel.index("</details>")]
    version = LabelPolicy.objects.get(project=project).version
    assert f'<span id="guideline-version">Guideline v{version}</span>' in panel
    assert "<h4>Citing</h4>" in panel and "<em>Supported</em> needs a span." in panel
    assert "<script>" not in panel and "javascript:" not in panel


def test_label_definitions_become_hints_on_the_options():
    choices = [
        LabelChoice("supported", "Supported", "A cited span says so.", "d"),
        LabelChoice("not_supported", "not supported", "", "2"),
    ]
    options = label_options(choices, cannot_decide=True)

    assert [(o.value, o.text, o.key, o.description) for o in options] == [
        ("supported", "Supported", "d", "A cited span says so."),
        ("not_supported", "not supported", "2", ""),
        ("cannot_decide", "can't decide", "0", ""),
    ]
    assert options[0].hint_id == "label-hint-supported"


def test_sources_are_numbered_and_headed_by_uri_else_first_words_and_reasons_read_as_words(
    client, project, import_records, member
):
    record = work_record("q1")
    record["sources"][0]["uri"] = "https://example.org/bridge"
    import_records([record, work_record("q2")])
    started = start_labelling(project, overlap=2)
    annotator = member("annotator")
    client.force_login(annotator)

    pages = []
    for _ in range(4):
        assignment = claim_next(started, annotator)
        pages.append(client.get(form_url(assignment)).content.decode())
        client.post(form_url(assignment), labels_post(assignment.item))
    titles = {
        page[
            page.index('<h3 class="source-title">') : page.index(
                "</h3>", page.index('class="source-title"')
            )
        ]
        for page in pages
    }

    assert titles == {
        '<h3 class="source-title">Source 1: <span class="source-uri">https://example.org/bridge</span>',
        # never the document key (often a hash): the first 8 words of the text
        '<h3 class="source-title">Source 1: <span class="source-excerpt">'
        + " ".join(WORK_SOURCE.split()[:8])
        + " …</span>",
    }
    assert "doc-q2" not in "".join(pages)
    assert '<option value="not_found">source not found</option>' in pages[0]
    assert ">not_found<" not in pages[0]


def test_the_next_item_links_to_revise_the_previous_submission(client, started, annotator):
    client.force_login(annotator)
    first = claim_next(started, annotator)
    response = client.post(form_url(first), labels_post(first.item))

    content = client.get(response["Location"]).content.decode()

    assert (
        f'<a id="revise-previous" href="{form_url(first)}">Revise previous <kbd>p</kbd></a>'
        in content
    )


def test_the_policys_label_words_keys_definitions_and_evidence_rule_reach_the_form(
    client, project, import_records, member
):
    # given a policy that renames "supported", keys it "d", defines it, and makes
    # "not_supported" need evidence too
    policy = LabelPolicy.objects.get(project=project)
    policy.label_details = {
        "claim": {
            "supported": {"text": "Backed by the source", "description": "Cite it.", "key": "d"}
        }
    }
    policy.evidence_labels = ["supported", "contradicted", "not_supported"]
    policy.reason_texts = {"not_found": "nothing in the sources"}
    policy.save()
    import_records([work_record("q1")])
    started = start_labelling(project, overlap=2)
    annotator = member("annotator")
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    content = client.get(form_url(assignment)).content.decode()

    # then the options carry the policy's words, keys and hints; can't decide is key 0
    assert 'data-key="d" aria-describedby="label-hint-supported" name="claim-' in content
    assert "<kbd>d</kbd> Backed by the source" in content
    assert 'title="Cite it."' in content
    assert 'data-key="0" name="claim-' in content
    assert ">nothing in the sources</option>" in content
    # and the page script checks the policy's evidence labels before sending
    rules = content[content.index('id="workbench-rules"') :]
    rules = rules[: rules.index("</script>")]
    assert '"not_supported"' in rules


def test_a_submission_whose_vote_closed_its_item_is_not_offered_for_revision(
    client, project, import_records, member
):
    # given overlap 1: the annotator's own vote closes each item
    import_records([work_record("q1"), work_record("q2")])
    started = start_labelling(project, overlap=1)
    annotator = member("annotator")
    client.force_login(annotator)
    first = claim_next(started, annotator)

    # when they submit it (the next item opens), and, ahead, the next one naming its reserve
    response = client.post(form_url(first), labels_post(first.item))
    content = client.get(response["Location"]).content.decode()
    second = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    reserve = client.post(
        reverse("annotate-ahead", args=["study", second.pk]), HTTP_ACCEPT="application/json"
    ).json()["reserve"]
    body = client.post(
        form_url(second),
        labels_post(second.item, ahead=str(reserve["assignment_id"])),
        HTTP_ACCEPT="application/json",
    ).json()

    # then neither page offers "Revise previous": the items are closed
    first.item.refresh_from_db()
    assert first.item.status != ItemStatus.OPEN
    assert 'id="revise-previous"' not in content
    assert body["next"]["ahead"] is True and body["next"]["previous_url"] is None
    # and the closed item's page takes them back to the item they hold with one key (n: the
    # nav's "Next item" form, which reopens the item held)
    closed = client.get(form_url(first)).content.decode()
    assert 'id="not-editable"' in closed
    assert (
        '<button type="submit" form="nav-next-form" class="link" id="back-to-work">'
        "Back to your item <kbd>n</kbd></button>" in closed
    )
    assert (
        f'action="{reverse("annotate-next", args=["study"])}" class="nav-form" id="nav-next-form"'
        in closed
    )
