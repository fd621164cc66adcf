"""Exactly N with the next item reserved ahead, under concurrency: 8 threads, 60 items, N = 2.

Three annotators work in several tabs each (threads): every tab takes "next item", asks for the
reserve ahead of it (item_claim_ahead) as the workbench does, and submits; now and then a tab
of one annotator is closed with its reserve, whose lease runs out (moved into the past) while a
beat thread releases leases. Throughout, no annotator ever holds more than two valid leases
(the current item and one reserve); at the end every item has exactly two annotations by two
different people and nothing is leased.

PostgreSQL runs it with row locks (SKIP LOCKED); SQLite runs the same scenario, where writers
are serialised and the compare-and-set and constraints are the guard.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, F
from django.utils import timezone

from labeling.exceptions import Conflict, InvalidTransition, LeaseExpired
from labeling.models import Annotation, Assignment, AssignmentStatus, Item, ItemStatus, Role
from labeling.services import (
    assignments_release_expired,
    item_claim_ahead,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
)
from tests.conftest import import_native, native_record
from tests.factories import UserFactory
from tests.labeling.services.test_item_claim_next_concurrency import _submit

THREADS = 8
QUESTIONS = 30  # two items each: 60 items
OVERLAP = 2
CLOSE_RATE = 0.1
DEADLINE_SECONDS = 240


def _valid_leases(actor) -> int:
    return Assignment.objects.filter(
        annotator=actor, status=AssignmentStatus.LEASED, lease_expires_at__gt=timezone.now()
    ).count()


def _run_scenario():
    # given 60 items, overlap 2, 1-minute leases and three annotators, the first of whom closes
    # a tab with its reserve now and then (the others take the abandoned items)
    manager = UserFactory()
    project = project_create(slug="ahead", name="Ahead", manager=manager)
    import_native(project, [native_record(f"q{i:03d}") for i in range(QUESTIONS)])
    project_labelling_configure(project=project, actor=manager, overlap=OVERLAP, lease_minutes=1)
    project_labelling_start(project=project, actor=manager)
    labelled = list(Item.objects.filter(project=project).values_list("pk", flat=True))
    assert len(labelled) == 2 * QUESTIONS
    annotators = [UserFactory() for _ in range(3)]
    for a in annotators:
        membership_set(project=project, user=a, role=Role.ANNOTATOR)

    stats: Counter[str] = Counter()
    stats_lock = threading.Lock()
    most_leases: Counter[int] = Counter()

    def count(key: str, n: int = 1) -> None:
        with stats_lock:
            stats[key] += n

    failures: list[BaseException] = []
    stop = threading.Event()
    barrier = threading.Barrier(THREADS + 1)
    deadline = time.monotonic() + DEADLINE_SECONDS

    def beat() -> None:
        try:
            barrier.wait()
            while not stop.is_set():
                count("released", assignments_release_expired())
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    def work(t: int) -> None:
        n = t % len(annotators)
        actor = annotators[n]
        rng = random.Random(t)
        try:
            barrier.wait()
            while time.monotonic() < deadline:
                try:
                    current = item_claim_next(project=project, actor=actor)
                except Conflict:
                    count("claim_conflict")
                    continue
                if current is None:
                    if not Item.objects.filter(pk__in=labelled, status=ItemStatus.OPEN).exists():
                        break
                    time.sleep(0.005)
                    continue
                count("claims")
                try:
                    reserve = item_claim_ahead(
                        project=project, actor=actor, assignment_id=current.pk
                    )
                except InvalidTransition:
                    # another tab submitted it meanwhile, or its lease ran out and was released
                    count("ahead_refused")
                    reserve = None
                except Conflict:
                    count("claim_conflict")
                    reserve = None
                held = _valid_leases(actor)
                with stats_lock:
                    most_leases[actor.pk] = max(most_leases[actor.pk], held)
                if reserve is not None:
                    count("reserves")
                    if n == 0 and rng.random() < CLOSE_RATE:
                        # the tab is closed: its reserve's lease runs out, the beat releases it
                        Assignment.objects.filter(
                            pk=reserve.pk, status=AssignmentStatus.LEASED
                        ).update(
                            leased_at=F("leased_at") - timedelta(hours=2),
                            lease_expires_at=F("leased_at") - timedelta(hours=1),
                        )
                        count("closed")
                try:
                    _submit(project, current.pk, current.item_id, actor, n)
                    count("submitted")
                except LeaseExpired:
                    count("submit_refused")
                except InvalidTransition:
                    count("submit_after_resolution")
            else:
                raise TimeoutError(f"thread {t} still had work after {DEADLINE_SECONDS} s")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    beat_thread = threading.Thread(target=beat)
    for thread in [*threads, beat_thread]:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    beat_thread.join()

    # then nothing failed; nobody ever held more than the current item and one reserve
    assert failures == [], failures
    assert max(most_leases.values()) <= 2, dict(most_leases)
    # and every item has exactly two annotations by two different people; nothing is leased
    per_item = dict(
        Annotation.objects.filter(item_id__in=labelled)
        .values("item")
        .annotate(n=Count("pk"), people=Count("annotator", distinct=True))
        .values_list("item", "people")
    )
    assert per_item == {pk: 2 for pk in labelled}
    assert Annotation.objects.filter(item__project=project).count() == OVERLAP * len(labelled)
    wrong = list(
        Item.objects.filter(pk__in=labelled)
        .exclude(assigned_count=OVERLAP)
        .values_list("pk", "status", "assigned_count")
    )
    assert wrong == []
    assert not Assignment.objects.filter(status=AssignmentStatus.LEASED).exists()
    assert stats["reserves"] > 0 and stats["closed"] > 0
    print(dict(stats), dict(most_leases))  # noqa: T201 - shown with -s


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    not connection.features.has_select_for_update_skip_locked,
    reason="needs row locks with SKIP LOCKED (PostgreSQL)",
)
def test_reserves_keep_exactly_two_annotations_per_item_with_row_locks():
    _run_scenario()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_reserves_keep_exactly_two_annotations_per_item_on_sqlite():
    _run_scenario()
