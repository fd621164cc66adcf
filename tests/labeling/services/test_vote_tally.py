"""The vote tally kept vote by vote equals the full count, on random labelling histories.

Histories run through the real services: imports with prior votes, claims and submits,
revisions, skips, comparisons (consensus and disagreement), adjudications and unresolved marks.
After each history the folded tally's hash equals the hash of the votes counted in full
(``votes_sha256(project_votes(...))``), and the stored agreement figures equal those that
``agreement_summary`` (alpha by the ``krippendorff`` package) computes from the full vote
matrices. Runs on SQLite and, with ``DATABASE_URL`` set, on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certification.services import agreement_recompute, votes_sha256
from certification.stats.agreement import agreement_summary
from labeling.exceptions import InvalidInput, InvalidTransition
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    ItemVotes,
    Role,
    VoteTally,
    VoteTallyDelta,
)
from labeling.selectors import project_votes, vote_rows
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    annotation_submit,
    item_claim_next,
    membership_set,
)
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.services.skips import assignment_skip
from labeling.services.vote_tally import vote_tally_fold, vote_tally_invalidate
from labeling.tally import items_votes, votes_tally
from tests.conftest import import_native
from tests.factories import UserFactory, start_labelling, work_record

pytestmark = pytest.mark.django_db

ANSWERS = ("admissible", "inadmissible", "abstained")
CLAIMS = ("not_supported", "cannot_decide")


class _Rollback(Exception):
    """Ends an example: its writes are rolled back, the next example starts clean."""


def _record(n: int, priors: tuple[str, ...]) -> dict[str, Any]:
    record = work_record(f"q{n}")
    record["candidates"][1]["prior_annotations"] = [
        {"annotator": f"p{i}", "answer_label": label, "claim_labels": [{"claim": 0, "label": c}]}
        for i, (label, c) in enumerate((p, "not_supported") for p in priors)
    ]
    return record


def _labels(item_id: int, answer: str, claim: str) -> AnnotationInput:
    claims = tuple(
        ClaimInput(pk, claim)
        for pk in Claim.objects.filter(candidate__item__pk=item_id)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    return AnnotationInput(answer_label=answer, claims=claims)


WHO = st.integers(0, 2)
PRIORS = st.lists(st.sampled_from(ANSWERS), max_size=2).map(tuple)
STEP = st.one_of(
    st.tuples(
        st.just("submit"), st.integers(0, 2), st.sampled_from(ANSWERS), st.sampled_from(CLAIMS)
    ),
    st.tuples(
        st.just("revise"), st.integers(0, 2), st.sampled_from(ANSWERS), st.sampled_from(CLAIMS)
    ),
    st.tuples(st.just("skip"), st.integers(0, 2)),
    st.tuples(st.just("resolve"), st.sampled_from(ANSWERS)),
    st.tuples(st.just("unresolved")),
    st.tuples(st.just("import"), PRIORS),
    st.tuples(st.just("fold")),
)


def _run(project, people, step, counter) -> None:  # noqa: C901 - one branch per kind of step
    kind = step[0]
    annotators, manager = people
    try:
        if kind == "submit":
            _, who, answer, claim = step
            assignment = item_claim_next(project=project, actor=annotators[who])
            if assignment is not None:
                annotation_submit(
                    project=project,
                    assignment_id=assignment.pk,
                    actor=annotators[who],
                    data=_labels(assignment.item_id, answer, claim),
                )
        elif kind == "revise":
            _, who, answer, claim = step
            done = (
                Assignment.objects.filter(
                    item__project=project,
                    annotator=annotators[who],
                    status=AssignmentStatus.SUBMITTED,
                )
                .order_by("-pk")
                .first()
            )
            if done is not None:
                current = Annotation.objects.get(assignment=done).current
                annotation_submit(
                    project=project,
                    assignment_id=done.pk,
                    actor=annotators[who],
                    data=replace(
                        _labels(done.item_id, answer, claim),
                        based_on_revision=current.number if current is not None else 0,
                    ),
                )
        elif kind == "skip":
            assignment = item_claim_next(project=project, actor=annotators[step[1]])
            if assignment is not None:
                assignment_skip(
                    project=project,
                    assignment_id=assignment.pk,
                    actor=annotators[step[1]],
                    reason="other",
                )
        elif kind in ("resolve", "unresolved"):
            item = Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).first()
            if item is None:
                return
            if kind == "resolve":
                adjudication_resolve(
                    project=project,
                    item_id=item.pk,
                    actor=manager,
                    expected_version=item.version,
                    answer_label=step[1],
                    claims=_labels(item.pk, step[1], "not_supported").claims,
                    rationale="decided",
                )
            else:
                adjudication_mark_unresolved(
                    project=project,
                    item_id=item.pk,
                    actor=manager,
                    expected_version=item.version,
                    reason="ambiguous_guideline",
                    rationale="cannot tell",
                )
        elif kind == "import":
            counter[0] += 1
            import_native(project, [_record(100 + counter[0], step[1])])
        elif kind == "fold":
            vote_tally_fold(project=project)
    except (InvalidTransition, InvalidInput):
        pass  # a step the rules refuse (a closed item's revision): nothing was written


def _full_figures(project) -> dict[int, dict[str, Any]]:
    votes = project_votes(project=project)
    return {
        v.policy_version: {m.level: agreement_summary(m.ratings, m.raters) for m in v.levels()}
        for v in votes.versions
    }


def _check(project) -> None:
    # the folded tally is the full count (a project not counted yet is counted by the fold),
    # and the items' stored votes are their votes read again
    tally = vote_tally_fold(project=project)
    fresh = items_votes(vote_rows(project=project))
    assert dict(ItemVotes.objects.filter(project=project).values_list("item_id", "votes")) == fresh
    assert tally == votes_tally(v for votes in fresh.values() for v in votes).clean()
    assert not VoteTallyDelta.objects.filter(project=project).exists()
    report = agreement_recompute(project_id=project.pk)
    assert report.input_sha256 == votes_sha256(project_votes(project=project))
    # and the stored figures are those of the full vote matrices
    full = _full_figures(project)
    stored_versions = {v["policy_version"]: v for v in report.versions}
    assert sorted(stored_versions) == sorted(full)
    for version, levels in full.items():
        for level, summary in levels.items():
            figures = stored_versions[version][level]
            assert figures["n_votes"] == summary.n_ratings
            assert figures["n_units"] == summary.n_units
            assert figures["raters"] == list(summary.raters)
            assert figures["label_counts"] == {str(k): n for k, n in summary.category_counts}
            for name in ("alpha", "fleiss_kappa", "percent_agreement"):
                ours, theirs = figures[name], getattr(summary, name)
                assert ours["reason"] == theirs.reason
                if theirs.value is not None:
                    assert ours["value"] == pytest.approx(theirs.value, abs=1e-12)
            assert [
                (p["rater_a"], p["rater_b"], p["n"], p["kappa"], p["se"]) for p in figures["pairs"]
            ] == [
                (p.rater_a, p.rater_b, p.result.n, p.result.kappa, p.result.se)
                for p in summary.pairs
            ]


@pytest.fixture
def labelled(project, member):
    """Two items with prior votes, overlap 2, three annotators and an adjudicator."""
    import_native(project, [_record(1, ("admissible",)), _record(2, ("inadmissible", "abstained"))])
    start_labelling(project, overlap=2)
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    annotators = [member(Role.ANNOTATOR) for _ in range(3)]
    return project, (annotators, manager)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(STEP, min_size=1, max_size=14))
def test_incremental_tally_equals_the_full_count(labelled, history):
    project, people = labelled
    try:
        with transaction.atomic():
            counter = [0]
            for step in history:
                _run(project, people, step, counter)
                _check(project)  # after every step: a later vote on the item must not hide it
            raise _Rollback
    except _Rollback:
        pass


def test_a_vote_writes_one_delta_and_the_fold_reads_only_the_deltas(
    labelled, django_assert_max_num_queries
):
    project, (annotators, _manager) = labelled
    vote_tally_fold(project=project)
    assignment = item_claim_next(project=project, actor=annotators[0])
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=annotators[0],
        data=_labels(assignment.item_id, "admissible", "not_supported"),
    )
    assert VoteTallyDelta.objects.filter(project=project).count() == 1
    # the fold: the tally row, the deltas, the write, the delete; whatever the project's size
    with django_assert_max_num_queries(8):
        vote_tally_fold(project=project)
    assert not VoteTallyDelta.objects.filter(project=project).exists()
    _check(project)


def test_an_invalidated_tally_is_counted_again_from_scratch(labelled):
    project, _people = labelled
    vote_tally_fold(project=project)
    VoteTally.objects.filter(project=project).update(counts=[])  # a wrong tally
    vote_tally_invalidate(project=project)
    _check(project)


def test_a_managers_recompute_counts_every_vote_again(labelled, django_capture_on_commit_callbacks):
    from certification.services.derived import derived_recompute_request

    project, (_annotators, manager) = labelled
    vote_tally_fold(project=project)
    VoteTally.objects.filter(project=project).update(counts=[])  # a wrong tally
    with django_capture_on_commit_callbacks(execute=True):
        derived_recompute_request(project=project, kind="agreement", actor=manager)
    assert VoteTally.objects.get(project=project).counts != []
    report = agreement_recompute(project_id=project.pk)
    assert report.input_sha256 == votes_sha256(project_votes(project=project))


def test_a_tally_dropped_while_a_fold_starts_is_counted_again(labelled, monkeypatch):
    # a manager's "Recompute now" commits between the fold's first read and its lock
    from labeling.services import vote_tally as module

    project, _people = labelled
    vote_tally_fold(project=project)
    real = module.default_vote_version

    def then_dropped(given):
        version = real(given)
        vote_tally_invalidate(project=given)
        return version

    monkeypatch.setattr(module, "default_vote_version", then_dropped)
    tally = vote_tally_fold(project=project)
    monkeypatch.undo()
    assert tally and VoteTally.objects.filter(project=project).exists()
    _check(project)


def test_votes_before_the_first_count_are_counted_by_it(project, member):
    # no tally yet: a vote writes nothing of it; the first fold counts every item
    import_native(project, [_record(1, ("admissible",))])
    start_labelling(project, overlap=3)
    annotator = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=project, actor=annotator)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=annotator,
        data=_labels(assignment.item_id, "admissible", "not_supported"),
    )
    assert not ItemVotes.objects.filter(project=project).exists()
    assert not VoteTallyDelta.objects.filter(project=project).exists()
    _check(project)
