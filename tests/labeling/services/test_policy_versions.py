"""policy_version_publish: a new label policy version after labelling started, end to end.

Label under v1, publish v2 with a changed label set, label under v2: every label keeps its
version, votes of two versions are never compared together, and resolved items are kept or
returned for labelling as the manager chose.
"""

from __future__ import annotations

from typing import Any

import pytest

from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    StaleVersion,
)
from labeling.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    AssignmentStatus,
    Claim,
    DerivedChange,
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    Resolution,
    Role,
)
from labeling.selectors.policies import policy_description_data
from labeling.selectors.review import labelling_policy_get
from labeling.services.annotations import annotation_submit
from labeling.services.assignments import item_claim_next
from labeling.services.label_checks import AnnotationInput, ClaimInput
from labeling.services.policies import policy_update
from labeling.services.policy_versions import (
    Resolved,
    policy_diff,
    policy_version_publish,
)
from tests.factories import UserFactory, start_labelling, work_record

pytestmark = pytest.mark.django_db

V2_ANSWER_LABELS = ["admissible", "inadmissible", "evidence_unavailable"]  # "abstained" dropped


def description(project, **changes: Any) -> dict[str, Any]:
    """The current labelling policy's full description with ``changes``."""
    data = policy_description_data(labelling_policy_get(project=project))
    return {**data, **changes}


def without_abstained(project) -> dict[str, Any]:
    data = description(project)
    return {
        **data,
        "answer_labels": [r for r in data["answer_labels"] if r["value"] != "abstained"],
    }


@pytest.fixture
def study(project, import_records, member) -> dict[str, Any]:
    """Two items (c0 with two claims, c1 with one), overlap 2, two annotators, a manager."""
    import_records([work_record()])
    start_labelling(project, overlap=2)
    manager = UserFactory()
    from labeling.services import membership_set

    membership_set(project=project, user=manager, role=Role.MANAGER)
    return {
        "project": project,
        "manager": manager,
        "ann": [member(Role.ANNOTATOR), member(Role.ANNOTATOR)],
        "c0": Item.objects.get(candidate__key="c0"),
        "c1": Item.objects.get(candidate__key="c1"),
    }


