"""Publishing a policy version while a vote is submitted: the vote never lands in the wrong round.

Each round, one thread publishes the next version while another submits a vote (without a
policy precondition) on a leased item. Either the vote commits first — it records the old
version and the publish, seeing it, returns the item for labelling (the assignment retired) —
or it runs after the publish and records the new version, its assignment still a vote of the
item, or it was checked under the old version and reached its item's lock after the publish:
then it is refused as stale and nothing is saved. Never a vote under the old version counted in
the new round. PostgreSQL runs the threads
truly at once (publishing locks every item; the submit re-reads the policy under its item's
lock); SQLite runs the same scenario with its writers serialised.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from labeling.exceptions import StaleVersion
from labeling.models import Annotation, Assignment, AssignmentStatus, Role
from labeling.selectors.policies import policy_description_data
from labeling.selectors.review import labelling_policy_get
from labeling.services import item_claim_next, membership_set
from labeling.services.annotations import annotation_submit
from labeling.services.policy_versions import policy_version_publish
from tests.factories import UserFactory, start_labelling, work_record
from tests.labeling.api.conftest import labels_input

ROUNDS = 6


def _round(project: Any, manager: Any, annotator: Any, number: int) -> str:
    assignment = item_claim_next(project=project, actor=annotator)
    assert assignment is not None
    current = labelling_policy_get(project=project)
    content = {**policy_description_data(current), "guideline": f"round {number}"}
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def publish() -> None:
        try:
            barrier.wait()
            policy_version_publish(
                project=project,
                actor=manager,
                content=content,
                note=f"round {number}",
                based_on_version=current.version,
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    refused: list[StaleVersion] = []

    def submit() -> None:
        try:
            barrier.wait()
            annotation_submit(
                project=project,
                assignment_id=assignment.pk,
                actor=annotator,
                data=labels_input(assignment.item, answer="inadmissible"),
            )
        except StaleVersion as exc:
            refused.append(exc)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=publish), threading.Thread(target=submit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    if refused:
        assert refused[0].data == {
            "policy_version": current.version,
            "current_policy_version": current.version + 1,
        }
        assert not Annotation.objects.filter(assignment=assignment).exists()
        return "refused"
    annotation = Annotation.objects.select_related("current__policy").get(assignment=assignment)
    status = Assignment.objects.get(pk=assignment.pk).status
    recorded = annotation.current.policy.version
    if recorded == current.version:
        # the vote came first: the publish saw it and returned the item for labelling
        assert status == AssignmentStatus.RETIRED
        return "vote first"
    assert recorded == current.version + 1
    assert status == AssignmentStatus.SUBMITTED
    return "publish first"


def _run(project: Any, import_records: Any, member: Any) -> None:
    import_records([work_record()])
    # an overlap no round reaches: every item stays open, so a publish restarts any item voted
    start_labelling(project, overlap=10)
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    outcomes = Counter(_round(project, manager, member(Role.ANNOTATOR), n) for n in range(ROUNDS))
    assert sum(outcomes.values()) == ROUNDS
    assert labelling_policy_get(project=project).version == ROUNDS + 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of PostgreSQL")
def test_a_vote_racing_a_publish_lands_in_one_round_with_row_locks(project, import_records, member):
    _run(project, import_records, member)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite variant of the test above")
def test_a_vote_racing_a_publish_lands_in_one_round_on_sqlite(project, import_records, member):
    _run(project, import_records, member)
