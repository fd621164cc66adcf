"""The label loop costs the same number of queries in a project of 5 items and one of 200.

An annotator repeats next and submit all day, through the API (``POST .../assignments/next/``,
``PUT .../annotation/``) or the workbench (``POST .../annotate/``, the labelling page, the next
item reserved ahead, the JSON submit with and without a reserve). Each of these requests runs
a fixed number of statements whatever the size of the project: nothing is read per item of
the project. In the larger project the first fifth of the queue is already full (two other
annotators labelled it), so "next item" has full items to pass over, as in a project under way.

Whether a statement's *cost* grows with the project is a question for the database's plans
(``item_free_queue_idx`` lets "next item" walk only the items with a free slot, and the
workbench's "left" count stops at ``QUEUE_LEFT_CAP``); here the statements are counted, on
SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Assignment, AssignmentStatus, Claim, Item, Role
from labeling.services import (
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from labeling.services.tokens import api_token_create
from tests.conftest import import_native
from tests.factories import UserFactory, work_record
from tests.labeling.views.conftest import labels_post

pytestmark = pytest.mark.django_db

SIZES = (5, 200)
JSON = {"HTTP_ACCEPT": "application/json"}


def _record(n: int) -> dict[str, Any]:
    """One question with one candidate answer: one item."""
    record = work_record(f"q{n:04d}")
    record["candidates"] = record["candidates"][:1]
    return record


def _labels(assignment: Assignment, actor: Any) -> None:
    claims = tuple(
        ClaimInput(claim_id=pk, label="not_supported")
        for pk in Claim.objects.filter(candidate__item=assignment.item_id).values_list(
            "pk", flat=True
        )
    )
    annotation_submit(
        project=assignment.item.project,
        assignment_id=assignment.pk,
        actor=actor,
        data=AnnotationInput(answer_label="admissible", claims=claims),
    )


def _project(items: int) -> Any:
    """A started project of ``items`` items, overlap 2, its first fifth full."""
    manager = UserFactory()
    project = project_create(slug=f"size-{items}", name=f"{items} items", manager=manager)
    import_native(project, [_record(n) for n in range(items)])
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    helpers = [UserFactory() for _ in range(2)]
    for helper in helpers:
        membership_set(project=project, user=helper, role=Role.ANNOTATOR)
    for _ in range(items // 5):
        for helper in helpers:
            assignment = item_claim_next(project=project, actor=helper)
            _labels(assignment, helper)
    assert Item.objects.filter(project=project, assigned_count=2).count() == items // 5
    return project


def _counted(call: Any) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as queries:
        response = call()
    return len(queries), response


def _api_loop(project: Any) -> dict[str, int]:
    """The API's next and submit, each twice (the second turn too: the budget holds on)."""
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {api_token_create(user=annotator, name='t').secret}"
    )
    base = f"/api/projects/{project.slug}/assignments"
    client.get(f"/api/projects/{project.slug}/")  # the token's last use is stamped once
    counts: dict[str, int] = {}
    for turn in (1, 2):
        counts[f"api next {turn}"], served = _counted(lambda: client.post(f"{base}/next/"))
        assert served.status_code == 200, served.content
        form = served.json()
        body = {
            "answer_label": "admissible",
            "claims": [{"claim_id": c["id"], "label": "not_supported"} for c in form["claims"]],
        }
        counts[f"api submit {turn}"], saved = _counted(
            lambda form=form, body=body: client.put(
                f"{base}/{form['assignment_id']}/annotation/", body, format="json"
            )
        )
        assert saved.status_code == 200, saved.content
    return counts


def _workbench_loop(project: Any) -> dict[str, int]:
    """The workbench: next, the page, the reserve, the JSON submit with it, then without one."""
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    client = Client()
    client.force_login(annotator)
    client.get(reverse("annotate-next", args=[project.slug]))  # session and user rows warm
    counts: dict[str, int] = {}
    counts["page next"], claimed = _counted(
        lambda: client.post(reverse("annotate-next", args=[project.slug]))
    )
    assert claimed.status_code == 302
    current = Assignment.objects.get(annotator=annotator)
    counts["page form"], page = _counted(lambda: client.get(claimed["Location"]))
    assert page.status_code == 200
    ahead = reverse("annotate-ahead", args=[project.slug, current.pk])
    counts["page ahead"], reserved = _counted(lambda: client.post(ahead, **JSON))
    reserve = reserved.json()["reserve"]
    assert reserve is not None
    data = labels_post(current.item, ahead=str(reserve["assignment_id"]))
    url = reverse("annotate-form", args=[project.slug, current.pk])
    counts["page submit with reserve"], saved = _counted(lambda: client.post(url, data, **JSON))
    body = saved.json()
    assert body["next"]["ahead"] is True and body["reserve"] is not None
    shown = Assignment.objects.get(pk=reserve["assignment_id"])
    url = reverse("annotate-form", args=[project.slug, shown.pk])
    counts["page submit"], saved = _counted(
        lambda: client.post(url, labels_post(shown.item), **JSON)
    )
    assert saved.json()["next"]["html"]
    assert (
        Assignment.objects.filter(annotator=annotator, status=AssignmentStatus.SUBMITTED).count()
        == 2
    )
    return counts


def test_next_and_submit_run_as_many_queries_in_a_project_of_200_items_as_of_5():
    counts = {size: {} for size in SIZES}
    for size in SIZES:
        project = _project(size)
        counts[size].update(_api_loop(project))
        counts[size].update(_workbench_loop(project))

    small, large = (counts[size] for size in SIZES)
    assert small == large, {k: (small[k], large.get(k)) for k in small if small[k] != large.get(k)}
    # every count is a small fixed number (on this database), shown with -s
    print({k: v for k, v in small.items()})  # noqa: T201
    assert max(small.values()) < 80