def labels(item: Item, answer: str = "inadmissible", **extra: Any) -> AnnotationInput:
    """Every claim ``not_supported`` (no evidence needed) and the given answer label."""
    claims = tuple(
        ClaimInput(pk, "not_supported")
        for pk in Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    return AnnotationInput(answer_label=answer, claims=claims, **extra)


def claim(study: dict[str, Any], who: int, item: Item) -> Assignment:
    """Claim items for annotator ``who`` until ``item`` is served (others are skipped)."""
    for _ in range(4):
        assignment = item_claim_next(project=study["project"], actor=study["ann"][who])
        assert assignment is not None, f"annotator {who} was served nothing"
        if assignment.item_id == item.pk:
            return assignment
        from labeling.services.skips import assignment_skip

        assignment_skip(
            project=study["project"],
            assignment_id=assignment.pk,
            actor=study["ann"][who],
            reason="other",
        )
    raise AssertionError(f"item {item.pk} was not served to annotator {who}")


def vote(study: dict[str, Any], who: int, item: Item, **kwargs: Any) -> Annotation:
    assignment = claim(study, who, item)
    return annotation_submit(
        project=study["project"],
        assignment_id=assignment.pk,
        actor=study["ann"][who],
        data=labels(item, **kwargs),
    )


def publish(study: dict[str, Any], **overrides: Any):
    kwargs: dict[str, Any] = {
        "project": study["project"],
        "actor": study["manager"],
        "content": without_abstained(study["project"]),
        "note": "abstained is no longer an answer label",
        "based_on_version": 1,
        "resolved": Resolved.KEEP,
    }
    kwargs.update(overrides)
    return policy_version_publish(**kwargs)


def test_dry_run_shows_the_diff_and_counts_and_writes_nothing(study):
    # given c0 resolved under v1 and c1 with one vote under v1
    vote(study, 0, study["c0"])
    vote(study, 1, study["c0"])
    vote(study, 0, study["c1"])
    before = (LabelPolicy.objects.count(), DerivedChange.objects.count())
    # when the manager previews v2
    preview = publish(study, dry_run=True, resolved=Resolved.REOPEN)
    # then the diff names the removed label, the counts what would happen; nothing is written
    assert preview.dry_run and preview.policy is None
    assert (preview.previous_version, preview.version) == (1, 2)
    [change] = [c.as_json() for c in preview.diff]
    assert change["field"] == "answer_labels"
    assert [r["value"] for r in change["old"]] == [
        "admissible",
        "inadmissible",
        "abstained",
        "evidence_unavailable",
    ]
    assert [r["value"] for r in change["new"]] == V2_ANSWER_LABELS
    assert (change["added"], change["removed"], change["changed"]) == ([], ["abstained"], [])
    assert (preview.restarted, preview.reopened, preview.kept) == (1, 1, 0)
    assert (LabelPolicy.objects.count(), DerivedChange.objects.count()) == before
    assert Item.objects.get(pk=study["c0"].pk).status == ItemStatus.RESOLVED


def test_label_under_v1_publish_v2_label_under_v2_keeps_every_version(study):
    # given c0 resolved by consensus under v1, and c1 with one vote under v1 (in flight)
    vote(study, 0, study["c0"])
    vote(study, 1, study["c0"])
    first_c1 = vote(study, 0, study["c1"], answer="abstained")
    # when v2 (without "abstained") is published, keeping resolved items
    result = publish(study)
    # then v2 is frozen, records the note and the publisher, and follows v1
    v2 = result.policy
    assert (v2.version, v2.previous.version, v2.answer_labels) == (2, 1, V2_ANSWER_LABELS)
    assert v2.frozen_at is not None and v2.change_note == "abstained is no longer an answer label"
    assert v2.published_by == study["manager"]
    assert (result.restarted, result.reopened, result.kept) == (1, 0, 1)
    # c0 keeps its v1 resolution
    c0 = Item.objects.select_related("resolution__policy").get(pk=study["c0"].pk)
    assert c0.status == ItemStatus.RESOLVED and c0.resolution.policy.version == 1
    # c1 was restarted: the v1 vote is kept (retired) and no longer counts
    c1 = Item.objects.get(pk=study["c1"].pk)
    assert (c1.status, c1.assigned_count) == (ItemStatus.OPEN, 0)
    kept = Annotation.objects.select_related("current__policy", "assignment").get(pk=first_c1.pk)
    assert kept.assignment.status == AssignmentStatus.RETIRED
    assert (kept.current.policy.version, kept.current.answer_label) == (1, "abstained")
    # when both annotators label c1 under v2 (the first one again)
    with pytest.raises(InvalidInput) as refused:
        vote(study, 0, study["c1"], answer="abstained")
    assert refused.value.field == "answer_label"
    a = annotation_submit(
        project=study["project"],
        assignment_id=Assignment.objects.get(
            item=c1, annotator=study["ann"][0], status=AssignmentStatus.LEASED
        ).pk,
        actor=study["ann"][0],
        data=labels(c1),
    )
    vote(study, 1, study["c1"])
    # then c1 is resolved under v2 from the two v2 votes only
    c1.refresh_from_db()
    assert c1.status == ItemStatus.RESOLVED
    assert Resolution.objects.get(item=c1).policy.version == 2
    assert a.current.policy.version == 2
    versions = sorted(
        AnnotationRevision.objects.filter(annotation__item=c1).values_list(
            "policy__version", flat=True
        )
    )
    assert versions == [1, 2, 2]


def test_reopen_returns_resolved_items_for_labelling_under_v2(study):
    # given c0 resolved by consensus under v1
    first = [vote(study, 0, study["c0"]), vote(study, 1, study["c0"])]
    v1_resolution = Item.objects.get(pk=study["c0"].pk).resolution
    # when v2 is published with "reopen"
    result = publish(study, resolved=Resolved.REOPEN)
    # then c0 is open again, its v1 votes and resolution kept
    assert (result.reopened, result.kept) == (1, 0)
    c0 = Item.objects.get(pk=study["c0"].pk)
    assert (c0.status, c0.assigned_count, c0.prior_votes) == (ItemStatus.OPEN, 0, 0)
    assert c0.resolution_id == v1_resolution.pk
    assert set(
        Assignment.objects.filter(annotation__in=first).values_list("status", flat=True)
    ) == {AssignmentStatus.RETIRED}
    assert DerivedChange.objects.filter(project=study["project"]).exists()
    # when the same two annotators label it again under v2
    vote(study, 0, study["c0"], answer="admissible")
    vote(study, 1, study["c0"], answer="admissible")
    # then a v2 consensus supersedes the v1 resolution; both are kept
    c0.refresh_from_db()
    assert c0.status == ItemStatus.RESOLVED
    assert (c0.resolution.number, c0.resolution.policy.version) == (2, 2)
    assert c0.resolution.supersedes_id == v1_resolution.pk
    assert c0.resolution.answer_label == "admissible"
    assert Annotation.objects.filter(item=c0).count() == 4


def test_reopen_closes_an_open_disagreement_without_a_decision(study):
    # given c0 in the disagreement queue under v1
    vote(study, 0, study["c0"], answer="admissible")
    vote(study, 1, study["c0"], answer="inadmissible")
    assert Item.objects.get(pk=study["c0"].pk).status == ItemStatus.DISAGREEMENT
    # when v2 is published with "reopen"
    publish(study, resolved=Resolved.REOPEN)
    # then the disagreement is closed, undecided, and the item collects v2 votes
    disagreement = Disagreement.objects.get(item=study["c0"])
    assert disagreement.closed_at is not None and disagreement.closed_by is None
    assert Item.objects.get(pk=study["c0"].pk).status == ItemStatus.OPEN


def test_a_form_loaded_under_v1_is_refused_after_v2_is_published(study):
    # given annotator 0 holds a lease on c0, its form loaded under v1
    assignment = claim(study, 0, study["c0"])
    publish(study)
    # when the form arrives, saying it was loaded under v1
    with pytest.raises(StaleVersion) as stale:
        annotation_submit(
            project=study["project"],
            assignment_id=assignment.pk,
            actor=study["ann"][0],
            data=labels(study["c0"], policy_version=1),
        )
    # then it is refused, naming the policy and both versions; nothing is stored
    assert stale.value.field == "policy_version"
    assert "policy v1" in str(stale.value) and "policy v2" in str(stale.value)
    assert "'study'" in str(stale.value)
    assert stale.value.data == {"policy_version": 1, "current_policy_version": 2}
    assert not Annotation.objects.filter(assignment=assignment).exists()
    # and the reloaded form (under v2) is accepted, recording v2
    saved = annotation_submit(
        project=study["project"],
        assignment_id=assignment.pk,
        actor=study["ann"][0],
        data=labels(study["c0"], policy_version=2),
    )
    assert saved.current.policy.version == 2


def test_a_retired_assignment_cannot_be_revised(study):
    # given annotator 0's vote on c1 under v1, retired by the restart
    annotation = vote(study, 0, study["c1"])
    publish(study)
    # when they submit on the retired assignment
    with pytest.raises(InvalidTransition, match="returned this item for labelling"):
        annotation_submit(
            project=study["project"],
            assignment_id=annotation.assignment_id,
            actor=study["ann"][0],
            data=labels(study["c1"], answer="admissible"),
        )
    # then the v1 revision is still the only one
    assert AnnotationRevision.objects.filter(annotation=annotation).count() == 1


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_only_managers_publish(study, member, role):
    with pytest.raises(PermissionDenied):
        publish(study, actor=member(role))
    assert LabelPolicy.objects.filter(project=study["project"]).count() == 1


def test_a_non_member_is_not_told_the_project_exists(study):
    with pytest.raises((NotFound, PermissionDenied)):
        publish(study, actor=UserFactory())
    assert LabelPolicy.objects.filter(project=study["project"]).count() == 1


@pytest.mark.parametrize("note", ["", "   ", None])
def test_a_change_note_is_required(study, note):
    with pytest.raises(InvalidInput) as refused:
        publish(study, note=note)
    assert refused.value.field == "note"
    assert LabelPolicy.objects.filter(project=study["project"]).count() == 1


def test_publishing_on_a_stale_version_or_without_a_change_is_refused(study):
    publish(study)
    with pytest.raises(StaleVersion) as stale:
        publish(study, content=description(study["project"], guideline="new text"))
    assert stale.value.data == {"based_on_version": 1, "current_policy_version": 2}
    with pytest.raises(InvalidInput, match="nothing to publish"):
        publish(study, based_on_version=2, content=description(study["project"]))


def test_publishing_before_labelling_starts_is_refused(project):
    manager = UserFactory()
    from labeling.services import membership_set

    membership_set(project=project, user=manager, role=Role.MANAGER)
    with pytest.raises(InvalidTransition, match="draft"):
        policy_version_publish(
            project=project,
            actor=manager,
            content=policy_description_data(project.policies.get()),
            note="n",
            based_on_version=1,
        )


def test_the_description_is_checked_by_the_policy_rules(study):
    # a label outside the schema, and a display text changed: both named, nothing written
    data = description(study["project"])
    data["claim_labels"] = [*data["claim_labels"], {"value": "maybe"}]
    with pytest.raises(InvalidInput) as refused:
        publish(study, content=data)
    assert refused.value.field == "claim_labels[4].value"
    assert LabelPolicy.objects.filter(project=study["project"]).count() == 1


def test_the_diff_names_changed_display_texts_and_evidence_rules(study):
    data = description(study["project"])
    data["claim_labels"] = [
        {**row, "text": "Backed by the source"} if row["value"] == "supported" else row
        for row in data["claim_labels"]
    ]
    data["claim_labels"] = [
        {**row, "requires_evidence": True} if row["value"] == "not_supported" else row
        for row in data["claim_labels"]
    ]
    preview = publish(study, content=data, dry_run=True)
    [change] = [c.as_json() for c in preview.diff]
    assert change["field"] == "claim_labels"
    assert (change["added"], change["removed"]) == ([], [])
    assert change["changed"] == ["supported", "not_supported"]
    # published, the new evidence rule applies to v2 labels
    policy = publish(study, content=data).policy
    assert "not_supported" in policy.evidence_labels
    assert policy.label_details["claim"]["supported"]["text"] == "Backed by the source"


def test_a_version_keeps_its_scale_and_the_diff_shows_a_scale_change(study):
    project = study["project"]
    data = description(project, claim_scale="ordinal")
    # when the manager previews, then publishes, v2 with ordinal claim labels
    preview = publish(study, content=data, dry_run=True)
    policy = publish(study, content=data).policy
    # then the diff is the scale alone, v2 has it and v1 keeps its own
    assert [c.as_json() for c in preview.diff] == [
        {
            "field": "claim_scale",
            "old": "nominal",
            "new": "ordinal",
            "added": [],
            "removed": [],
            "changed": [],
        }
    ]
    assert (policy.version, policy.answer_scale, policy.claim_scale) == (2, "nominal", "ordinal")
    assert project.policies.get(version=1).claim_scale == "nominal"
    # and the frozen v2 never changes its scale: a draft edit is refused
    with pytest.raises(InvalidTransition) as refused:
        policy_update(
            project=project,
            actor=study["manager"],
            description=description(project, claim_scale="nominal"),
        )
    assert refused.value.code == "policy_frozen"
    assert project.policies.get(version=2).claim_scale == "ordinal"


def test_policy_diff_lists_text_and_order_changes():
    old = {"guideline": "a", "claim_labels": ["x", "y"]}
    new = {"guideline": "b", "claim_labels": ["y", "x"]}
    changes = [c.as_json() for c in policy_diff(old, new)]
    assert [(c["field"], c["added"], c["removed"]) for c in changes] == [
        ("claim_labels", [], []),
        ("guideline", [], []),
    ]
    assert changes[1]["old"] == "a" and changes[1]["new"] == "b"


def test_an_adjudication_opened_under_v1_is_refused_as_stale(study):
    from labeling.services.adjudication import adjudication_mark_unresolved

    # given c0 in the disagreement queue, opened by an adjudicator under v1
    vote(study, 0, study["c0"], answer="admissible")
    vote(study, 1, study["c0"], answer="inadmissible")
    opened = Item.objects.get(pk=study["c0"].pk).version
    publish(study)  # keep
    # when the decision made on the v1 form arrives
    with pytest.raises(StaleVersion):
        adjudication_mark_unresolved(
            project=study["project"],
            item_id=study["c0"].pk,
            actor=study["manager"],
            expected_version=opened,
            reason="ambiguous_guideline",
        )
    # then decided again under v2, it records v2
    resolution = adjudication_mark_unresolved(
        project=study["project"],
        item_id=study["c0"].pk,
        actor=study["manager"],
        expected_version=Item.objects.get(pk=study["c0"].pk).version,
        reason="ambiguous_guideline",
    )
    assert resolution.policy.version == 2
