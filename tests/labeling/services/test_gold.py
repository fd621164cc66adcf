"""Gold items: references, serving gold work, never a vote, and qualification."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from scipy.stats import binom

from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Claim,
    Disagreement,
    GoldReference,
    Item,
    ItemStatus,
    LabelPolicy,
    Qualification,
    QualificationStatus,
    Resolution,
)
from labeling.selectors import project_votes
from labeling.selectors.gold import project_gold
from labeling.selectors.pages import own_queue
from labeling.selectors.review import labelling_form_view
from labeling.services import (
    assignment_skip,
    assignment_skip_undo,
    assignments_release_expired,
    item_claim_next,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.gold import GoldReferenceInput, gold_reference_set, qualification_decide
from labeling.services.gold_serving import gold_draw
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.conftest import native_record


def claims_of(item_id):
    return list(
        Claim.objects.filter(candidate__item=item_id).order_by("index").values_list("pk", flat=True)
    )


def reference(item_id, answer="admissible", claim="not_supported"):
    return GoldReferenceInput(
        answer_label=answer,
        claims=tuple(ClaimInput(claim_id=c, label=claim) for c in claims_of(item_id)),
        rationale="checked by the lead",
    )


def submit(project, assignment, actor, answer="admissible", claim="not_supported"):
    """Submit ``answer`` and ``claim`` for every claim (``unavailable``: not found)."""
    label, reason = (
        ("evidence_unavailable", "not_found") if claim == "unavailable" else (claim, None)
    )
    return annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=actor,
        data=AnnotationInput(
            answer_label=answer,
            claims=tuple(
                ClaimInput(claim_id=c, label=label, reason=reason)
                for c in claims_of(assignment.item_id)
            ),
        ),
    )


def set_rule(project, **fields):
    LabelPolicy.objects.filter(project=project).update(**fields)


@pytest.fixture
def world(project, member, import_records):
    """``n`` questions (2 items each); ``gold`` of the items (in queue order) become gold."""

    def build(n=3, gold=1, started=True, **rule):
        import_records([native_record(f"q{i}") for i in range(1, n + 1)])
        manager = member("manager")
        items = list(Item.objects.order_by("pk").values_list("pk", flat=True))
        gold_ids = items[:gold]
        for item_id in gold_ids:
            gold_reference_set(
                project=project, item_id=item_id, actor=manager, data=reference(item_id)
            )
        if rule:
            set_rule(project, **rule)
        if started:
            project_labelling_start(project=project, actor=manager)
            project.refresh_from_db()
        return manager, gold_ids, [i for i in items if i not in gold_ids]

    return build


# -- references ---------------------------------------------------------------------------------


def test_a_reference_makes_the_item_gold_and_a_repeat_writes_nothing(project, world):
    manager, (gold,), _ = world(gold=1)

    again = gold_reference_set(project=project, item_id=gold, actor=manager, data=reference(gold))

    assert Item.objects.get(pk=gold).status == ItemStatus.GOLD
    assert again.number == 1
    assert GoldReference.objects.filter(item_id=gold).count() == 1


def test_a_changed_reference_is_a_new_revision(project, world):
    manager, (gold,), _ = world(gold=1)

    new = gold_reference_set(
        project=project, item_id=gold, actor=manager, data=reference(gold, answer="inadmissible")
    )

    assert (new.number, new.supersedes.number, new.answer_label) == (2, 1, "inadmissible")
    assert project_gold(project=project)[0].reference.answer == "inadmissible"


def test_a_reference_is_checked_like_an_annotation(project, world):
    manager, (gold,), _ = world(gold=1)
    bad = GoldReferenceInput(
        answer_label="cannot_decide",
        claims=(ClaimInput(claim_id=claims_of(gold)[0], label="supported"),),
    )

    with pytest.raises(InvalidInput) as refused:
        gold_reference_set(project=project, item_id=gold, actor=manager, data=bad)

    fields = {e["field"] for e in refused.value.data["errors"]}
    assert "answer_label" in fields  # cannot_decide is no reference
    assert "claims[0].evidence" in fields  # supported cites evidence
    assert "claims" in fields  # the second claim has no label


def test_an_item_with_votes_cannot_become_gold(project, world, member):
    manager, _, regular = world(gold=0)
    annotator = member("annotator")
    taken = item_claim_next(project=project, actor=annotator)

    with pytest.raises(InvalidTransition, match="given to an annotator"):
        gold_reference_set(
            project=project, item_id=taken.item_id, actor=manager, data=reference(taken.item_id)
        )


@pytest.mark.parametrize("role", ["annotator", "adjudicator"])
def test_only_a_manager_sets_references(project, world, member, role):
    _, (gold,), _ = world(gold=1)

    with pytest.raises(PermissionDenied):
        gold_reference_set(project=project, item_id=gold, actor=member(role), data=reference(gold))


def test_an_item_of_another_project_is_not_found(project, world, member):
    manager, _, _ = world(gold=0)

    with pytest.raises(NotFound):
        gold_reference_set(project=project, item_id=10**9, actor=manager, data=reference(1))


# -- serving --------------------------------------------------------------------------------------


def test_gold_is_never_served_at_rate_zero_without_qualification(project, world, member):
    _, gold_ids, regular = world(gold=2)
    annotator = member("annotator")
    served = []
    while (a := item_claim_next(project=project, actor=annotator)) is not None:
        served.append(a.item_id)
        submit(project, a, annotator)

    assert sorted(served) == sorted(regular)


def test_gold_is_served_once_per_person_and_never_alone(project, world, member):
    # Given every claim serves gold first while some is left
    _, gold_ids, regular = world(n=3, gold=2, gold_rate=1.0)
    annotator = member("annotator")

    served = []
    while (a := item_claim_next(project=project, actor=annotator)) is not None:
        served.append((a.item_id, a.gold))
        submit(project, a, annotator)

    # Then each gold item came once, before the regular work, and every regular item came
    assert served[:2] == [
        (g, True) for g in sorted(gold_ids, key=lambda g: served.index((g, True)))
    ]
    assert sorted(i for i, _ in served) == sorted(gold_ids + regular)
    assert len(served) == len(set(served))


def test_gold_is_not_served_once_regular_work_is_gone(project, world, member):
    _, gold_ids, regular = world(n=1, gold=1, gold_rate=1.0)
    first, second = member("annotator"), member("annotator")
    for annotator in (first, second):  # overlap 2: both label the one regular item
        a = item_claim_next(project=project, actor=annotator)
        if a.gold:
            submit(project, a, annotator)
            a = item_claim_next(project=project, actor=annotator)
        submit(project, a, annotator)
    third = member("annotator")

    assert item_claim_next(project=project, actor=third) is None


def test_the_rate_is_respected_under_a_seeded_run(project, world, member):
    # Given a gold rate of 0.25, many gold items and a fixed key
    _, gold_ids, regular = world(n=60, gold=60, gold_rate=0.25)
    project.__class__.objects.filter(pk=project.pk).update(pseudonym_key="ab" * 32)
    project.refresh_from_db()
    annotator = member("annotator")

    gold = total = 0
    while (a := item_claim_next(project=project, actor=annotator)) is not None:
        total += 1
        gold += a.gold
        submit(project, a, annotator)

    # Then every regular item was served, and the gold share is within the binomial 99.9% band
    regular_served = total - gold
    assert regular_served == len(regular)
    # Gold was drawn with probability 0.25 on every claim while regular work was left: among
    # the claims up to the last regular one, the gold count is Binomial(claims, 0.25).
    low, high = binom.ppf([0.0005, 0.9995], total, 0.25)
    assert low <= gold <= high
    # And the draws are the documented HMAC: recomputing them gives the same count
    expected = sum(
        gold_draw(project=project, user_id=annotator.pk, n=k) < 0.25 for k in range(total)
    )
    assert gold == expected


def test_gold_form_looks_like_any_other(project, world, member):
    _, (gold,), regular = world(n=1, gold=1, gold_rate=1.0)
    annotator = member("annotator")
    g = item_claim_next(project=project, actor=annotator)
    assert g.gold
    gold_form = labelling_form_view(project=project, assignment=g)
    queue_before = own_queue(project=project, actor=annotator)
    submit(project, g, annotator)
    queue_after = own_queue(project=project, actor=annotator)
    r = item_claim_next(project=project, actor=annotator)
    regular_form = labelling_form_view(project=project, assignment=r)

    assert set(vars(gold_form)) == set(vars(regular_form))
    assert gold_form.editable and regular_form.editable
    # Being given and submitting a gold item moves the counts as a regular item does
    assert (queue_before.left - queue_after.left, queue_after.done - queue_before.done) == (1, 1)


def test_gold_labels_are_never_votes(project, world, member):
    # Given two annotators who each label the gold item (differently) and one regular item
    _, (gold,), regular = world(n=1, gold=1, gold_rate=1.0)
    labels = iter(["admissible", "inadmissible"])
    for _ in range(2):
        annotator = member("annotator")
        a = item_claim_next(project=project, actor=annotator)
        assert a.gold
        submit(project, a, annotator, answer=next(labels))

    # Then nothing was compared, no disagreement opened, no resolution written
    assert Item.objects.get(pk=gold).status == ItemStatus.GOLD
    assert Disagreement.objects.count() == 0
    assert Resolution.objects.count() == 0
    # And the vote matrices hold no gold label
    votes = project_votes(project=project)
    assert votes.answer.n_votes == 0
    assert gold not in votes.answer.units
    # While the gold selector holds both
    (data,) = project_gold(project=project)
    assert [x.labels.answer for x in data.annotations] == ["admissible", "inadmissible"]


def test_gold_leases_expire_and_skip_without_touching_slots(project, world, member):
    _, (gold,), _ = world(n=1, gold=1, gold_rate=1.0)
    annotator = member("annotator")
    a = item_claim_next(project=project, actor=annotator)
    assert a.gold
    Assignment.objects.filter(pk=a.pk).update(
        leased_at=timezone.now() - timedelta(hours=2),
        lease_expires_at=timezone.now() - timedelta(hours=1),
    )

    assert assignments_release_expired() == 1
    assert Item.objects.get(pk=gold).assigned_count == 0
    # A lease that ran out may come back (as a regular item's does), in the same row
    again = item_claim_next(project=project, actor=annotator)
    assert again.pk == a.pk and again.status == AssignmentStatus.LEASED
    skipped = assignment_skip(project=project, assignment_id=a.pk, actor=annotator, reason="other")
    assert skipped.status == AssignmentStatus.SKIPPED
    undone = assignment_skip_undo(project=project, assignment_id=a.pk, actor=annotator)
    assert undone.status == AssignmentStatus.LEASED
    assignment_skip(project=project, assignment_id=a.pk, actor=annotator, reason="other")
    # A skipped gold item is never served to them again
    nxt = item_claim_next(project=project, actor=annotator)
    assert nxt.item_id != gold
    assert Item.objects.get(pk=gold).assigned_count == 0


# -- qualification --------------------------------------------------------------------------------


def qualify_rule(k=2, threshold=0.75, rate=0.0):
    return {
        "qualification_required": True,
        "qualification_items": k,
        "qualification_threshold": threshold,
        "gold_rate": rate,
    }


def test_a_new_annotator_labels_k_gold_items_then_passes(project, world, member):
    _, gold_ids, regular = world(n=3, gold=3, **qualify_rule(k=2))
    annotator = member("annotator")

    first = item_claim_next(project=project, actor=annotator)
    submit(project, first, annotator)
    second = item_claim_next(project=project, actor=annotator)
    submit(project, second, annotator)
    third = item_claim_next(project=project, actor=annotator)

    assert first.gold and second.gold and not third.gold
    q = Qualification.objects.get(annotator=annotator)
    # Two gold items, each 1 answer + its claims (2 claims for c0, 0 for c1), all equal
    compared = sum(1 + len(claims_of(a.item_id)) for a in (first, second))
    assert (q.status, q.items, q.agreed, q.compared) == ("passed", 2, compared, compared)


def test_below_the_threshold_nothing_is_served_until_a_manager_decides(project, world, member):
    manager, gold_ids, regular = world(n=3, gold=3, **qualify_rule(k=2, threshold=0.75))
    annotator = member("annotator")
    for _ in range(2):
        a = item_claim_next(project=project, actor=annotator)
        submit(project, a, annotator, answer="inadmissible", claim="unavailable")

    assert item_claim_next(project=project, actor=annotator) is None
    q = Qualification.objects.get(annotator=annotator)
    assert q.status == QualificationStatus.FAILED
    assert q.agreed / q.compared < 0.75

    qualification_decide(project=project, annotator_id=annotator.pk, actor=manager, admit=True)
    nxt = item_claim_next(project=project, actor=annotator)
    assert nxt is not None and not nxt.gold


def test_a_refused_annotator_gets_nothing(project, world, member):
    manager, _, _ = world(n=2, gold=2, **qualify_rule(k=1))
    annotator = member("annotator")
    qualification_decide(project=project, annotator_id=annotator.pk, actor=manager, admit=False)

    assert item_claim_next(project=project, actor=annotator) is None
    assert Qualification.objects.get(annotator=annotator).status == QualificationStatus.REFUSED


def test_too_few_gold_items_leaves_the_decision_to_a_manager(project, world, member):
    _, _, _ = world(n=2, gold=1, **qualify_rule(k=3))
    annotator = member("annotator")
    a = item_claim_next(project=project, actor=annotator)
    submit(project, a, annotator)

    assert item_claim_next(project=project, actor=annotator) is None
    q = Qualification.objects.get(annotator=annotator)
    assert (q.status, q.items) == (QualificationStatus.FAILED, 1)


def test_agreement_counts_answer_and_claims_separately(project, world, member):
    # Given one gold item (q1/c0, two claims) whose reference says not_supported for both
    _, (gold,), _ = world(n=2, gold=1, **qualify_rule(k=1, threshold=0.3))
    assert len(claims_of(gold)) == 2
    annotator = member("annotator")
    a = item_claim_next(project=project, actor=annotator)
    # When the annotator agrees on the answer only
    submit(project, a, annotator, answer="admissible", claim="unavailable")
    nxt = item_claim_next(project=project, actor=annotator)

    # Then 1 of 3 labels agree, 1/3 >= 0.3: passed, and regular work follows
    q = Qualification.objects.get(annotator=annotator)
    assert (q.agreed, q.compared, q.status) == (1, 3, QualificationStatus.PASSED)
    assert a.item_id == gold and not nxt.gold
    assert Annotation.objects.filter(assignment__gold=True).count() == 1


def test_a_gold_item_is_never_adjudicated(project, world, member):
    from labeling.selectors.adjudication import adjudication_view
    from labeling.services import adjudication_resolve

    _, (gold,), _ = world(n=1, gold=1, gold_rate=1.0)
    annotator = member("annotator")
    submit(project, item_claim_next(project=project, actor=annotator), annotator)
    adjudicator = member("adjudicator")
    item = Item.objects.get(pk=gold)

    with pytest.raises(NotFound):
        adjudication_view(project=project, item_id=gold, actor=adjudicator)
    with pytest.raises(InvalidTransition, match="gold item"):
        adjudication_resolve(
            project=project,
            item_id=gold,
            actor=adjudicator,
            expected_version=item.version,
            answer_label="admissible",
            claims=tuple(ClaimInput(claim_id=c, label="not_supported") for c in claims_of(gold)),
            rationale="no",
        )
    assert not Resolution.objects.exists()


def test_a_new_policy_version_carries_a_changed_gold_rule(project, world):
    from labeling.selectors.policies import policy_description_data
    from labeling.services.policy_versions import policy_version_publish

    manager, _, _ = world(n=1, gold=1)
    current = LabelPolicy.objects.get(project=project)
    content = {**policy_description_data(current), "gold_rate": 0.1, "qualification_required": True}

    publication = policy_version_publish(
        project=project,
        actor=manager,
        based_on_version=current.version,
        note="check annotators on gold items",
        content=content,
    )

    assert [c.field for c in publication.diff] == ["gold_rate", "qualification_required"]
    new = publication.policy
    assert (new.version, new.gold_rate, new.qualification_required) == (2, 0.1, True)
    assert (current.gold_rate, current.qualification_required) == (0.0, False)
