"""Qualification under concurrency: regular work is never served before an annotator qualifies.

Four annotators, three threads each (browser tabs), claim and submit through the real services
while a manager thread decides on those who fail. Two annotators label like the references
(they pass), two never do (they fail); the manager admits one of the failed and refuses the
other as soon as each fails. Meanwhile gold is served at rate 0.3 to the qualified.

Then: every regular lease of an annotator is no earlier than the qualification (or the
manager's admission) it rests on; the refused annotator got no regular work; each qualification
was recorded once, over exactly k gold items; no one was given a gold item twice; and no gold
item was compared, resolved or counted as a vote.

PostgreSQL runs it with row locks; SQLite runs the same scenario with its serialised writers.
"""

from __future__ import annotations

import io
import threading
import time

import pytest
from django.db import connection
from django.db.models import Count

from labeling.exceptions import Conflict, InvalidTransition, LeaseExpired
from labeling.importers.native import read_jsonl
from labeling.models import (
    Assignment,
    AssignmentStatus,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    Qualification,
    QualificationStatus,
    Resolution,
    Role,
)
from labeling.selectors import project_votes
from labeling.services import (
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
    workload_import,
)
from labeling.services.annotations import annotation_submit
from labeling.services.gold import GoldReferenceInput, gold_reference_set, qualification_decide
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.conftest import jsonl_bytes, native_record
from tests.factories import UserFactory

K = 3
GOLD_QUESTIONS = 8  # two gold items each: 16
REGULAR_QUESTIONS = 15  # 30 regular items
TABS = 3
DEADLINE_SECONDS = 180


def _claims(item_id):
    return list(Claim.objects.filter(candidate__item=item_id).values_list("pk", flat=True))


def _labels(item_id, good):
    return AnnotationInput(
        answer_label="admissible" if good else "inadmissible",
        claims=tuple(
            ClaimInput(
                claim_id=c,
                label="not_supported" if good else "evidence_unavailable",
                reason=None if good else "blocked",
            )
            for c in _claims(item_id)
        ),
    )


def _world():
    manager = UserFactory()
    project = project_create(slug="gold-race", name="Gold race", manager=manager)
    records = [native_record(f"g{i:02d}") for i in range(GOLD_QUESTIONS)]
    records += [native_record(f"r{i:02d}") for i in range(REGULAR_QUESTIONS)]
    data = jsonl_bytes(records)
    workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="race.jsonl",
        file_sha256="b" * 64,
    )
    for item in Item.objects.filter(
        project=project, candidate__question__external_id__startswith="g"
    ):
        gold_reference_set(
            project=project,
            item_id=item.pk,
            actor=manager,
            data=GoldReferenceInput(
                answer_label="admissible",
                claims=tuple(
                    ClaimInput(claim_id=c, label="not_supported") for c in _claims(item.pk)
                ),
            ),
        )
    LabelPolicy.objects.filter(project=project).update(
        gold_rate=0.3,
        qualification_required=True,
        qualification_items=K,
        qualification_threshold=0.75,
    )
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    annotators = {name: UserFactory(username=name) for name in ("good1", "good2", "bad1", "bad2")}
    for user in annotators.values():
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
    return project, manager, annotators


def _run_scenario():
    project, manager, annotators = _world()
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(annotators) * TABS + 1)
    deadline = time.monotonic() + DEADLINE_SECONDS
    done = threading.Event()

    def work(name: str) -> None:
        actor = annotators[name]
        good = name.startswith("good")
        idle = 0
        try:
            barrier.wait()
            while time.monotonic() < deadline:
                try:
                    assignment = item_claim_next(project=project, actor=actor)
                except Conflict:
                    continue
                if assignment is None:
                    idle += 1
                    # nothing now: qualification pending a decision, refused, or no work left
                    if idle > 200 or (done.is_set() and idle > 20):
                        return
                    time.sleep(0.01)
                    continue
                idle = 0
                try:
                    annotation_submit(
                        project=project,
                        assignment_id=assignment.pk,
                        actor=actor,
                        data=_labels(assignment.item_id, good),
                    )
                except (LeaseExpired, InvalidTransition):
                    pass
            raise TimeoutError(f"{name} still had work after {DEADLINE_SECONDS} s")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    def decide() -> None:
        # the manager: admit bad1, refuse bad2, each as soon as their qualification failed
        pending = {"bad1": True, "bad2": False}
        try:
            barrier.wait()
            while pending and time.monotonic() < deadline:
                for name, admit in list(pending.items()):
                    failed = Qualification.objects.filter(
                        project=project,
                        annotator=annotators[name],
                        status=QualificationStatus.FAILED,
                    ).exists()
                    if failed:
                        qualification_decide(
                            project=project,
                            annotator_id=annotators[name].pk,
                            actor=manager,
                            admit=admit,
                        )
                        del pending[name]
                time.sleep(0.005)
            done.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=work, args=(name,)) for name in annotators for _ in range(TABS)
    ]
    manager_thread = threading.Thread(target=decide)
    for thread in [*threads, manager_thread]:
        thread.start()
    for thread in [*threads, manager_thread]:
        thread.join()
    assert failures == [], failures

    # then each qualification was recorded once, over exactly k gold items, as expected
    rows = {q.annotator.username: q for q in Qualification.objects.select_related("annotator")}
    assert set(rows) == set(annotators)
    assert {name: rows[name].status for name in rows} == {
        "good1": QualificationStatus.PASSED,
        "good2": QualificationStatus.PASSED,
        "bad1": QualificationStatus.ADMITTED,
        "bad2": QualificationStatus.REFUSED,
    }
    assert all(q.items == K for q in rows.values())
    # and no regular lease is earlier than the qualification (or admission) it rests on
    for name, user in annotators.items():
        since = rows[name].decided_at or rows[name].evaluated_at
        regular = Assignment.objects.filter(annotator=user, gold=False)
        assert not regular.filter(leased_at__lt=since).exists(), name
        gold_before = Assignment.objects.filter(
            annotator=user, gold=True, status=AssignmentStatus.SUBMITTED, submitted_at__lte=since
        ).count()
        assert gold_before >= K, (name, gold_before)
    assert not Assignment.objects.filter(annotator=annotators["bad2"], gold=False).exists()
    assert Assignment.objects.filter(annotator=annotators["good1"], gold=False).exists()
    assert Assignment.objects.filter(annotator=annotators["bad1"], gold=False).exists()
    # and nobody was given a gold item twice; gold items were never compared nor voted
    twice = (
        Assignment.objects.filter(gold=True)
        .values("item", "annotator")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    )
    assert list(twice) == []
    gold_items = Item.objects.filter(project=project, status=ItemStatus.GOLD)
    assert gold_items.count() == 2 * GOLD_QUESTIONS
    assert not Resolution.objects.filter(item__in=gold_items).exists()
    assert not Disagreement.objects.filter(item__in=gold_items).exists()
    units = set(project_votes(project=project).answer.units)
    assert units.isdisjoint(set(gold_items.values_list("pk", flat=True)))
    assert all(i.assigned_count == 0 for i in gold_items)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    not connection.features.has_select_for_update_skip_locked,
    reason="needs row locks with SKIP LOCKED (PostgreSQL)",
)
def test_qualification_gates_regular_work_with_row_locks():
    _run_scenario()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_qualification_gates_regular_work_on_sqlite():
    _run_scenario()
