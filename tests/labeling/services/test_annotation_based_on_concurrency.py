"""Two sessions submit different labels made on the same revision at the same moment: one wins.

Each round, two threads (one annotator's two sessions, each with its own database connection)
wait at a barrier and submit different labels based on the current revision. The check runs in
the service under the item's row lock (PostgreSQL: the second waits, then sees the new
revision), so exactly one is saved and the other is refused with StaleVersion, every round.
SQLite runs the same scenario with its writers serialised. Two first submits that name no
revision (no If-Match) race the same way: each is taken as made on revision 0, so the second is
refused rather than replacing the first.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter

import pytest
from django.db import connection

from labeling.exceptions import StaleVersion
from labeling.models import Annotation, AnnotationRevision
from labeling.services import item_claim_next
from labeling.services.annotations import annotation_submit
from tests.factories import start_labelling, work_record
from tests.labeling.api.conftest import labels_input

ROUNDS = 12


def _round(project, assignment, annotator, number: int, based_on: int | None) -> Counter[str]:
    """Two sessions submit different labels made on ``based_on`` at once; count the outcomes."""
    barrier = threading.Barrier(2)
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def submit(session: int) -> None:
        data = dataclasses.replace(
            labels_input(assignment.item, answer=("admissible", "inadmissible")[session]),
            comment=f"round {number} session {session}",
            based_on_revision=based_on,
        )
        try:
            barrier.wait()
            annotation_submit(
                project=project, assignment_id=assignment.pk, actor=annotator, data=data
            )
            outcome = "saved"
        except StaleVersion:
            outcome = "refused"
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            outcome = f"failed: {exc!r}"
        finally:
            connection.close()
        with lock:
            seen[outcome] += 1

    threads = [threading.Thread(target=submit, args=(s,)) for s in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def _run(project, import_records, member):
    import_records([work_record()])
    start_labelling(project)
    annotator = member("annotator")
    assignment = item_claim_next(project=project, actor=annotator)
    assert assignment is not None
    outcomes = []
    for number in range(ROUNDS):
        current = Annotation.objects.filter(assignment=assignment).values_list(
            "revision_count", flat=True
        )
        outcomes.append(_round(project, assignment, annotator, number, current.first() or 0))

    assert outcomes == [Counter(saved=1, refused=1)] * ROUNDS
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.revision_count == ROUNDS
    numbers = list(
        AnnotationRevision.objects.filter(annotation=annotation)
        .order_by("number")
        .values_list("number", flat=True)
    )
    assert numbers == list(range(1, ROUNDS + 1))
    # each round's winner replaced the revision before it; the last round's is current
    assert annotation.current.comment.startswith(f"round {ROUNDS - 1} ")


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of PostgreSQL")
def test_two_sessions_on_one_revision_exactly_one_wins_with_row_locks(
    project, import_records, member
):
    _run(project, import_records, member)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_two_sessions_on_one_revision_exactly_one_wins_on_sqlite(project, import_records, member):
    _run(project, import_records, member)


def _run_first_submits(project, import_records, member):
    import_records([work_record(f"q{n}") for n in range(ROUNDS // 2)])
    start_labelling(project)
    annotator = member("annotator")
    outcomes = []
    for number in range(ROUNDS):
        assignment = item_claim_next(project=project, actor=annotator)
        assert assignment is not None
        outcomes.append(_round(project, assignment, annotator, number, None))
        annotation = Annotation.objects.get(assignment=assignment)
        assert annotation.revision_count == 1
    assert outcomes == [Counter(saved=1, refused=1)] * ROUNDS


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of PostgreSQL")
def test_two_first_submits_without_a_revision_exactly_one_wins_with_row_locks(
    project, import_records, member
):
    _run_first_submits(project, import_records, member)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_two_first_submits_without_a_revision_exactly_one_wins_on_sqlite(
    project, import_records, member
):
    _run_first_submits(project, import_records, member)
