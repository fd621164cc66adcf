"""Exactly N annotations per item under concurrency: 16 threads, 200 items, N = 2, 3 annotators.

Threads act for three annotators (several threads per annotator: second tabs), claim and submit
through the real services, and now and then abandon a lease: its lease runs out (moved into the
past) and a beat thread releases it while the others keep working; the abandoning thread later
submits late, which is accepted while the lease still holds its slot and refused once the slot
was given back. At the end every item has exactly two annotations from two different people,
and the vote tally, folded by the beat thread all along, equals the full count of the votes.

PostgreSQL runs it with row locks (SKIP LOCKED); SQLite runs the same scenario, where writers are
serialised and the compare-and-set and constraints are the guard.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, F, Q

from certification.services import agreement_recompute, votes_sha256
from labeling.exceptions import Conflict, InvalidTransition, LeaseExpired
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    Role,
)
from labeling.selectors import project_votes
from labeling.services import (
    assignments_release_expired,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
    workload_import,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from labeling.services.vote_tally import vote_tally_fold
from tests.conftest import native_record
from tests.factories import UserFactory

THREADS = 16
QUESTIONS = 100  # two items each: 200 items
OVERLAP = 2
ABANDON_RATE = 0.08
DEADLINE_SECONDS = 240


def _import(project):
    import io

    from labeling.importers.native import read_jsonl
    from tests.conftest import jsonl_bytes

    data = jsonl_bytes(native_record(f"q{i:03d}") for i in range(QUESTIONS))
    workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="race.jsonl",
        file_sha256="a" * 64,
    )


def _submit(project, assignment_id, item_id, actor, n):
    # Annotators 0 and 2 agree, 1 disagrees with both: a mix of consensus and disagreement.
    # The content depends only on (annotator, item), so a repeat by another tab is idempotent.
    claims = tuple(
        ClaimInput(claim_id=pk, label="not_supported")
        for pk in Claim.objects.filter(candidate__item=item_id).values_list("pk", flat=True)
    )
    label = ("admissible", "inadmissible")[(n % 2 + item_id) % 2]
    return annotation_submit(
        project=project,
        assignment_id=assignment_id,
        actor=actor,
        data=AnnotationInput(answer_label=label, claims=claims),
    )


def _run_scenario():
    # given 200 items, overlap 2, 1-minute leases and three annotators
    manager = UserFactory()
    project = project_create(slug="race", name="Race", manager=manager)
    _import(project)
    project_labelling_configure(project=project, actor=manager, overlap=OVERLAP, lease_minutes=1)
    project_labelling_start(project=project, actor=manager)
    annotators = [UserFactory() for _ in range(3)]
    for a in annotators:
        membership_set(project=project, user=a, role=Role.ANNOTATOR)
    assert Item.objects.filter(project=project).count() == 2 * QUESTIONS

    stats: Counter[str] = Counter()
    stats_lock = threading.Lock()

    def count(key: str, n: int = 1) -> None:
        with stats_lock:
            stats[key] += n

    failures: list[BaseException] = []
    stop = threading.Event()
    barrier = threading.Barrier(THREADS + 1)
    deadline = time.monotonic() + DEADLINE_SECONDS

    def beat() -> None:
        # the Celery beat task, run far more often than every minute, and the agreement
        # recomputation's fold of the vote tally while the votes change
        try:
            barrier.wait()
            while not stop.is_set():
                count("released", assignments_release_expired())
                vote_tally_fold(project=project)
                count("folds")
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    def late_submit(project, pending, actor, n) -> None:
        assignment_id, item_id = pending.pop()
        try:
            _submit(project, assignment_id, item_id, actor, n)
            count("late_accepted")
        except LeaseExpired:
            count("late_refused")
        except InvalidTransition:
            count("late_after_resolution")

    def work(t: int) -> None:
        n = t % len(annotators)
        actor = annotators[n]
        rng = random.Random(t)
        pending: list[tuple[int, int]] = []  # abandoned leases, submitted late
        try:
            barrier.wait()
            while time.monotonic() < deadline:
                if pending and rng.random() < 0.3:
                    late_submit(project, pending, actor, n)
                try:
                    assignment = item_claim_next(project=project, actor=actor)
                except Conflict:
                    count("claim_conflict")
                    continue
                if assignment is None:
                    if not Item.objects.filter(project=project, status=ItemStatus.OPEN).exists():
                        break
                    time.sleep(0.005)
                    continue
                count("claims")
                if rng.random() < ABANDON_RATE:
                    # the annotator walks away: the lease runs out (moved an hour into the past)
                    Assignment.objects.filter(
                        pk=assignment.pk, status=AssignmentStatus.LEASED
                    ).update(
                        leased_at=F("leased_at") - timedelta(hours=2),
                        lease_expires_at=F("leased_at") - timedelta(hours=1),
                    )
                    pending.append((assignment.pk, assignment.item_id))
                    count("abandoned")
                    if rng.random() < 0.5:
                        # a beat tick right then: the slot is free for anyone at once
                        count("released", assignments_release_expired())
                    continue
                try:
                    _submit(project, assignment.pk, assignment.item_id, actor, n)
                    count("submitted")
                except LeaseExpired:
                    count("submit_refused")
                except InvalidTransition:
                    count("submit_after_resolution")
            else:
                raise TimeoutError(f"thread {t} still had work after {DEADLINE_SECONDS} s")
            while pending:
                late_submit(project, pending, actor, n)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    # when 16 threads claim and submit until no work is left, with a beat thread releasing
    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    beat_thread = threading.Thread(target=beat)
    for thread in [*threads, beat_thread]:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    beat_thread.join()

    # then nothing failed, and every item has exactly two annotations by two different people
    assert failures == [], failures
    annotations = {
        row["item"]: (row["n"], row["people"])
        for row in Annotation.objects.filter(item__project=project)
        .values("item")
        .annotate(n=Count("pk"), people=Count("annotator", distinct=True))
    }
    live = {
        row["item"]: (row["submitted"], row["live"])
        for row in Assignment.objects.filter(item__project=project)
        .values("item")
        .annotate(
            submitted=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
            live=Count(
                "pk", filter=Q(status__in=[AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED])
            ),
        )
    }
    items = list(Item.objects.filter(project=project).values_list("pk", "status", "assigned_count"))
    assert len(items) == 2 * QUESTIONS
    wrong = [
        (pk, status, annotations.get(pk), live.get(pk), assigned)
        for pk, status, assigned in items
        if status == ItemStatus.OPEN
        or annotations.get(pk) != (2, 2)
        or live.get(pk) != (2, 2)
        or assigned != 2
    ]
    assert wrong == []
    assert Annotation.objects.filter(item__project=project).count() == 2 * 2 * QUESTIONS
    assert not Assignment.objects.filter(status=AssignmentStatus.LEASED).exists()
    # and the scenario did exercise abandoned leases (released, re-given, submitted late)
    assert stats["abandoned"] > 0
    assert stats["released"] > 0
    # and the vote tally, folded while the votes changed, is the full count of the votes
    assert stats["folds"] > 0
    assert agreement_recompute(project_id=project.pk).input_sha256 == votes_sha256(
        project_votes(project=project)
    )
    statuses = Counter(Item.objects.filter(project=project).values_list("status", flat=True))
    assert set(statuses) <= {ItemStatus.RESOLVED, ItemStatus.DISAGREEMENT}
    print(dict(stats), dict(statuses))  # noqa: T201 - shown with -s


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    not connection.features.has_select_for_update_skip_locked,
    reason="needs row locks with SKIP LOCKED (PostgreSQL)",
)
def test_every_item_gets_exactly_two_annotations_with_row_locks():
    _run_scenario()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_every_item_gets_exactly_two_annotations_on_sqlite():
    _run_scenario()
